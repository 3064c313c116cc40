"""Event log → Chrome trace event format (``trace.json``), readable by Perfetto and chrome://tracing.

One process per unit named like the vendor tools (``core0.cubecore0``,
``core0.veccore0``, ``core0.veccore1``), one thread per pipe, a complete
event (``X``) per instruction group with its cycles in ``args``, flow arrows
(``s``/``f``) from each FIFO flag's setter to the instruction it released,
counter tracks (``C``) for FIFO occupancy and slot use, and the run's config
and clock in ``otherData``.  Timestamps are µs at the preset clock.

The trace is written from the columnar log (:class:`tfa_sim.rundir.events.EventLog`) one event at a time, never
held whole: a window (some cores, some tiles) of a large run is exported the same way
(``tfa-sim trace RUN --cores a:b``).  The helpers that pick a window's rows, order its processes and choose
its flow arrows are shared with the Perfetto protobuf writer, :mod:`tfa_sim.views.perfetto_trace`.
"""
from __future__ import annotations

import functools
import io
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from tfa_sim.rundir.events import EVENT_DTYPES, EventLog
from tfa_sim.spec.units import TRACKS, buffer_owner, parse_unit

#: Thread ids of the pipes (and the dispatch track) inside a unit's process.
TIDS = {p: i + 1 for i, p in enumerate(("dispatch", "MTE2", "MTE1", "M", "FIX", "V", "MTE3"))}
#: Trace events joined into one write.
WRITE_CHUNK = 4096


def unit_kind(unit: str) -> str:
    return parse_unit(unit).kind


def unit_order(unit: str) -> tuple[int, int]:
    """Sort key: core number, then cube before vec0 before vec1."""
    return parse_unit(unit).sort_key


def collect_counters(pools: list) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Occupancy samples of every traced pool, merged over blocks by name: name → (cycles, values), in time order
    (a stable sort: samples of one cycle keep the order they were taken in)."""
    merged: dict[str, list[float]] = {}
    for pool in pools:
        if pool.samples:
            merged.setdefault(pool.name, []).extend(pool.samples)
    out = {}
    for name, flat in merged.items():
        pairs = np.array(flat, np.float64).reshape(-1, 2)  # exact: cycles are float64, values small integers
        order = np.argsort(pairs[:, 0], kind="stable")
        out[name] = (pairs[order, 0], pairs[order, 1].astype(np.int32))
    return out


def _js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


#: Dependencies by instruction id, as :meth:`EventLog.dep_tuples` gives them.
Deps = dict[int, tuple[tuple[int, str, float, str], ...]]
#: A window of the log: its event columns, and the slots and the dependencies of its rows by instruction id.
Window = tuple[dict[str, np.ndarray], dict[int, dict[str, int]], Deps]


def window_rows(log: EventLog, rows: np.ndarray | None) -> Window:
    """The event columns of ``rows`` (None: all) with their slots and dependencies: what both trace formats draw."""
    ev = log.events.view()
    if rows is not None:
        ev = {k: a[rows] for k, a in ev.items()}
    ids = ev["id"] if rows is not None else None
    return ev, log.slot_dicts(ids), log.dep_tuples(ids)


def unit_pids(log: EventLog, ev: dict[str, np.ndarray]) -> dict[str, int]:
    """Process ids 1… of the units in the columns ``ev``, in :func:`unit_order` (the processes' order on screen)."""
    names = log.names("units")
    present = np.flatnonzero(np.bincount(ev["unit"])).tolist()  # not np.unique, which imports numpy.ma (20 ms)
    return {u: i + 1 for i, u in enumerate(sorted((names[c] for c in present), key=unit_order))}


def pipe_tracks(log: EventLog, pid: dict[str, int]) -> dict[tuple[int, int], tuple[int, int]]:
    """(pid, tid) of every (unit code, pipe code) of the units in ``pid``: the track a row is drawn on."""
    units, pipes = log.names("units"), log.names("pipes")
    return {(u, p): (pid[units[u]], TIDS[pipes[p]]) for u in range(len(units)) for p in range(len(pipes))
            if units[u] in pid}


def sub_field(unit: str) -> str:
    """What a row's ``sub`` column is on ``unit``: a cube's sub-tile or a vector core's row slice."""
    return "sub_tile" if unit_kind(unit) == "cube" else "row_slice"


def flow_pairs(ev: dict[str, np.ndarray], deps: Deps) -> Iterator[tuple[int, int, str, str]]:
    """(producer row, consumer row, cause, via) of every flow arrow: a dependency through a flag (``via``) set on
    another unit, both ends in ``ev`` (data hand-offs and same-unit waits draw none)."""
    ids, units = ev["id"].tolist(), ev["unit"].tolist()
    row_of = {i: r for r, i in enumerate(ids)}
    for r, i in enumerate(ids):
        for pred_id, cause, _lat, via in deps.get(i, ()):
            src = row_of.get(pred_id)
            if src is not None and units[src] != units[r] and via:
                yield src, r, cause, via


def window_counters(log: EventLog, pid: dict[str, int]) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """(owning unit, track name, times, values) of every occupancy series whose unit is in ``pid``, by name."""
    for name, (times, values) in sorted(log.counter_series().items()):
        owner, track = buffer_owner(name)
        if owner in pid:  # else a buffer of a unit outside the window
            yield owner, track, times, values


def trace_events(log: EventLog, clock_mhz: float, rows: np.ndarray | None, flows: list[int]) -> Iterator[str]:
    """The trace's events, each as compact JSON, for the log's rows ``rows`` (None: all); ``flows[0]`` counts the
    flow arrows.  The per-instruction events are formatted directly (the bulk of a trace: no dict per event)."""
    us = 1.0 / clock_mhz
    ev, slots, deps = window_rows(log, rows)
    unit_names = log.names("units")
    pid = unit_pids(log, ev)
    for u in pid:
        yield _js({"ph": "M", "name": "process_name", "pid": pid[u], "tid": 0, "args": {"name": u}})
        yield _js({"ph": "M", "name": "process_sort_index", "pid": pid[u], "tid": 0, "args": {"sort_index": pid[u]}})
        for track in TRACKS[unit_kind(u)]:
            yield _js({"ph": "M", "name": "thread_name", "pid": pid[u], "tid": TIDS[track], "args": {"name": track}})
            yield _js({"ph": "M", "name": "thread_sort_index", "pid": pid[u], "tid": TIDS[track],
                       "args": {"sort_index": TIDS[track]}})
    stages, kinds = [_js(s) for s in log.names("stages")], [_js(k) for k in log.names("kinds")]
    head = {key: f'"pid":{p},"tid":{t}' for key, (p, t) in pipe_tracks(log, pid).items()}
    sub_key = [_js(sub_field(u)) for u in unit_names]
    cols = {k: ev[k].tolist() for k in EVENT_DTYPES}
    quoted = functools.cache(_js)  # buffer and flag names, few and repeated: each slots dict's JSON is assembled
    slot_js = {i: "{" + ",".join(f"{quoted(n)}:{v}" for n, v in held.items()) + "}" for i, held in slots.items()}
    durations: dict[float, tuple[str, str]] = {}  # an instruction's cycles repeat: their reprs are made once
    for i, u, p, s, b, t, sb, k, start, end, nb, fl in zip(*cols.values()):
        cycles = end - start
        dur = durations.get(cycles)
        if dur is None:
            dur = durations[cycles] = (repr(cycles * us), repr(cycles))
        slot = slot_js.get(i, "{}")
        yield (f'{{"ph":"X","name":{kinds[k]},"cat":{stages[s]},{head[u, p]},"ts":{start * us!r},'
               f'"dur":{dur[0]},"args":{{"stage":{stages[s]},"block":{b},"tile":{t},{sub_key[u]}:{sb},'
               f'"slots":{slot},"bytes":{nb},"flops":{fl},"cycles":{dur[1]},"start_cycle":{start!r},"id":{i}}}}}')
    units, pipes, starts = cols["unit"], cols["pipe"], cols["start"]
    for src, dst, cause, via in flow_pairs(ev, deps):
        flows[0] += 1
        name = quoted(via)
        yield (f'{{"ph":"s","id":{flows[0]},"name":{name},"cat":"{cause}",{head[units[src], pipes[src]]},'
               f'"ts":{starts[src] * us!r}}}')
        yield (f'{{"ph":"f","bp":"e","id":{flows[0]},"name":{name},"cat":"{cause}",{head[units[dst], pipes[dst]]},'
               f'"ts":{starts[dst] * us!r}}}')
    for owner, track, times, values in window_counters(log, pid):
        counter = f'{{"ph":"C","name":{_js(track)},"pid":{pid[owner]},"tid":0,"ts":'
        for t_, value in zip((times * us).tolist(), values.tolist()):
            yield f'{counter}{t_!r},"args":{{"in_use":{value}}}}}'


def dump_trace(fh: IO[bytes], log: EventLog, clock_mhz: float, metadata: dict[str, Any],
               rows: np.ndarray | None = None) -> int:
    """Write the trace of ``rows`` (None: every row) to ``fh`` as compact JSON; returns the events written."""
    from tfa_sim.rundir.outputs import json_default

    text = io.TextIOWrapper(fh, encoding="utf-8")
    text.write('{"traceEvents":[')
    flows, count = [0], 0
    events = trace_events(log, clock_mhz, rows, flows)
    while chunk := list(itertools.islice(events, WRITE_CHUNK)):  # one write per chunk, not per event
        text.write(("," if count else "") + ",".join(chunk))
        count += len(chunk)
    other = {**metadata, "clock_mhz": clock_mhz, "time_unit": "us", "flows": flows[0]}
    text.write('],"displayTimeUnit":"ns","otherData":')
    text.write(json.dumps(other, separators=(",", ":"), default=json_default) + "}")
    text.flush()
    text.detach()
    return count


def write_trace(path: Path, log: EventLog, clock_mhz: float, metadata: dict[str, Any],
                rows: np.ndarray | None = None) -> None:
    """``trace.json`` (or another window's file) written atomically."""
    from tfa_sim.rundir.directory import atomic_write

    atomic_write(path, lambda fh: dump_trace(fh, log, clock_mhz, metadata, rows))
