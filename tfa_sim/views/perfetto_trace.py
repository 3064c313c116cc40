"""Event log → Perfetto protobuf trace (``.pftrace``): what ``trace.json`` holds, in Perfetto's own format.

Written with the Perfetto package's schema and streaming writer (TrackEvent API): one process track per unit
and one thread track per pipe, in ``trace.json``'s order; a slice (begin and end) per instruction group with
its fields as debug annotations; a flow per cross-unit flag (its id on the setter's slice, terminating on the
waiter's); a counter track per FIFO or slot pool under its unit's process.  Timestamps are integer ns at the
preset clock, both ends of every slice rounded by :func:`ns`, so a pipe's slices stay in order.  Kinds, stages
and annotation names are interned in the first packet.  The packets go to the file one at a time, as
:mod:`tfa_sim.views.trace` writes its events; the run's config, which ``trace.json`` carries in ``otherData``, stays
in ``summary.json``.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackDescriptor, TrackEvent
from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

from tfa_sim.rundir.events import EVENT_DTYPES, EventLog
from tfa_sim.spec.units import TRACKS
from tfa_sim.views import trace

#: The file's one packet sequence: its interned strings hold from the first packet on.
SEQUENCE = 1
#: Debug annotation names of a slice, interned as 1, 2, … in this order.
ANNOTATIONS = ("stage", "block", "tile", "sub_tile", "row_slice", "slots", "bytes", "flops", "cycles", "start_cycle",
               "id")
IID = {name: i + 1 for i, name in enumerate(ANNOTATIONS)}
#: Track uuids: a unit's process is ``pid × STRIDE``, its pipes' threads ``pid × STRIDE + trace.TIDS[pipe]`` (also
#: their tids, so no tid repeats across processes or equals a pid); the counter tracks follow the last unit's.
STRIDE = 1000


def ns(cycles: np.ndarray, clock_mhz: float) -> np.ndarray:
    """Cycles → integer ns at ``clock_mhz``, rounded to the nearest (half to even, as ``round``): one monotonic
    function for both ends of every slice, so none ends before it begins or after its pipe's next one begins."""
    return np.rint(cycles / clock_mhz * 1000.0).astype(np.int64)


def _packet(ts: int | None = None) -> TracePacket:
    """A packet of the sequence that relies on the interned strings (the first packet clears and sets them)."""
    packet = TracePacket(trusted_packet_sequence_id=SEQUENCE, sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
    if ts is not None:
        packet.timestamp = ts
    return packet


def _first_packet(log: EventLog) -> TracePacket:
    """The root track (processes and threads in the explicit order of the ranks below) and every interned string;
    it starts the sequence's incremental state."""
    packet = _packet()
    packet.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    root = packet.track_descriptor
    root.uuid = 0
    root.process_ordering = TrackDescriptor.PROCESS_ORDERING_EXPLICIT
    root.thread_ordering = TrackDescriptor.THREAD_ORDERING_EXPLICIT
    interned = packet.interned_data
    for i, kind in enumerate(log.names("kinds")):
        interned.event_names.add(iid=i + 1, name=kind)
    for i, stage in enumerate(log.names("stages")):
        interned.event_categories.add(iid=i + 1, name=stage)
        interned.debug_annotation_string_values.add(iid=i + 1, str=stage.encode())
    for name, iid in IID.items():
        interned.debug_annotation_names.add(iid=iid, name=name)
    return packet


def _unit_tracks(pid: dict[str, int]) -> Iterator[TracePacket]:
    """A process track per unit and a thread track per pipe, ranked like trace.json's sort indices."""
    for unit, p in pid.items():
        packet = _packet()
        process = packet.track_descriptor
        process.uuid, process.sibling_order_rank = p * STRIDE, p
        process.process.pid, process.process.process_name = p, unit
        yield packet
        for track in TRACKS[trace.unit_kind(unit)]:
            tid = p * STRIDE + trace.TIDS[track]
            packet = _packet()
            thread = packet.track_descriptor
            thread.uuid, thread.sibling_order_rank = tid, trace.TIDS[track]
            thread.thread.pid, thread.thread.tid, thread.thread.thread_name = p, tid, track
            yield packet


def _flow_ids(ev: dict[str, np.ndarray], deps: trace.Deps) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Flow ids 1, 2, … (trace.json's numbering) by producer row and by consumer row."""
    out: dict[int, list[int]] = {}
    into: dict[int, list[int]] = {}
    for n, (src, dst, _cause, _via) in enumerate(trace.flow_pairs(ev, deps), 1):
        out.setdefault(src, []).append(n)
        into.setdefault(dst, []).append(n)
    return out, into


def _slices(log: EventLog, clock_mhz: float, window: trace.Window,
            pid: dict[str, int]) -> Iterator[TracePacket]:
    """A begin and an end packet per row of the window (columns, slots, dependencies), the begin with the row's
    fields and its flows."""
    ev, slots, deps = window
    track = {key: p * STRIDE + t for key, (p, t) in trace.pipe_tracks(log, pid).items()}
    sub_iid = [IID[trace.sub_field(u)] for u in log.names("units")]
    out, into = _flow_ids(ev, deps)
    begins, ends = ns(ev["start"], clock_mhz).tolist(), ns(ev["end"], clock_mhz).tolist()
    cols = [ev[k].tolist() for k in EVENT_DTYPES]
    for r, (i, u, p, s, b, t, sb, k, start, end, nb, fl) in enumerate(zip(*cols)):
        packet = _packet(begins[r])
        event = packet.track_event
        event.type, event.track_uuid, event.name_iid = TrackEvent.TYPE_SLICE_BEGIN, track[u, p], k + 1
        event.category_iids.append(s + 1)
        notes = event.debug_annotations
        notes.add(name_iid=IID["stage"], string_value_iid=s + 1)
        for iid, value in ((IID["block"], b), (IID["tile"], t), (sub_iid[u], sb), (IID["bytes"], nb),
                           (IID["flops"], fl), (IID["id"], i)):
            notes.add(name_iid=iid, int_value=value)
        notes.add(name_iid=IID["cycles"], double_value=end - start)
        notes.add(name_iid=IID["start_cycle"], double_value=start)
        if i in slots:
            entries = notes.add(name_iid=IID["slots"]).dict_entries
            for name, slot in slots[i].items():
                entries.add(name=name, int_value=slot)
        event.flow_ids.extend(out.get(r, ()))
        event.terminating_flow_ids.extend(into.get(r, ()))
        yield packet
        packet = _packet(ends[r])
        packet.track_event.type, packet.track_event.track_uuid = TrackEvent.TYPE_SLICE_END, track[u, p]
        yield packet


def _counters(log: EventLog, clock_mhz: float, pid: dict[str, int]) -> Iterator[TracePacket]:
    """A counter track per occupancy series of the window's units (slots or entries in use), then its samples."""
    uuid = (max(pid.values(), default=0) + 1) * STRIDE
    for owner, name, times, values in trace.window_counters(log, pid):
        uuid += 1
        packet = _packet()
        counter = packet.track_descriptor
        counter.uuid, counter.parent_uuid, counter.name = uuid, pid[owner] * STRIDE, name
        counter.counter.SetInParent()
        yield packet
        for t, value in zip(ns(times, clock_mhz).tolist(), values.tolist()):
            packet = _packet(t)
            packet.track_event.type, packet.track_event.track_uuid = TrackEvent.TYPE_COUNTER, uuid
            packet.track_event.counter_value = value
            yield packet


def dump_perfetto(fh: IO[bytes], log: EventLog, clock_mhz: float, rows: np.ndarray | None = None) -> int:
    """Write the Perfetto trace of ``rows`` (None: every row) to ``fh``, streamed; returns the packets written."""
    builder = StreamingTraceProtoBuilder(fh)
    window = trace.window_rows(log, rows)
    pid = trace.unit_pids(log, window[0])
    count = 0
    for part in ([_first_packet(log)], _unit_tracks(pid), _slices(log, clock_mhz, window, pid),
                 _counters(log, clock_mhz, pid)):
        for packet in part:
            builder.write_packet(packet)
            count += 1
    return count


def write_perfetto(path: Path, log: EventLog, clock_mhz: float, rows: np.ndarray | None = None) -> None:
    """The Perfetto trace of a window (None: the whole log) written atomically to ``path``."""
    from tfa_sim.rundir.directory import atomic_write

    atomic_write(path, lambda fh: dump_perfetto(fh, log, clock_mhz, rows))
