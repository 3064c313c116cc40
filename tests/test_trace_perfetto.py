"""``tfa-sim trace --format perfetto``: the Perfetto protobuf trace, parsed back with Perfetto's own schema and
checked against the event log (``events.npz``) and the JSON trace of the same window."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket, TrackEvent
from test_hostile_cli import assert_refused, tfa

from tfa_sim.rundir.outputs import read_log
from tfa_sim.spec.units import parse_unit


def export(run: Path, out: Path, *argv: str) -> str:
    """``tfa-sim trace RUN ARGV --out OUT``; its stdout line."""
    r = tfa("trace", str(run), *argv, "--out", str(out))
    assert r.code == 0, r.err
    return r.out


def both(run: Path, tmp_path: Path, *window: str) -> tuple[Trace, dict[str, Any]]:
    """The Perfetto trace and the JSON trace of one window."""
    assert "Perfetto protobuf" in export(run, tmp_path / "t.pftrace", *window, "--format", "perfetto")
    assert "Chrome JSON" in export(run, tmp_path / "t.json", *window, "--format", "json")
    return (Trace.FromString((tmp_path / "t.pftrace").read_bytes()),
            json.loads((tmp_path / "t.json").read_text()))


def slices(trace: Trace) -> dict[int, dict[str, Any]]:
    """Each slice by its ``id`` annotation: track, begin, end, name, category, annotations (names resolved)."""
    interned = trace.packet[0].interned_data
    names = {n.iid: n.name for n in interned.debug_annotation_names}
    kinds, stages = ({n.iid: n.name for n in table} for table in (interned.event_names, interned.event_categories))
    strings = {s.iid: s.str.decode() for s in interned.debug_annotation_string_values}
    out: dict[int, dict[str, Any]] = {}
    open_: dict[int, dict[str, Any]] = {}
    for packet in trace.packet:
        event = packet.track_event
        if event.type == TrackEvent.TYPE_SLICE_BEGIN:
            assert event.track_uuid not in open_, "a slice begins inside another on its track"
            args = {names[a.name_iid]: strings[a.string_value_iid] if a.HasField("string_value_iid") else
                    {d.name: d.int_value for d in a.dict_entries} if a.dict_entries else
                    a.double_value if a.HasField("double_value") else a.int_value for a in event.debug_annotations}
            open_[event.track_uuid] = {"track": event.track_uuid, "begin": packet.timestamp, "args": args,
                                       "name": kinds[event.name_iid], "cat": stages[event.category_iids[0]],
                                       "flows": list(event.flow_ids), "ends_flows": list(event.terminating_flow_ids)}
        elif event.type == TrackEvent.TYPE_SLICE_END:
            s = open_.pop(event.track_uuid)
            s["end"] = packet.timestamp
            out[s["args"]["id"]] = s
    assert not open_, "a slice never ends"
    return out


def descriptors(trace: Trace) -> list[Any]:
    return [p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")]


def test_every_slice_is_a_row_of_the_log_at_its_rounded_time(timing_run, tmp_path):
    trace, js = both(timing_run, tmp_path)
    got = slices(trace)
    log = read_log(timing_run / "events.npz")
    clock = json.loads((timing_run / "summary.json").read_text())["clock_mhz"]
    assert len(got) == sum(e["ph"] == "X" for e in js["traceEvents"]) == len(log) > 500
    units, kinds, stages = log.names("units"), log.names("kinds"), log.names("stages")
    ev = log.events.view()
    for i, u, s, b, t, sb, k, start, end, nb, fl in zip(*(ev[c].tolist() for c in (
            "id", "unit", "stage", "block", "tile", "sub", "kind", "start", "end", "nbytes", "flops"))):
        mine = got[i]
        assert (mine["begin"], mine["end"]) == (round(start / clock * 1000), round(end / clock * 1000))
        assert (mine["name"], mine["cat"], mine["args"]["stage"]) == (kinds[k], stages[s], stages[s])
        sub = "sub_tile" if parse_unit(units[u]).kind == "cube" else "row_slice"
        assert {k_: mine["args"][k_] for k_ in ("block", "tile", sub, "bytes", "flops", "cycles", "start_cycle")} == \
            {"block": b, "tile": t, sub: sb, "bytes": nb, "flops": fl, "cycles": end - start, "start_cycle": start}
    slots = {e["args"]["id"]: e["args"]["slots"] for e in js["traceEvents"] if e["ph"] == "X" and e["args"]["slots"]}
    assert slots and slots == {i: s["args"]["slots"] for i, s in got.items() if "slots" in s["args"]}


def test_a_pipes_slices_follow_each_other(timing_run, tmp_path):
    trace, _ = both(timing_run, tmp_path)
    by_track: dict[int, list[tuple[int, int]]] = {}
    for s in slices(trace).values():
        by_track.setdefault(s["track"], []).append((s["begin"], s["end"]))
    for spans in by_track.values():
        spans.sort()
        assert all(b <= e for b, e in spans)
        assert all(e0 <= b1 for (_, e0), (b1, _) in zip(spans, spans[1:]))


def test_tracks_are_the_json_traces_processes_and_threads(timing_run, tmp_path):
    trace, js = both(timing_run, tmp_path)
    meta = [e for e in js["traceEvents"] if e["ph"] == "M"]
    want = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"}
    tracks = descriptors(trace)
    processes = {d.process.pid: d for d in tracks if d.HasField("process")}
    assert {p: d.process.process_name for p, d in processes.items()} == want
    assert "core0.cubecore0" in want.values()
    assert all(d.sibling_order_rank == p for p, d in processes.items())  # trace.json's process_sort_index
    mine = {(d.thread.pid, d.thread.thread_name) for d in tracks if d.HasField("thread")}
    assert mine == threads and (1, "MTE2") in mine
    tids = [d.thread.tid for d in tracks if d.HasField("thread")]
    assert len(set(tids)) == len(tids) and not set(tids) & set(processes)
    uuids = {d.uuid for d in tracks if d.HasField("thread")}
    assert {s["track"] for s in slices(trace).values()} <= uuids


def test_flows_join_the_same_slices_as_the_json_arrows(timing_run, tmp_path):
    trace, js = both(timing_run, tmp_path)
    clock = js["otherData"]["clock_mhz"]
    got = slices(trace).values()
    starts = Counter(f for s in got for f in s["flows"])
    ends = Counter(f for s in got for f in s["ends_flows"])
    assert set(starts) == set(ends) == set(range(1, js["otherData"]["flows"] + 1)) and js["otherData"]["flows"] > 0
    assert set(starts.values()) == set(ends.values()) == {1}
    at = {(e["ph"], e["id"]): e["ts"] for e in js["traceEvents"] if e["ph"] in "sf"}
    for s in got:
        for ph, ids in (("s", s["flows"]), ("f", s["ends_flows"])):
            assert all(at[ph, f] == pytest.approx(s["args"]["start_cycle"] / clock, rel=1e-12) for f in ids)


def test_counter_tracks_hold_the_json_counters(timing_run, tmp_path):
    trace, js = both(timing_run, tmp_path)
    processes = {d.uuid: d.process.process_name for d in descriptors(trace) if d.HasField("process")}
    names = {d.uuid: (processes[d.parent_uuid], d.name) for d in descriptors(trace) if d.HasField("counter")}
    samples = Counter(names[p.track_event.track_uuid] for p in trace.packet
                      if p.track_event.type == TrackEvent.TYPE_COUNTER)
    pid_name = {e["pid"]: e["args"]["name"] for e in js["traceEvents"] if e["name"] == "process_name"}
    want = Counter((pid_name[e["pid"]], e["name"]) for e in js["traceEvents"] if e["ph"] == "C")
    assert samples == want and ("core0.cubecore0", "L1.k") in want


def test_a_window_holds_fewer_slices_of_its_cores_only(timing_run, tmp_path):
    trace, js = both(timing_run, tmp_path, "--cores", "0:1", "--tiles", "0:2")
    got = slices(trace)
    assert 0 < len(got) == sum(e["ph"] == "X" for e in js["traceEvents"]) < len(read_log(timing_run / "events.npz"))
    processes = [d.process.process_name for d in descriptors(trace) if d.HasField("process")]
    assert processes and {parse_unit(u).core for u in processes} == {0}
    assert {s["args"]["tile"] for s in got.values()} == {0, 1}


def test_every_packet_is_on_one_sequence_whose_first_packet_clears_it(timing_run, tmp_path):
    trace, _ = both(timing_run, tmp_path)
    assert {p.trusted_packet_sequence_id for p in trace.packet} == {1}
    flags = [p.sequence_flags for p in trace.packet]
    assert flags[0] & TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    assert set(flags[1:]) == {TracePacket.SEQ_NEEDS_INCREMENTAL_STATE}


@pytest.mark.parametrize("name, argv, perfetto", [("t.pftrace", [], True), ("t.perfetto-trace", [], True),
                                                  ("t.pb", [], True), ("t.json", [], False), ("t.txt", [], False),
                                                  ("t.pftrace", ["--format", "json"], False),
                                                  ("t.json", ["--format", "perfetto"], True)])
def test_the_format_follows_the_flag_else_the_suffix(timing_run, tmp_path, name, argv, perfetto):
    line = export(timing_run, tmp_path / name, *argv, "--cores", "0:1")
    assert ("Perfetto protobuf" if perfetto else "Chrome JSON") in line
    data = (tmp_path / name).read_bytes()
    if perfetto:
        assert Trace.FromString(data).packet[1].track_descriptor.process.process_name == "core0.cubecore0"
    else:
        assert json.loads(data)["traceEvents"]


def test_an_unknown_format_is_one_line(timing_run, tmp_path):
    r = tfa("trace", str(timing_run), "--format", "xml", "--out", str(tmp_path / "t.xml"))
    assert_refused(r, "--format", "xml")
    assert not (tmp_path / "t.xml").exists()


def test_rounding_keeps_both_ends_of_a_slice_in_order():
    """Cycle values whose ns fall on .5 and on either side of it round by one rule, so end ≥ begin always."""
    from tfa_sim.views.perfetto_trace import ns

    cycles = np.array([0.0, 0.9, 1.0, 1.1, 2.5, 2.5000001, 3.0, 1e9 + 0.5])
    got = ns(cycles, 2000.0)  # 0.5 ns a cycle
    assert got.tolist() == [round(c / 2000.0 * 1000) for c in cycles.tolist()]
    assert np.all(np.diff(got) >= 0) and got.dtype == np.int64
