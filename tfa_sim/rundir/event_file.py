"""An ``events.npz`` read back into an :class:`~tfa_sim.rundir.events.EventLog`, every column and value checked.

Apart from ``rundir.events`` because that module is compiled (setup.py ``COMPILED``) for the engine's appends,
and reading a file back is not the hot path: left as Python, it costs nothing at run time and keeps its C out
of the build (benchmarks/README.md, "Install, cold (issue 44)").
"""
from __future__ import annotations

import io
import re
import zipfile

import numpy as np

from tfa_sim.rundir.events import ADDED_LATER, CAUSES, DISPATCH, TABLES, VERSION, EventLog, Strings
from tfa_sim.spec.units import LANES, TRACKS, parse_unit
from tfa_sim.stages import LOGGED_STAGES


def _from_arrays(arrays: dict[str, np.ndarray]) -> EventLog:
    """An EventLog over loaded arrays (shapes and dtypes checked; values are checked by :func:`validate`)."""
    if int(arrays.get("version", -1)) != VERSION:
        raise ValueError(f"format version {arrays.get('version')!s:.20}, expected {VERSION}")
    log = EventLog(capacity=1)
    for prefix, cols in (("ev", log.events), ("edge", log.edges), ("slot", log.slots), ("counter", log.counters),
                         ("work", log.work)):
        n = None
        for k, dt in cols.dtypes.items():
            a = arrays.get(f"{prefix}_{k}")
            if a is None and prefix in ADDED_LATER and not any(name.startswith(f"{prefix}_") for name in arrays):
                a = np.zeros(0, dt)  # a log written before the table existed: none of its columns
            if a is None:
                raise ValueError(f"column {prefix}_{k} is missing")
            if a.ndim != 1 or a.dtype != np.dtype(dt) or (n is not None and len(a) != n):
                raise ValueError(f"column {prefix}_{k} has the wrong type or length")
            n = len(a)
            cols.arrays[k] = a
        cols.n = cols.capacity = n or 0
    for name in TABLES:
        a = arrays.get(f"table_{name}")
        if a is None and name in ADDED_LATER:
            a = np.zeros(0, "<U1")
        if a is None or a.ndim != 1 or a.dtype.kind != "U" or len(a) > 1 << 20:
            raise ValueError(f"string table {name} is missing or not strings")
        log.tables[name] = Strings(a.tolist())
    log._stage, log._kind = log.tables["stages"], log.tables["kinds"]
    log._via, log._slot_name = log.tables["vias"], log.tables["slot_names"]
    return log


def _codes_in(a: np.ndarray, table: list[str], what: str) -> None:
    if len(a) and (a.min() < 0 or a.max() >= len(table)):
        raise ValueError(f"a {what} code is outside its string table")


def validate(log: EventLog) -> None:
    """Every value of a loaded log is one a run writes: known units, pipes of their unit, stages, causes;
    finite times with end ≥ start; unique ids; dependencies on logged, earlier instructions (so no cycle)."""
    for u in log.names("units"):
        m = re.fullmatch(r"core([0-9]{1,6})\.(cubecore0|veccore([0-9]))", u)
        if m is None or int(m[3] or 0) >= LANES:
            raise ValueError(f"unit {u[:40]!r} is not one of a chip's")
    stages = {*LOGGED_STAGES, DISPATCH}
    bad = [s for s in log.names("stages") if s not in stages]
    if bad:
        raise ValueError(f"stage {bad[0][:40]!r} unknown")
    ev, edges, slots = log.events.view(), log.edges.view(), log.slots.view()
    for col, table in (("unit", "units"), ("pipe", "pipes"), ("stage", "stages"), ("kind", "kinds")):
        _codes_in(ev[col], log.names(table), col)
    _codes_in(edges["via"], log.names("vias"), "via")
    _codes_in(slots["name"], log.names("slot_names"), "slot name")
    _codes_in(log.counters.view()["name"], log.names("counter_names"), "counter name")
    _codes_in(log.work.view()["label"], log.names("works"), "work label")
    _codes_in(edges["cause"], list(CAUSES), "cause")
    units, pipes = log.names("units"), log.names("pipes")
    pairs = np.unique(np.stack([ev["unit"], ev["pipe"]]), axis=1) if len(log) else np.zeros((2, 0), np.int64)
    for unit, pipe in pairs.T.tolist():
        if pipes[pipe] not in TRACKS[parse_unit(units[unit]).kind]:
            raise ValueError(f"pipe {pipes[pipe][:40]!r} is not one of {units[unit]}'s")
    start, end = ev["start"], ev["end"]
    for what, t in (("start", start), ("end", end), ("latency", edges["lat"])):
        if not np.all((t >= 0) & (t <= 1e15)):  # also false for NaN
            raise ValueError(f"a {what} is not a cycle count")
    if np.any(end < start):
        raise ValueError("an instruction ends before it starts")
    for what, a in (("block", ev["block"]), ("sub", ev["sub"]), ("bytes", ev["nbytes"]), ("flops", ev["flops"]),
                    ("slot", slots["slot"]), ("id", ev["id"])):
        if len(a) and a.min() < 0:
            raise ValueError(f"a {what} is negative")
    if len(ev["tile"]) and ev["tile"].min() < -1:
        raise ValueError("a tile is below -1")
    ids = np.sort(ev["id"])
    if len(ids) > 1 and np.any(ids[1:] == ids[:-1]):
        raise ValueError("an instruction id appears twice")
    for what, refs in (("dependency", edges["dst"]), ("dependency", edges["src"]), ("slot", slots["id"]),
                       ("work label", log.work.view()["id"])):
        at = np.searchsorted(ids, refs)
        known = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == refs) if len(ids) else refs != refs
        if not np.all(known):
            raise ValueError(f"a {what} names instruction {int(refs[~known][0])}, which is not in the log")
    if np.any(edges["src"] >= edges["dst"]):
        raise ValueError("a dependency names a later instruction (the dependencies would form a cycle)")


def load_log(data: bytes) -> EventLog:
    """The log saved by :meth:`EventLog.save` from the bytes of its file; ValueError says what is wrong."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(data):
                    raise ValueError(f"member {info.filename[:40]!r} is compressed or larger than the file")
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, OSError, EOFError, KeyError) as exc:
        raise ValueError(f"not a numpy .npz archive ({type(exc).__name__})") from None
    log = _from_arrays(arrays)
    validate(log)
    return log
