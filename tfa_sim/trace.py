"""Event log → Chrome trace event format (``trace.json``), readable by Perfetto and chrome://tracing.

One process per unit named like the vendor tools (``core0.cubecore0``,
``core0.veccore0``, ``core0.veccore1``), one thread per pipe, a complete
event (``X``) per instruction group with its cycles in ``args``, flow arrows
(``s``/``f``) from each FIFO flag's setter to the instruction it released,
counter tracks (``C``) for FIFO occupancy and slot use, and the run's config
and clock in ``otherData``.  Timestamps are µs at the preset clock.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tfa_sim.units import TRACKS, buffer_owner, parse_unit


def unit_kind(unit: str) -> str:
    return parse_unit(unit).kind


def unit_order(unit: str) -> tuple[int, int]:
    """Sort key: core number, then cube before vec0 before vec1."""
    return parse_unit(unit).sort_key


def build_trace(events: list, counters: dict[str, list[tuple[float, int]]], clock_mhz: float,
                metadata: dict[str, Any]) -> dict[str, Any]:
    """The trace as a JSON-ready dict (JSON object format)."""
    us = 1.0 / clock_mhz
    units = sorted({e.unit for e in events}, key=unit_order)
    pid = {u: i + 1 for i, u in enumerate(units)}
    tid = {p: i + 1 for i, p in enumerate(("dispatch", "MTE2", "MTE1", "M", "FIX", "V", "MTE3"))}
    out: list[dict[str, Any]] = []
    for u in units:
        out.append({"ph": "M", "name": "process_name", "pid": pid[u], "tid": 0, "args": {"name": u}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid[u], "tid": 0, "args": {"sort_index": pid[u]}})
        for p in TRACKS[unit_kind(u)]:
            out.append({"ph": "M", "name": "thread_name", "pid": pid[u], "tid": tid[p], "args": {"name": p}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid[u], "tid": tid[p],
                        "args": {"sort_index": tid[p]}})
    by_id = {}
    for e in events:
        by_id[e.id] = e
        out.append({"ph": "X", "name": e.kind, "cat": e.stage, "pid": pid[e.unit], "tid": tid[e.pipe],
                    "ts": e.start * us, "dur": (e.end - e.start) * us,
                    "args": {"stage": e.stage, "block": e.block, "tile": e.tile,
                             ("sub_tile" if unit_kind(e.unit) == "cube" else "row_slice"): e.sub,
                             "slots": e.slots, "bytes": e.nbytes, "flops": e.flops,
                             "cycles": e.end - e.start, "start_cycle": e.start, "id": e.id}})
    flow = 0
    for e in events:
        for pred_id, cause, _lat, via in e.deps:
            pred = by_id.get(pred_id)
            if pred is None or pred.unit == e.unit or not via:
                continue  # flows only for cross-core flags (FIFO ready/consumed, block end)
            flow += 1
            out.append({"ph": "s", "id": flow, "name": via, "cat": cause, "pid": pid[pred.unit],
                        "tid": tid[pred.pipe], "ts": pred.start * us})
            out.append({"ph": "f", "bp": "e", "id": flow, "name": via, "cat": cause, "pid": pid[e.unit],
                        "tid": tid[e.pipe], "ts": e.start * us})
    for name, samples in sorted(counters.items()):
        owner, track = buffer_owner(name)
        for t, value in samples:
            out.append({"ph": "C", "name": track, "pid": pid[owner], "tid": 0, "ts": t * us,
                        "args": {"in_use": value}})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {**metadata, "clock_mhz": clock_mhz, "time_unit": "us", "flows": flow}}


def collect_counters(pools: list) -> dict[str, list[tuple[float, int]]]:
    """Occupancy samples of every traced pool, merged over blocks by name."""
    merged: dict[str, list[tuple[float, int]]] = {}
    for pool in pools:
        if pool.samples:
            merged.setdefault(pool.name, []).extend(pool.samples)
    return {k: sorted(v, key=lambda s: s[0]) for k, v in merged.items()}


def write_trace(path: Path, trace: dict[str, Any]) -> None:
    from tfa_sim.outputs import write_json_compact

    write_json_compact(path, trace)
