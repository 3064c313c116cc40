"""Event log → Chrome trace event format (``trace.json``), readable by Perfetto and chrome://tracing.

One process per unit named like the vendor tools (``core0.cubecore0``,
``core0.veccore0``, ``core0.veccore1``), one thread per pipe, a complete
event (``X``) per instruction group with its cycles in ``args``, flow arrows
(``s``/``f``) from each FIFO flag's setter to the instruction it released,
counter tracks (``C``) for FIFO occupancy and slot use, and the run's config
and clock in ``otherData``.  Timestamps are µs at the preset clock.

The trace is written from the columnar log (:class:`tfa_sim.events.EventLog`) one event at a time, never
held whole: a window (some cores, some tiles) of a large run is exported the same way
(``tfa-sim trace RUN --cores a:b``).
"""
from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from tfa_sim.events import EVENT_DTYPES, EventLog
from tfa_sim.units import TRACKS, buffer_owner, parse_unit

#: Thread ids of the pipes (and the dispatch track) inside a unit's process.
TIDS = {p: i + 1 for i, p in enumerate(("dispatch", "MTE2", "MTE1", "M", "FIX", "V", "MTE3"))}


def unit_kind(unit: str) -> str:
    return parse_unit(unit).kind


def unit_order(unit: str) -> tuple[int, int]:
    """Sort key: core number, then cube before vec0 before vec1."""
    return parse_unit(unit).sort_key


def collect_counters(pools: list) -> dict[str, list[tuple[float, int]]]:
    """Occupancy samples of every traced pool, merged over blocks by name."""
    merged: dict[str, list[tuple[float, int]]] = {}
    for pool in pools:
        if pool.samples:
            merged.setdefault(pool.name, []).extend(pool.samples)
    return {k: sorted(v, key=lambda s: s[0]) for k, v in merged.items()}


def _js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def trace_events(log: EventLog, clock_mhz: float, rows: np.ndarray | None, flows: list[int]) -> Iterator[str]:
    """The trace's events, each as compact JSON, for the log's rows ``rows`` (None: all); ``flows[0]`` counts the
    flow arrows.  The per-instruction events are formatted directly (the bulk of a trace: no dict per event)."""
    us = 1.0 / clock_mhz
    ev = log.events.view()
    if rows is not None:
        ev = {k: a[rows] for k, a in ev.items()}
    unit_names, pipe_names = log.names("units"), log.names("pipes")
    units = sorted((unit_names[c] for c in np.unique(ev["unit"]).tolist()), key=unit_order)
    pid = {u: i + 1 for i, u in enumerate(units)}
    for u in units:
        yield _js({"ph": "M", "name": "process_name", "pid": pid[u], "tid": 0, "args": {"name": u}})
        yield _js({"ph": "M", "name": "process_sort_index", "pid": pid[u], "tid": 0, "args": {"sort_index": pid[u]}})
        for track in TRACKS[unit_kind(u)]:
            yield _js({"ph": "M", "name": "thread_name", "pid": pid[u], "tid": TIDS[track], "args": {"name": track}})
            yield _js({"ph": "M", "name": "thread_sort_index", "pid": pid[u], "tid": TIDS[track],
                       "args": {"sort_index": TIDS[track]}})
    ids = ev["id"] if rows is not None else None
    slots, deps = log.slot_dicts(ids), log.dep_tuples(ids)
    stages, kinds = [_js(s) for s in log.names("stages")], [_js(k) for k in log.names("kinds")]
    head = {(u, p): f'"pid":{pid[unit_names[u]]},"tid":{TIDS[pipe_names[p]]}' for u in range(len(unit_names))
            for p in range(len(pipe_names)) if unit_names[u] in pid}
    sub_key = ['"sub_tile"' if unit_kind(u) == "cube" else '"row_slice"' for u in unit_names]
    where: dict[int, tuple[int, int, float]] = {}  # id → (unit code, pipe code, start)
    cols = [ev[k].tolist() for k in EVENT_DTYPES]
    for i, u, p, s, b, t, sb, k, start, end, nb, fl in zip(*cols):
        where[i] = (u, p, start)
        cycles = end - start
        slot = _js(slots[i]) if i in slots else "{}"
        yield (f'{{"ph":"X","name":{kinds[k]},"cat":{stages[s]},{head[u, p]},"ts":{start * us!r},'
               f'"dur":{cycles * us!r},"args":{{"stage":{stages[s]},"block":{b},"tile":{t},{sub_key[u]}:{sb},'
               f'"slots":{slot},"bytes":{nb},"flops":{fl},"cycles":{cycles!r},"start_cycle":{start!r},"id":{i}}}}}')
    for i, (u, p, start) in where.items():
        for pred_id, cause, _lat, via in deps.get(i, ()):
            pred = where.get(pred_id)
            if pred is None or pred[0] == u or not via:
                continue  # flows only for cross-core flags (FIFO ready/consumed, block end)
            flows[0] += 1
            yield (f'{{"ph":"s","id":{flows[0]},"name":{_js(via)},"cat":"{cause}",{head[pred[0], pred[1]]},'
                   f'"ts":{pred[2] * us!r}}}')
            yield (f'{{"ph":"f","bp":"e","id":{flows[0]},"name":{_js(via)},"cat":"{cause}",{head[u, p]},'
                   f'"ts":{start * us!r}}}')
    for name, (times, values) in sorted(log.counter_series().items()):
        owner, track = buffer_owner(name)
        if owner not in pid:
            continue  # a buffer of a unit outside the window
        counter = f'{{"ph":"C","name":{_js(track)},"pid":{pid[owner]},"tid":0,"ts":'
        for t_, value in zip((times * us).tolist(), values.tolist()):
            yield f'{counter}{t_!r},"args":{{"in_use":{value}}}}}'


def dump_trace(fh: IO[bytes], log: EventLog, clock_mhz: float, metadata: dict[str, Any],
               rows: np.ndarray | None = None) -> int:
    """Write the trace of ``rows`` (None: every row) to ``fh`` as compact JSON; returns the events written."""
    from tfa_sim.outputs import json_default

    text = io.TextIOWrapper(fh, encoding="utf-8")
    text.write('{"traceEvents":[')
    flows, count = [0], 0
    for event in trace_events(log, clock_mhz, rows, flows):
        text.write(("," if count else "") + event)
        count += 1
    other = {**metadata, "clock_mhz": clock_mhz, "time_unit": "us", "flows": flows[0]}
    text.write('],"displayTimeUnit":"ns","otherData":')
    text.write(json.dumps(other, separators=(",", ":"), default=json_default) + "}")
    text.flush()
    text.detach()
    return count


def write_trace(path: Path, log: EventLog, clock_mhz: float, metadata: dict[str, Any],
                rows: np.ndarray | None = None) -> None:
    """``trace.json`` (or another window's file) written atomically."""
    from tfa_sim.rundir import atomic_write

    atomic_write(path, lambda fh: dump_trace(fh, log, clock_mhz, metadata, rows))
