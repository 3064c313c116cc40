"""Timelines: trace.json validity, Gantt figures, the interactive page, critical path and plans."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import REFERENCE_CASES

from tfa_sim.analysis import critical_path_report, plan
from tfa_sim.config import load_config
from tfa_sim.engine.report import timing_summary
from tfa_sim.hardware import load_hardware
from tfa_sim.outputs import read_events, read_summary
from tfa_sim.simulation import simulate
from tfa_sim.timeline import make_view

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
    """Share of vector-V busy time during which the cube's M pipe is also busy."""
    def spans(unit_part, pipe):
        return sorted((e.start, e.end) for e in events if unit_part in e.unit and e.pipe == pipe and e.end > e.start)

    cube, vec = spans("cubecore0", "M"), spans("veccore0", "V")
    both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in vec for c, d in cube)
    return both / sum(b - a for a, b in vec)


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
    r = simulate(config, hw, None)
    o = dataclasses.asdict(hw.overhead)
    assert o["block_dispatch"] > 0 and hw.sync.flag_latency > 0
    cp = critical_path_report(r.stats.events, o)
    assert cp["length_cycles"] == pytest.approx(r.total_cycles, abs=1e-3)  # the report rounds to 1e-3
    # with 8 tiles the M pipe serialises independent QK and PV work: the path is shorter than the run
    config = load_config(overrides=["numerics.enabled=false"])
    r = simulate(config, hw, None)
    cp = critical_path_report(r.stats.events, o)
    assert cp["length_cycles"] < r.total_cycles
    unlimited = max(end for _, _, end in plan(r.stats.events, o, None))
    assert unlimited == pytest.approx(cp["length_cycles"], abs=1e-3)
    one_per_pipe = max(end for _, _, end in plan(r.stats.events, o, {}))
    assert cp["length_cycles"] <= one_per_pipe + 1e-6


@pytest.mark.parametrize("section, key, value, bound", [
    ("vector", "repeat_scale", 5.0, "vec.V"),
    ("move", "l0c_to_gm", 8.0, "cube.FIX"),
    ("move", "gm_to_l1", 8.0, "cube.MTE2"),
], ids=["slow_vector", "slow_fixpipe", "slow_cube_load"])
def test_report_names_a_deliberately_slow_pipe(section, key, value, bound):
    config = load_config(overrides=["numerics.enabled=false", "case.s1=4096"])
    hw = load_hardware(config.hardware)
    slow = hw.with_values({f"{section}.{key}": value})
    summary = timing_summary(simulate(config, slow, None, log_events=False), config)
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
