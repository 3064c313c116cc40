"""The event log: its schema and its columns, one row per executed instruction group (or dispatch span).

The schema lives here, and only here: the event columns and their dtypes (:data:`EVENT_DTYPES`, the edge,
slot and counter tables), the causes of a wait (:data:`CAUSES`), the name of a block's dispatch span
(:data:`DISPATCH`), the string tables, and the per-event view :class:`Record`.  The engine's pipes append
to an :class:`EventLog` as instruction groups finish; the readers of a run directory (``rundir.outputs``)
and every view read it.


A large run executes tens of millions of instruction groups; a Python object per group (a record, its
slot dict, its dependency tuples) costs gigabytes and most of the run's time in allocation and GC.  The
:class:`EventLog` instead appends each group (through a short buffer of struct-packed rows) into growable
column arrays — ids, times,
block/tile/sub, bytes, flops, and the strings (unit, pipe, stage, kind) as int codes into small per-log
string tables — with the dependency edges and the slot occupancy in two further tables keyed by
instruction id.  :meth:`EventLog.save` writes it as one uncompressed ``events.npz`` (no pickled objects);
``rundir.event_file.load_log`` reads it back, every column checked (a module of its own, left uncompiled:
reading a file is not the hot path).  :meth:`EventLog.records` materialises
:class:`Record` views for the consumers that want them (timeline, the task graph) on runs small enough to
afford it.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import IO, Any, NamedTuple

import numpy as np

from tfa_sim.spec.units import parse_unit

#: The stage and pipe name of a block's dispatch (drawn before each block on the AIC; no pipe of the chip).
DISPATCH = "dispatch"
#: Why a pipe waited before an instruction could start (stall breakdown keys; dependency causes).
CAUSES = ("data", "slot", "credit", "gm")

CAUSE_CODES = {c: i for i, c in enumerate(CAUSES)}
#: Event columns: name → dtype, in the order EventLog.add unpacks them.  Strings are codes into :data:`TABLES`.
EVENT_DTYPES = {"id": np.int64, "unit": np.int32, "pipe": np.int32, "stage": np.int32, "block": np.int32,
                "tile": np.int32, "sub": np.int32, "kind": np.int32, "start": np.float64, "end": np.float64,
                "nbytes": np.int64, "flops": np.int64}
#: Dependency edges: ``dst`` was released by ``src`` (cause code into CAUSES, latency, via code).
EDGE_DTYPES = {"dst": np.int64, "src": np.int64, "cause": np.int8, "lat": np.float64, "via": np.int32}
#: Slot occupancy: instruction ``id`` held slot ``slot`` of the buffer named by ``name`` (a code).
SLOT_DTYPES = {"id": np.int64, "name": np.int32, "slot": np.int32}
#: Occupancy samples of FIFOs and slot pools (trace.json counter tracks): buffer name code, time, in use.
COUNTER_DTYPES = {"name": np.int32, "t": np.float64, "value": np.int32}
#: The work split of an instruction whose work goes to resources of different peaks (a vector op sequence, a
#: TEXTRACT): instruction ``id`` and its label (a code into the ``works`` table; :mod:`tfa_sim.spec.work`).
WORK_DTYPES = {"id": np.int64, "label": np.int32}
#: The string tables: which column of which table holds codes into each.
TABLES = ("units", "pipes", "stages", "kinds", "vias", "slot_names", "counter_names", "works")
#: Tables and their columns a log written before them lacks (read back empty: ``rundir.event_file``).
ADDED_LATER = ("works", "work")
#: A format version stored in the file (bumped when the columns change).
VERSION = 1
#: One row's twelve event columns, names decoded (id, unit, pipe, stage, block, tile, sub, kind, start, end,
#: bytes, flops), as :meth:`EventLog.decoded` gives them.
Row = tuple[int, str, str, str, int, int, int, str, float, float, int, int]



class Record(NamedTuple):
    """One executed instruction group of the event log (times in cycles), as a per-event view: the log itself
    is columnar (:class:`EventLog`); these are built from it for consumers that want rows."""

    id: int
    unit: str  # coreN.cubecore0 | coreN.veccoreA
    pipe: str
    stage: str
    block: int
    tile: int
    sub: int  # sub-tile (cube) or row slice (vector)
    kind: str
    start: float
    end: float
    nbytes: int
    flops: int
    slots: dict[str, int]
    deps: tuple[tuple[int, str, float, str], ...]  # (predecessor id, data|slot|credit, latency, via flag/slot)


#: Rows an append-only table buffers before moving them into its numpy columns.
FLUSH_ROWS = 4096
#: The struct code of each column dtype (little-endian, no padding: numpy's packed structured layout).
STRUCT_CODES = {np.dtype(np.int64): "q", np.dtype(np.int32): "i", np.dtype(np.int8): "b", np.dtype(np.float64): "d"}


class _Columns:
    """Named numpy columns that double when full, appended a row at a time.

    A row is packed with ``struct`` into a buffer of :data:`FLUSH_ROWS` rows laid out as one numpy structured
    record, and the full buffer is moved into the columns (also before any read, :meth:`view`): no Python
    object per value is kept, and the move is one ``frombuffer`` view and a copy per column.  A value out of
    its column's range raises ``struct.error``.
    """

    def __init__(self, dtypes: dict[str, Any], capacity: int) -> None:
        self.dtypes = dtypes
        self.n = 0  # rows in the arrays
        self.capacity = capacity
        self.arrays = {k: np.empty(capacity, dt) for k, dt in dtypes.items()}
        self.row = struct.Struct("<" + "".join(STRUCT_CODES[np.dtype(dt)] for dt in dtypes.values()))
        self.record = np.dtype([(k, np.dtype(dt).newbyteorder("<")) for k, dt in dtypes.items()])
        self.buffer = bytearray(FLUSH_ROWS * self.row.size)
        self.pack_into = self.row.pack_into  # bound once: ``pack_into(buffer, offset, *row)``
        self.buffered = 0  # rows in the buffer

    def __len__(self) -> int:
        return self.n + self.buffered

    def offset(self) -> int:
        """Where the next row goes in the buffer (a full buffer is moved into the columns first); the caller
        packs the row there with :attr:`pack_into` and then counts it in ``buffered``.  (An ``append(*row)``
        method instead cost the log's run loop 17 % more instructions under mypyc: 4.06 → 4.76 G.)"""
        if self.buffered == FLUSH_ROWS:
            self.flush()
        return self.buffered * self.row.size

    def grow(self) -> None:
        self.capacity *= 2
        for k, a in self.arrays.items():
            bigger = np.empty(self.capacity, a.dtype)
            bigger[: self.n] = a[: self.n]
            self.arrays[k] = bigger

    def flush(self) -> None:
        """Move the buffered rows into the columns."""
        if not self.buffered:
            return
        rows = np.frombuffer(self.buffer, self.record, self.buffered)
        while self.n + len(rows) > self.capacity:
            self.grow()
        for k, a in self.arrays.items():
            a[self.n:self.n + len(rows)] = rows[k]
        self.n += len(rows)
        self.buffered = 0

    def view(self) -> dict[str, np.ndarray]:
        """The filled part of every column (views, not copies), buffered rows moved in first."""
        self.flush()
        return {k: a[: self.n] for k, a in self.arrays.items()}


class Strings:
    """A small string table: each distinct string gets the next int code."""

    def __init__(self, names: tuple[str, ...] | list[str] = ()) -> None:
        self.names: list[str] = list(names)
        self.codes = {s: i for i, s in enumerate(self.names)}

    def code(self, s: str) -> int:
        c = self.codes.get(s)
        if c is None:
            c = self.codes[s] = len(self.names)
            self.names.append(s)
        return c


class EventLog:
    """The columnar event log of one run (``Stats.events``); appended by the engine's pipes as groups finish."""

    def __init__(self, capacity: int = 1 << 14) -> None:
        self.events = _Columns(EVENT_DTYPES, capacity)
        self.edges = _Columns(EDGE_DTYPES, capacity)
        self.slots = _Columns(SLOT_DTYPES, capacity)
        self.counters = _Columns(COUNTER_DTYPES, 16)
        self.work = _Columns(WORK_DTYPES, 1024)
        self.tables = {name: Strings() for name in TABLES}
        self.tables["vias"].code("")  # code 0: a data hand-off, which has no flag or slot
        self._stage, self._kind = self.tables["stages"], self.tables["kinds"]
        self._via, self._slot_name = self.tables["vias"], self.tables["slot_names"]

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Any]:
        """Record views of every row (materialised at once: for small runs, tests and the task graph)."""
        return iter(self.records())

    def add(self, ident: int, unit: int, pipe: int, stage: str, block: int, tile: int, sub: int, kind: str,
            start: float, end: float, nbytes: int, flops: int) -> None:
        """One row (``unit`` and ``pipe`` are codes from :meth:`unit_code` / :meth:`pipe_code`)."""
        stage_code = self._stage.codes.get(stage)
        if stage_code is None:
            stage_code = self._stage.code(stage)
        kind_code = self._kind.codes.get(kind)
        if kind_code is None:
            kind_code = self._kind.code(kind)
        cols = self.events
        cols.pack_into(cols.buffer, cols.offset(), ident, unit, pipe, stage_code, block, tile, sub, kind_code,
                       start, end, nbytes, flops)
        cols.buffered += 1

    def edges_to(self, dst: int, deps: Iterable[tuple[Any, str, float, str]]) -> None:
        """Instruction ``dst`` was released by each (predecessor, cause, latency, via) of ``deps``: the
        predecessor an instruction (its ``id`` is logged), ``via`` the flag or slot ("" for data)."""
        cols, vias = self.edges, self._via
        for pred, cause, lat, via in deps:
            via_code = vias.codes.get(via)
            if via_code is None:
                via_code = vias.code(via)
            cols.pack_into(cols.buffer, cols.offset(), dst, pred.id, CAUSE_CODES[cause], lat, via_code)
            cols.buffered += 1

    def slot(self, ident: int, name: str, index: int) -> None:
        """Instruction ``ident`` holds slot ``index`` of buffer ``name``."""
        code = self._slot_name.codes.get(name)
        if code is None:
            code = self._slot_name.code(name)
        cols = self.slots
        cols.pack_into(cols.buffer, cols.offset(), ident, code, index)
        cols.buffered += 1

    def work_of(self, ident: int, label: str) -> None:
        """Instruction ``ident`` did the work ``label`` names (:mod:`tfa_sim.spec.work`)."""
        works = self.tables["works"]
        code = works.codes.get(label)
        if code is None:
            code = works.code(label)
        cols = self.work
        cols.pack_into(cols.buffer, cols.offset(), ident, code)
        cols.buffered += 1

    def work_labels(self) -> dict[int, str]:
        """The work label of each instruction that has one, by instruction id."""
        w, names = self.work.view(), self.names("works")
        return {i: names[code] for i, code in zip(w["id"].tolist(), w["label"].tolist())}

    def set_counters(self, counters: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """The run's occupancy samples (trace.json counter tracks), stored with the log in place of any stored
        before: name → (cycles, values)."""
        table = self.tables["counter_names"]
        names, times, values = [np.zeros(0, np.int32)], [np.zeros(0)], [np.zeros(0, np.int32)]
        for name, (t, v) in counters.items():
            if not len(t):
                continue
            names.append(np.full(len(t), table.code(name), np.int32))
            times.append(t)
            values.append(v)
        cols = self.counters
        cols.arrays = {"name": np.concatenate(names), "t": np.concatenate(times).astype(np.float64),
                       "value": np.concatenate(values).astype(np.int32)}
        cols.n = cols.capacity = len(cols.arrays["name"])

    def unit_code(self, unit: str) -> int:
        return self.tables["units"].code(unit)

    def pipe_code(self, pipe: str) -> int:
        return self.tables["pipes"].code(pipe)

    def names(self, table: str) -> list[str]:
        return self.tables[table].names

    def counter_series(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Occupancy samples by buffer name: (times, values), in the order they were stored (time order)."""
        c = self.counters.view()
        order = np.argsort(c["name"], kind="stable")
        names = self.names("counter_names")
        bounds = np.searchsorted(c["name"][order], np.arange(len(names) + 1))
        return {name: (c["t"][order[bounds[i]:bounds[i + 1]]], c["value"][order[bounds[i]:bounds[i + 1]]])
                for i, name in enumerate(names)}

    def records(self, rows: np.ndarray | None = None) -> list[Any]:
        """Rows (all, or the indices ``rows``) as :class:`Record` views, in log order."""
        ids = None if rows is None else self.events.view()["id"][rows]
        slots, deps = self.slot_dicts(ids), self.dep_tuples(ids)
        empty: tuple[()] = ()
        return [Record(*row, dict(slots.get(row[0], {})), deps.get(row[0], empty)) for row in self.decoded(rows)]

    def decoded(self, rows: np.ndarray | None = None) -> Iterator[Row]:
        """The twelve event columns of each row (all, or the indices ``rows``), names decoded, in log order."""
        ev = self.events.view()
        if rows is not None:
            ev = {k: a[rows] for k, a in ev.items()}
        units, pipes, stages, kinds = (self.names(t) for t in ("units", "pipes", "stages", "kinds"))
        for i, u, p, s, b, t, sb, k, st, en, nb, fl in zip(*(ev[k].tolist() for k in EVENT_DTYPES)):
            yield i, units[u], pipes[p], stages[s], b, t, sb, kinds[k], st, en, nb, fl

    def slot_dicts(self, ids: np.ndarray | None = None) -> dict[int, dict[str, int]]:
        """Slots held, by instruction id (of ``ids`` only, if given)."""
        s, names = self.slots.view(), self.names("slot_names")
        if ids is not None:
            s = {k: a[np.isin(s["id"], ids)] for k, a in s.items()}
        out: dict[int, dict[str, int]] = {}
        for i, name, slot in zip(s["id"].tolist(), s["name"].tolist(), s["slot"].tolist()):
            out.setdefault(i, {})[names[name]] = slot
        return out

    def dep_tuples(self, ids: np.ndarray | None = None) -> dict[int, tuple[tuple[int, str, float, str], ...]]:
        """Dependencies (predecessor id, cause, latency, via) by instruction id (of ``ids`` only, if given)."""
        e, vias = self.edges.view(), self.names("vias")
        if ids is not None:
            e = {k: a[np.isin(e["dst"], ids)] for k, a in e.items()}
        lists: dict[int, list[tuple[int, str, float, str]]] = {}
        for dst, src, cause, lat, via in zip(*(e[k].tolist() for k in EDGE_DTYPES)):
            lists.setdefault(dst, []).append((src, CAUSES[cause], lat, vias[via]))
        return {k: tuple(v) for k, v in lists.items()}

    def core_of_rows(self) -> np.ndarray:
        """The core number of every row (from its unit)."""
        cores = np.array([parse_unit(u).core for u in self.names("units")] or [0], np.int64)
        return cores[self.events.view()["unit"]]

    def window(self, cores: Iterable[int] | None, tiles: tuple[int, int] | None) -> np.ndarray:
        """Indices of the rows of the cores ``cores`` and logical tiles ``a ≤ tile < b`` (None: all)."""
        keep = np.ones(len(self), bool)
        if cores is not None:
            keep &= np.isin(self.core_of_rows(), np.fromiter(cores, np.int64))
        if tiles is not None:
            tile = self.events.view()["tile"]
            keep &= (tile >= tiles[0]) & (tile < tiles[1])
        return np.flatnonzero(keep)

    def save(self, fh: IO[bytes]) -> None:
        """Write the log as an uncompressed ``.npz`` (string tables as unicode arrays; no pickles)."""
        arrays: dict[str, Any] = {"version": np.array(VERSION, np.int64)}
        for prefix, cols in (("ev", self.events), ("edge", self.edges), ("slot", self.slots),
                             ("counter", self.counters), ("work", self.work)):
            arrays.update({f"{prefix}_{k}": a for k, a in cols.view().items()})
        for name, table in self.tables.items():
            arrays[f"table_{name}"] = np.array(table.names, dtype=str) if table.names else np.zeros(0, "<U1")
        np.savez(fh, **arrays)
