"""Timelines: trace.json validity, Gantt figures, the interactive page, critical path and plans."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from conftest import REFERENCE_CASES

from tfa_sim.engine.report import timing_summary
from tfa_sim.rundir.outputs import read_events, read_summary
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import load_config
from tfa_sim.stages.plan import kernel_plan
from tfa_sim.views.analysis import critical_path_report, plan
from tfa_sim.views.timeline import STAGES, Bar, RunView, make_view, render

UNIT = re.compile(r"^core\d+\.(cubecore0|veccore[01])$")
PIPES = {"cubecore0": {"dispatch", "MTE2", "MTE1", "M", "FIX"}, "veccore0": {"MTE2", "V", "MTE3"},
         "veccore1": {"MTE2", "V", "MTE3"}}


def tfa(*args):
    r = subprocess.run([sys.executable, "-m", "tfa_sim", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def validate_trace(trace: dict) -> dict:
    """The Chrome trace event format, checked field by field; returns counts by phase."""
    assert isinstance(trace["traceEvents"], list) and trace["otherData"]["clock_mhz"] > 0
    clock = trace["otherData"]["clock_mhz"]
    names: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    flows: dict[int, dict[str, dict]] = defaultdict(dict)
    counts: dict[str, int] = defaultdict(int)
    for ev in trace["traceEvents"]:
        ph = ev["ph"]
        counts[ph] += 1
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str), ev
        if ph == "M":
            if ev["name"] == "process_name":
                names[ev["pid"]] = ev["args"]["name"]
            elif ev["name"] == "thread_name":
                threads[(ev["pid"], ev["tid"])] = ev["args"]["name"]
            continue
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0, ev
        if ph == "X":
            assert ev["dur"] >= 0 and isinstance(ev["tid"], int), ev
            args = ev["args"]
            assert {"stage", "tile", "slots", "bytes", "flops", "cycles"} <= set(args), args
            assert ev["ts"] * clock == pytest.approx(args["start_cycle"], rel=1e-9, abs=1e-6)
            assert ev["dur"] * clock == pytest.approx(args["cycles"], rel=1e-9, abs=1e-6)
            tracks[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
        elif ph in ("s", "f"):
            assert ph not in flows[ev["id"]], f"flow id {ev['id']} has two '{ph}' events"
            flows[ev["id"]][ph] = ev
        elif ph == "C":
            assert all(isinstance(v, (int, float)) for v in ev["args"].values()), ev
        else:
            pytest.fail(f"unexpected phase {ph}")
    assert all(UNIT.match(n) for n in names.values()), names
    for (pid, tid), spans in tracks.items():
        assert threads[(pid, tid)] in PIPES[names[pid].split(".")[1]]
        spans.sort()
        for (a0, a1), (b0, _b1) in zip(spans, spans[1:]):
            assert b0 >= a1 - 1e-9, f"overlap on {names[pid]} {threads[(pid, tid)]}: {a0}-{a1} and {b0}"
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} unpaired"
        assert pair["s"]["ts"] <= pair["f"]["ts"] and pair["f"]["bp"] == "e"
    return counts


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_trace_json_is_valid_for_every_reference_case(name, tmp_path):
    tfa("run", "--case", name, "--no-numerics", "--out", str(tmp_path))
    counts = validate_trace(json.loads((tmp_path / "trace.json").read_text()))
    events = read_events(tmp_path / "events.csv")
    assert counts["X"] == len(events) and counts["s"] > 0 and counts["C"] > 0


def overlap_fraction(events) -> float:
    """Share of the busy time of the less busy of vector-V and cube-M during which the other is busy too."""
    def spans(unit_part, pipe):
        return sorted((e.start, e.end) for e in events if unit_part in e.unit and e.pipe == pipe and e.end > e.start)

    cube, vec = spans("cubecore0", "M"), spans("veccore0", "V")
    both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in vec for c, d in cube)
    return both / min(sum(b - a for a, b in vec), sum(b - a for a, b in cube))


@pytest.fixture(scope="module")
def preload_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("preload")
    for p in (0, 2, 4):
        tfa("run", "--set", f"schedule.qk_preload={p}", "--out", str(root / f"p{p}"))
    return root


def test_preload_zero_alternates_and_preload_overlaps(preload_runs):
    frac = {p: overlap_fraction(read_events(preload_runs / f"p{p}" / "events.csv")) for p in (0, 2, 4)}
    assert frac[0] < 0.1, frac
    assert frac[2] > 0.4 and frac[4] > 0.4, frac
    spans = {p: read_summary(preload_runs / f"p{p}")["total_cycles"] for p in (0, 2, 4)}
    assert spans[0] > spans[2] >= spans[4], spans


def test_gantt_figures_show_summary_makespans(preload_runs, tmp_path):
    runs = [str(preload_runs / f"p{p}") for p in (0, 2, 4)]
    out = tmp_path / "cmp.png"
    r = tfa("timeline", "--compare", *runs, "-o", str(out))
    assert out.stat().st_size > 20_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for run in runs:
        s = read_summary(Path(run))
        events = read_events(Path(run) / "events.csv")
        assert max(e.end for e in events) == pytest.approx(s["total_cycles"])  # the block-end handshake
        view = make_view("x", s, events)
        assert f"makespan {s['total_cycles']:.0f} cycles" in view.makespan
        assert f"makespan {s['total_cycles']:.0f} cycles = {s['time_us']:.2f} µs" in r.stdout
    svg = tmp_path / "stage.svg"
    tfa("timeline", runs[2], "-o", str(svg), "--by", "stage", "--arrows", "--tiles", "0:2")
    text = svg.read_text()
    assert text.startswith("<?xml") and "qk_preload 4" in text


SVG = "{http://www.w3.org/2000/svg}"
COLOUR = {colour: stage for stage, (_, colour) in STAGES.items()}


def draw(views: list, path: Path, arrows: bool = False) -> ET.Element:
    """``render`` to ``path`` (an .svg) and the parsed document's root."""
    render(views, path, arrows)
    assert path.read_bytes().startswith(b"<?xml")
    return ET.parse(path).getroot()


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == cls]


def only(root: ET.Element, cls: str) -> ET.Element:
    (g,) = groups(root, cls)
    return g


def cycle_at(panel: ET.Element, x: float) -> float:
    """The cycle at pixel ``x`` by the scale the panel states."""
    return float(panel.get("data-cycle0")) + (x - float(panel.get("data-x0"))) / float(panel.get("data-scale"))


def px(panel: ET.Element) -> float:
    """Cycles per 1/100 px, the precision of the coordinates written."""
    return 0.01 / float(panel.get("data-scale"))


def frame(panel: ET.Element) -> tuple[float, float, float, float]:
    (rect,) = [r for r in panel.iter(f"{SVG}rect") if r.get("class") == "frame"]
    return tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))


def geometry(rect: ET.Element) -> tuple[float, float, float, float]:
    return tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))


@pytest.fixture(scope="module")
def p4(preload_runs):
    return read_summary(preload_runs / "p4"), read_events(preload_runs / "p4")


@pytest.mark.parametrize("by", ["pipe", "stage", "unit"])
def test_svg_bars_are_the_events_on_the_stated_scale(p4, by, tmp_path):
    summary, events = p4
    view = make_view("p4", summary, events, by=by)
    root = draw([view], tmp_path / "t.svg")
    panel = only(root, "panel")
    busy = [e for e in events if e.end > e.start]  # the axis: the bars and the run's end (the block-end flag)
    first, last = min(e.start for e in busy), max(max(e.end for e in busy), summary["total_cycles"])
    assert float(panel.get("data-cycle0")) == pytest.approx(first - 0.02 * (last - first))
    x, top, width, height = frame(panel)
    assert cycle_at(panel, x + width) == pytest.approx(last + 0.02 * (last - first))
    lanes = [t.text for t in only(panel, "lanes")]
    assert lanes == view.lanes
    rects = [r for r in panel.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert len(rects) == len(view.bars)
    drawn = []
    for r in rects:
        rx, ry, rw, rh = geometry(r)
        row = int((ry + rh / 2 - top) // (height / len(lanes)))
        centre = top + (row + 0.5) * height / len(lanes)
        stage = COLOUR[r.get("fill")]
        if by == "unit":  # QK/P in the upper half of the lane, the rest in the lower half
            assert (ry + rh <= centre + 0.01) if stage in ("compute_qk", "compute_p") else (ry >= centre - 0.01)
        else:
            assert ry < centre < ry + rh
        drawn.append((lanes[row], stage, cycle_at(panel, rx), cycle_at(panel, rx + rw)))
    expected = sorted((b.lane, b.stage, b.start, b.end) for b in view.bars)
    for got, want in zip(sorted(drawn), expected):
        assert got[:2] == want[:2] and got[2:] == pytest.approx(want[2:], abs=2 * px(panel))
    if by == "pipe":  # one bar per instruction group
        assert Counter((e.unit, e.stage) for e in busy) == Counter((lane.rsplit(" ", 1)[0], stage)
                                                                   for lane, stage, _, _ in drawn)


def test_svg_makespan_title_legend_axes_and_tooltips(p4, tmp_path):
    summary, events = p4
    view = make_view("p4", summary, events)
    root = draw([view], tmp_path / "t.svg")
    panel = only(root, "panel")
    (line,) = [ln for ln in panel.iter(f"{SVG}line") if ln.get("class") == "makespan"]
    assert line.get("stroke-dasharray") and line.get("x1") == line.get("x2")
    assert cycle_at(panel, float(line.get("x1"))) == pytest.approx(summary["total_cycles"], abs=px(panel))
    (title,) = [t for t in root.iter(f"{SVG}text") if t.get("class") == "title"]
    text = "".join(title.itertext())
    assert "qk_preload 4" in text and f"makespan {summary['total_cycles']:.0f} cycles" in text
    legend = [t.text for t in only(root, "legend").iter(f"{SVG}text")]
    assert legend == [name for name, _ in STAGES.values()]
    swatches = {r.get("fill") for r in only(root, "legend").iter(f"{SVG}rect")}
    assert {r.get("fill") for r in panel.iter(f"{SVG}rect") if r.get("class") == "bar"} <= swatches
    for name, scale in (("axis cycles", 1.0), ("axis us", summary["clock_mhz"])):
        axis = only(root, name)
        ticks = [(float(t.get("x")), float(t.text)) for t in axis.iter(f"{SVG}text") if t.get("font-size") is None]
        assert 4 <= len(ticks) <= 12
        for x, value in ticks:  # each value sits where the scale puts it
            assert cycle_at(panel, x) == pytest.approx(value * scale, abs=px(panel))
        steps = {round(b - a, 9) for (_, a), (_, b) in zip(ticks, ticks[1:])}
        assert len(steps) == 1 and f"{steps.pop():.0e}"[0] in "125"
    tooltips = ["".join(r.itertext()) for r in panel.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert sorted(tooltips) == sorted(b.text.replace("<br>", "\n") for b in view.bars)
    assert not list(only(panel, "arrows"))


def test_svg_tile_numbers_and_arrows(p4, tmp_path):
    summary, events = p4
    view = make_view("p4", summary, events, by="stage", arrows=True)
    root = draw([view], tmp_path / "t.svg", arrows=True)
    panel = only(root, "panel")
    span = max(b.end for b in view.bars) - min(b.start for b in view.bars)
    wide = [b for b in view.bars if b.end - b.start >= 0.012 * span and b.stage != "dispatch"]
    assert 0 < len(wide) < len(view.bars) <= 600 and any(b.stage == "dispatch" for b in view.bars)
    labels = only(panel, "tiles")
    assert sorted(t.text for t in labels) == sorted(str(b.tile) for b in wide)
    lines = list(only(panel, "arrows"))
    assert len(lines) == len(view.arrows) > 0 and all(ln.get("marker-end") == "url(#head)" for ln in lines)
    starts = sorted(cycle_at(panel, float(ln.get("x1"))) for ln in lines)
    assert starts == pytest.approx(sorted(a[1] for a in view.arrows), abs=px(panel))
    assert not list(only(draw([view], tmp_path / "u.svg", arrows=False), "arrows"))


def test_svg_compare_stacks_panels_on_one_axis(preload_runs, tmp_path):
    views = [make_view(f"p{p}", read_summary(preload_runs / f"p{p}"), read_events(preload_runs / f"p{p}"))
             for p in (0, 4)]
    root = draw(views, tmp_path / "t.svg")
    panels = groups(root, "panel")
    assert len(panels) == 2
    assert {(p.get("data-cycle0"), p.get("data-scale")) for p in panels} == {(panels[0].get("data-cycle0"),
                                                                             panels[0].get("data-scale"))}
    assert frame(panels[0])[1] + frame(panels[0])[3] < frame(panels[1])[1]  # stacked, the first above
    titles = ["".join(t.itertext()) for t in root.iter(f"{SVG}text") if t.get("class") == "title"]
    assert ["qk_preload 0" in titles[0], "qk_preload 4" in titles[1]] == [True, True]
    for panel, view in zip(panels, views):
        assert sum(r.get("class") == "bar" for r in panel.iter(f"{SVG}rect")) == len(view.bars)
    # p0 ends last: its makespan is on the axis; both makespans are drawn where they are
    for panel, view in zip(panels, views):
        (line,) = [ln for ln in panel.iter(f"{SVG}line") if ln.get("class") == "makespan"]
        assert cycle_at(panel, float(line.get("x1"))) == pytest.approx(view.summary["total_cycles"], abs=px(panel))


def test_svg_is_deterministic(preload_runs, tmp_path):
    def once(name: str) -> bytes:
        view = make_view("p2", read_summary(preload_runs / "p2"), read_events(preload_runs / "p2"), arrows=True)
        render([view], tmp_path / name, arrows=True)
        return (tmp_path / name).read_bytes()

    assert once("a.svg") == once("b.svg")


def test_svg_escapes_text_and_drops_tooltips_of_crowded_views(p4, tmp_path):
    summary = {**p4[0], "case": "<case> & \"x\" \x01 \ud800"}
    lanes = ["core0.cubecore0 <M>", "core0.veccore0 V&"]
    bars = [Bar(lanes[i % 2], 10.0 * i, 10.0 * i + 8, "compute_qk", i, f"a<b>&<br>{i}") for i in range(12)]
    root = draw([RunView("x", summary, lanes, bars, [])], tmp_path / "t.svg")
    title = "".join(next(t for t in root.iter(f"{SVG}text") if t.get("class") == "title").itertext())
    assert title.startswith('<case> & "x" \ufffd \ufffd on ')
    assert [t.text for t in only(root, "lanes")] == lanes
    tooltips = sorted("".join(r.itertext()) for r in root.iter(f"{SVG}rect") if r.get("class") == "bar")
    assert tooltips == sorted(f"a<b>&\n{i}" for i in range(12))
    crowd = [Bar(lanes[0], 2.0 * i, 2.0 * i + 1, "compute_p", i, "t") for i in range(5001)]
    root = draw([RunView("x", summary, lanes, crowd, [])], tmp_path / "c.svg")
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert len(rects) == 5001 and not any(len(r) for r in rects)
    assert not list(only(root, "tiles"))  # over 600 bars: no tile numbers


@pytest.mark.parametrize("lo, hi, ticks", [
    (0, 100, [0, 20, 40, 60, 80, 100]),
    (-753.3, 38418.3, [0, 5000, 10000, 15000, 20000, 25000, 30000, 35000]),
    (-0.42, 21.34, [0, 5, 10, 15, 20]),
    (13.6, 21.1, [14, 15, 16, 17, 18, 19, 20, 21]),
    (0.0012, 0.0031, [0.0015, 0.002, 0.0025, 0.003]),  # span / 8 = 2.4e-4: the next round step is 5e-4
])
def test_nice_ticks(lo, hi, ticks):
    from tfa_sim.views.svg_timeline import nice_ticks, tick_label

    got = nice_ticks(lo, hi)
    assert got == pytest.approx(ticks)
    assert [float(tick_label(t, got)) for t in got] == pytest.approx(ticks)


def test_default_run_does_not_import_matplotlib(tmp_path):
    """The default run's timeline.svg is plain text: matplotlib's import alone took most of the run."""
    code = ("import sys; from tfa_sim.cli import main; "
            f"rc = main(['run', '--out', {str(tmp_path / 'run')!r}]); "
            "print(rc, 'matplotlib' in sys.modules, 'plotly' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-3:] == ["0", "False", "False"]
    assert ET.parse(tmp_path / "run" / "timeline.svg").getroot().tag == f"{SVG}svg"


def test_interactive_html_renders_in_a_browser(preload_runs, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium on this machine (.ci/run installs it): the page itself is still written below")
    page = tmp_path / "t.html"
    r = tfa("timeline", str(preload_runs / "p4"), "-o", str(page))
    assert "http://" not in re.sub(r"http://www\.w3\.org[^\"']*", "", page.read_text()[:2000])
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                          "--virtual-time-budget=15000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    n_bars = int(re.search(r"(\d+) bars", r.stdout).group(1))
    drawn = len(re.findall(r'<g class="point"', dom))
    assert drawn == n_bars, f"{drawn} bars drawn, expected {n_bars}"
    assert "cubecore0 M" in dom and "veccore1 V" in dom


def one_tile_config(**schedule):
    return load_config(overrides=["numerics.enabled=false", "case.s1=128", "tiling.tile_s1=128",
                                  *[f"schedule.{k}={v}" for k, v in schedule.items()]])


def test_critical_path_equals_makespan_when_resources_are_not_the_bound():
    """One tile, free data moves (so no load queues behind another on MTE2): every pipe only
    ever waits for data, and the longest path of the task graph is the makespan."""
    config = one_tile_config(qk_preload=1)
    hw = load_hardware(config.hardware)
    free_moves = {f"move.{f.name}": float("inf") for f in dataclasses.fields(hw.move)}
    hw = hw.with_values({**free_moves, "gm.l2_latency": 0.0, "gm.miss_latency": 0.0, "gm.l2_bandwidth": float("inf"),
                         "gm.hbm_bandwidth": float("inf")})
    r = simulate(kernel_plan(config, hw), None)
    o = dataclasses.asdict(hw.overhead)
    assert o["block_dispatch"] > 0 and hw.sync.flag_latency > 0
    cp = critical_path_report(r.stats.events, o)
    assert cp["length_cycles"] == pytest.approx(r.total_cycles, abs=1e-3)  # the report rounds to 1e-3
    # with 8 tiles the M pipe serialises independent QK and PV work: the path is shorter than the run
    config = load_config(overrides=["numerics.enabled=false"])
    r = simulate(kernel_plan(config, hw), None)
    cp = critical_path_report(r.stats.events, o)
    assert cp["length_cycles"] < r.total_cycles
    unlimited = max(end for _, _, end in plan(r.stats.events, o, None))
    assert unlimited == pytest.approx(cp["length_cycles"], abs=1e-3)
    one_per_pipe = max(end for _, _, end in plan(r.stats.events, o, {}))
    assert cp["length_cycles"] <= one_per_pipe + 1e-6


@pytest.mark.parametrize("section, key, value, bound", [
    ("vector", "exp_per_repeat", 40.0, "vec.V"),
    ("move", "l0c_to_gm", 8.0, "cube.FIX"),
    ("move", "gm_to_l1", 8.0, "cube.MTE2"),
], ids=["slow_vector", "slow_fixpipe", "slow_cube_load"])
def test_report_names_a_deliberately_slow_pipe(section, key, value, bound):
    config = load_config(overrides=["numerics.enabled=false", "case.s1=4096"])
    hw = load_hardware(config.hardware)
    slow = hw.with_values({f"{section}.{key}": value})
    summary = timing_summary(simulate(kernel_plan(config, slow), None, log_events=False), config)
    assert summary["bound_pipe"] == bound, summary["pipe_busy_mean"]


def test_bottleneck_report_in_summary(preload_runs):
    s = read_summary(preload_runs / "p4")
    b = s["bottleneck"]
    assert 0 < b["critical_path"]["length_cycles"] <= s["total_cycles"]
    assert sum(b["critical_path"]["share"].values()) == pytest.approx(1.0, abs=1e-3)
    assert b["bubbles"] and all(re.match(r"^(cube|vec)\.\w+ stalled \d+% of the time waiting for ", x["text"])
                                for x in b["bubbles"])


def test_plan_command(preload_runs, tmp_path):
    r = tfa("plan", str(preload_runs / "p4"), "--resources", "pipes", "--units", "cube.M=2", "-o",
            str(tmp_path / "plan.png"))
    assert re.search(r"plan \(one server per pipe \(cube.M=2\)\): \d+ cycles", r.stdout)
    assert (tmp_path / "plan.png").exists()
