"""The columnar event log (tfa_sim.rundir.events): the records it holds, events.npz round trips, the CSV derived from
it, the thresholds for large runs, and ``tfa-sim trace`` window exports."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import TIMING_SMALL
from test_hostile_cli import tfa

from tfa_sim.api import runner
from tfa_sim.rundir.event_file import load_log
from tfa_sim.rundir.events import EVENT_DTYPES, FLUSH_ROWS, EventLog
from tfa_sim.rundir.outputs import read_events, read_log
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import load_config
from tfa_sim.spec.units import parse_unit
from tfa_sim.stages.plan import kernel_plan


def test_the_columnar_log_reads_back_as_the_csv_rows(timing_run):
    """events.npz → records equals events.csv → records, field by field (floats bit for bit)."""
    from_npz, from_csv = read_events(timing_run / "events.npz"), read_events(timing_run / "events.csv")
    assert len(from_npz) == len(from_csv) > 500
    assert from_npz == from_csv
    assert [np.float64(e.start).tobytes() for e in from_npz] == [np.float64(e.start).tobytes() for e in from_csv]
    assert any(e.slots for e in from_npz) and any(e.deps for e in from_npz)
    assert read_events(timing_run) == from_npz  # a run directory reads its events.npz


def test_save_and_load_round_trip_every_column():
    config = load_config(None, None, ["case.s0=256", "case.s1=1024", "numerics.enabled=false"])
    log = simulate(kernel_plan(config, load_hardware(config.hardware)), None, log_events=True).stats.events
    assert isinstance(log, EventLog)
    buf = io.BytesIO()
    log.save(buf)
    back = load_log(buf.getvalue())
    for mine, theirs in ((log.events, back.events), (log.edges, back.edges), (log.slots, back.slots)):
        for k, a in mine.view().items():
            assert np.array_equal(a, theirs.view()[k]) and a.dtype == theirs.view()[k].dtype, k
    assert back.records() == log.records()


def test_growth_keeps_every_row():
    log = EventLog(capacity=2)
    unit, pipe = log.unit_code("core0.cubecore0"), log.pipe_code("M")
    for i in range(100):
        log.add(i, unit, pipe, "compute_qk", 0, i, 0, "TMATMUL", float(i), i + 0.5, 0, 7)
        if i:
            log.edges_to(i, [(SimpleNamespace(id=i - 1), "data", 0.0, "")])
    assert len(log) == 100 and log.events.view()["tile"].tolist() == list(range(100))
    assert set(log.events.view()) == set(EVENT_DTYPES)
    assert log.records()[99].deps == ((98, "data", 0.0, ""),)


def test_rows_buffered_across_flushes_are_exact_and_in_order():
    """Rows pass through a Python buffer and float64 on their way into the columns: values at the edges of what a
    log holds (ids and bytes near 2⁵³, tile −1, cycles with fractions) come back exactly, in order, whether read
    between flushes or after them."""
    log = EventLog(capacity=3)
    unit, pipe = log.unit_code("core3.veccore1"), log.pipe_code("V")
    n = 2 * FLUSH_ROWS + 5
    big = 2 ** 53 - n
    want = [(big + i, unit, pipe, i % 3 - 1, i * 7919 % 1000003, (i * 3.25) / 7, i * 1.0 + 1e-3) for i in range(n)]
    for i, (ident, u, p, tile, nbytes, start, end) in enumerate(want):
        log.add(ident, u, p, ("compute_p", "compute_gu")[i % 2], i, tile, 1, "TROWMAX", start, end, nbytes, big - i)
        log.slot(ident, "UB.src", i % 2)
        if i == FLUSH_ROWS // 2:  # a read in between flushes the rows buffered so far
            assert len(log) == i + 1 and log.events.view()["id"][-1] == ident
    ev, slots = log.events.view(), log.slots.view()
    assert len(log) == n == len(slots["id"])
    assert ev["id"].tolist() == [w[0] for w in want] and ev["tile"].tolist() == [w[3] for w in want]
    assert ev["nbytes"].tolist() == [w[4] for w in want] and ev["flops"].tolist() == [big - i for i in range(n)]
    assert ev["start"].tolist() == [w[5] for w in want] and ev["end"].tolist() == [w[6] for w in want]
    assert log.names("stages") == ["compute_p", "compute_gu"] and ev["stage"].tolist() == [i % 2 for i in range(n)]
    assert slots["slot"].tolist() == [i % 2 for i in range(n)] and slots["id"].tolist() == ev["id"].tolist()


def test_trace_window_export_holds_exactly_the_window(timing_run, tmp_path):
    out = tmp_path / "w.json"
    r = tfa("trace", str(timing_run), "--cores", "1:3", "--tiles", "0:2", "--out", str(out))
    assert r.code == 0, r.err
    trace = json.loads(out.read_text())
    ids = sorted(e["args"]["id"] for e in trace["traceEvents"] if e["ph"] == "X")
    want = sorted(e.id for e in read_events(timing_run) if 1 <= parse_unit(e.unit).core < 3 and 0 <= e.tile < 2)
    assert ids == want and want
    units = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {parse_unit(u).core for u in units} == {1, 2}
    assert trace["otherData"]["clock_mhz"] > 0 and trace["otherData"]["case"]


def test_full_trace_export_equals_the_runs_trace(timing_run, tmp_path):
    r = tfa("trace", str(timing_run), "--out", str(tmp_path / "all.json"))
    assert r.code == 0, r.err
    assert json.loads((tmp_path / "all.json").read_text()) == json.loads((timing_run / "trace.json").read_text())


@pytest.mark.parametrize("argv, needle", [(["--cores", "3:1"], "--cores"), (["--tiles", "x"], "--tiles"),
                                          (["--cores", "90:99"], "no events")])
def test_a_bad_window_is_one_line(timing_run, tmp_path, argv, needle):
    r = tfa("trace", str(timing_run), *argv, "--out", str(tmp_path / "w.json"))
    assert r.code == 2 and needle in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_large_runs_skip_the_csv_and_window_the_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "EVENTS_CSV_MAX", 100)
    monkeypatch.setattr(runner, "TRACE_MAX_EVENTS", 100)
    out = tmp_path / "big"
    r = tfa("run", *TIMING_SMALL, "--trace-window", "0:1", "--out", str(out))
    assert r.code == 0, r.err
    assert not (out / "events.csv").exists() and "events.csv skipped" in r.out and "tfa-sim trace" in r.out
    trace = json.loads((out / "trace.json").read_text())
    units = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {parse_unit(u).core for u in units} == {0}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["event_log"] == {"events": len(read_log(out / "events.npz")), "file": "events.npz", "csv": False,
                                    "trace_cores": [0, 1]}
    r = tfa("timeline", str(out), "--cores", "0", "-o", str(tmp_path / "t.svg"))  # from events.npz alone
    assert r.code == 0, r.err
    r = tfa("run", *TIMING_SMALL, "--events-csv", "--out", str(out))
    assert r.code == 0, r.err
    assert read_events(out / "events.csv") == read_events(out / "events.npz")


def networkx_critical_path(records: list, overhead: dict, launches: list[int]) -> tuple[float, list, dict]:
    """The reference: the longest SOURCE→SINK path of analysis.task_graph walked with networkx (as before the
    columnar walk), with its share per stage."""
    import networkx as nx

    from tfa_sim.views.analysis import SINK, SOURCE, task_graph

    g = task_graph(records, overhead, launches)
    dist, back = {}, {}
    for v in nx.topological_sort(g):
        best, arg = 0.0, None
        for u in g.predecessors(v):
            cand = dist[u] + g.nodes[u]["dur"] + g.edges[u, v]["lat"]
            if arg is None or cand > best:
                best, arg = cand, u
        dist[v], back[v] = best, arg
    path = [SINK]
    while back[path[-1]] is not None:
        path.append(back[path[-1]])
    path.reverse()
    share: dict = {}
    for u, v in zip(path, path[1:]):
        key = g.nodes[u]["stage"] if u != SOURCE else "launch"
        share[key] = share.get(key, 0.0) + g.nodes[u]["dur"]
        if g.edges[u, v]["lat"]:
            key = "overhead" if g.edges[u, v]["cause"] in ("launch", "dispatch") else "sync"
            share[key] = share.get(key, 0.0) + g.edges[u, v]["lat"]
    return dist[SINK], path[1:-1], share


@pytest.mark.parametrize("overrides", [["case.s0=512", "case.s1=2048"], ["case.s1=128", "tiling.tile_s1=128"],
                                       ["case.s0=100", "case.s1=4096", "case.heads=2", "schedule.s1_split=4"],
                                       ["kernel.launch_grid=persistent", "case.s0=256", "case.s1=512",
                                        "case.causal=true", "hardware.cores=1"]],
                         ids=["4 cores", "one tile", "split-S1 (two launches)", "persistent causal (units overlap)"])
def test_columnar_critical_path_equals_the_networkx_walk(overrides):
    import dataclasses

    from tfa_sim.views.analysis import critical_path_report

    config = load_config(None, None, ["numerics.enabled=false", *overrides])
    hw = load_hardware(config.hardware)
    sim = simulate(kernel_plan(config, hw), None, log_events=True)
    overhead, launches = dataclasses.asdict(hw.overhead), [x.first_block for x in sim.launches[1:]]
    length, path, share = networkx_critical_path(sim.stats.events.records(), overhead, launches)
    cp = critical_path_report(sim.stats.events, overhead, launches)
    assert cp["length_cycles"] == round(length, 3) and cp["path"] == path
    assert path == sorted(path)  # ids are completion order: nothing waits for what completed after it
    assert cp["share"] == {k: round(v / length, 4) for k, v in sorted(share.items(), key=lambda kv: -kv[1]) if v}
