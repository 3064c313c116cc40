"""The profile readers fuzzed from real files (issue 49): every real fixture of tests/data/msprof/real, mutated, read.

Each example takes one real file and makes one mutation of a class docs/profiles.md lists ("Fuzzed from real
files"): a cell dropped or added, a row cut short, a cell quoted, emptied, a number replaced by NaN, infinity, a
negative or a huge value, a column renamed to another known spelling, the bytes cut short; a database's row
removed, a column of a row nulled or given a hostile value, its bytes cut short.  What the mutation implies is
worked out here, by hand, from the file as csv or sqlite3 gives it and the rules docs/profiles.md states — a
damaged row left out, a missing value missing, a bad number refused on its line, the launches in start order, one
shape — and the reader must give exactly that reading, or refuse in one line naming the file (and the line or task
at fault, where there is one): exit 2, nothing written, the input unchanged.  No traceback, ever.

Bounded: derandomized (the same examples every run), a modest number per file, no deadline; the command itself
runs only where a refusal is expected (a reading stops before the model is run).
"""
from __future__ import annotations

import csv
import hashlib
import math
import os
import re
import shutil
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from test_hostile_cli import tfa
from test_profile_reader import DATA

from tfa_sim.rundir.msprof import read_profile
from tfa_sim.rundir.profiles.columns import (
    CORE_SHARE,
    CORE_TIME,
    LARGEST,
    OTHER_TASKS,
    PIPE_COLUMNS,
    PMU_METRICS,
    SIMULATED,
    TASK_COLUMNS,
)
from tfa_sim.spec.errors import InputError

REAL = DATA / "real"
#: Examples per real file: 900 in all, about 10 s of one CPU (the suite's time stays about where it was).
EXAMPLES = 100
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

#: Each real CSV and the operator read from it (one with several launches of one shape where the file has one).
CSV_FILES = {
    "msinsight_st_level2": ("msinsight_st_level2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                            "aclnnMatmul_MatMulV3Common_MatMulV3"),
    "msinsight_level1": ("msinsight_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                         "aclnnMaxPool2dWithMask_TransDataSpecial_TransData"),
    "msinsight_level0": ("msinsight_level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                         "aclnnMaxPool2dWithMask_TransDataSpecial_TransData"),
    "msinsight_memory_l0": ("msinsight_memory_l0/test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                            "FlashAttentionScore"),
    "msinsight_damaged_row": ("msinsight_damaged_row/test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                              "FlashAttentionScore"),
    "msinsight_op_summary": ("msinsight_op_summary/op_summary_1.csv", "FlashAttentionScore"),
    "mstt_advisor": ("mstt_advisor/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                     "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore"),
}
#: Each real database and the operator read from it.
DB_FILES = {
    "msinsight_msprof_db": ("msinsight_msprof_db/msprof_0.db", "aclnnTril_Tril_Tril"),
    "msinsight_db_level1": ("msinsight_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db",
                            "Conv2D4"),
}

#: Cells a number is replaced by: not numbers, not finite, negative, beyond any launch, and harmless ones.
HOSTILE_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "-0.001", "1e300", "1e13", "99999999999999999999",
                   "1e999", "0", "-0", "1e-300", "0.5", "12.5us", "x", "1,5", "0x10"]
#: Cells that say "no value".
MISSING_MARKS = ["", "N/A", "NA", "na", "  "]
#: Every figure's spellings (the data tfa-sim matches columns by).
SPELLINGS = [names for names in (*TASK_COLUMNS.values(), *PIPE_COLUMNS.values(), *CORE_TIME.values())]


def key(name: str) -> str:
    return re.sub(r"\s+", "", name).lower()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- what a mutated CSV implies, by hand ---------------------------------------------------------------------------

@dataclass
class Reading:
    """What the reader must give: the launches' task µs in start order, blocks, the pipes' means, the damaged lines
    and the rows of other task types skipped."""

    launches: list[float]
    block_dim: int | None
    mix_block_dim: int | None
    means: dict[str, float]
    damaged: list[int] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    clock_mhz: float | None = None


@dataclass
class Refusal:
    """A refusal the reader must give: words its line holds, and the line (or task) at fault, where there is one."""

    words: str
    at: str | None = None


class Refused(Exception):
    def __init__(self, words: str, at: str | None = None) -> None:
        super().__init__(words)
        self.refusal = Refusal(words, at)


def value_of(text: str, *, bounded: bool = True) -> Decimal | None:
    """A cell as the documentation reads it: missing (empty, NA, N/A), else a finite number ≥ 0 (a unit after it
    aside), at most LARGEST where it is a figure rather than a timestamp."""
    text = re.sub(r"\s*(mhz|us|μs|µs)$", "", text.strip(), flags=re.IGNORECASE)
    if text.lower() in ("", "na", "n/a"):
        return None
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise Refused("is not a number") from None
    if not number.is_finite() or number < 0:
        raise Refused("is not a time or count")
    if bounded and not float(number) <= LARGEST:
        raise Refused("is larger than any time or count")
    return number


def column(header: list[str], names: tuple[str, ...]) -> int | None:
    keys = [key(h) for h in header]
    return next((keys.index(key(n)) for n in names if key(n) in keys), None)


def choose(names: list[str], op: str) -> str:
    """The operator ``op`` names: the whole name, else the one name it begins."""
    if not names:
        raise Refused("holds no task of an AI Core operator")
    if op in names:
        return op
    matching = sorted({n for n in names if n.startswith(op)})
    if len(matching) == 1:
        return matching[0]
    raise Refused("operators' names" if matching else "has no task of that operator")


@dataclass
class Launch:
    """One launch as the documentation reads it: where it is (the words a refusal names it by), its start, task µs,
    Block Dim (0: none), Mix Block Dim and its figures."""

    where: str
    start: Any
    task_us: float
    block_dim: int | None
    mix_block_dim: int | None
    figures: dict[str, float]
    clock_mhz: float | None = None


def launches_of(launches: list[Launch], pipes: bool) -> Reading:
    """The reading of the chosen launches (in the file's or the database's order): in start order, of one shape,
    every figure the mean over the launches that have it."""
    if all(t.start is not None for t in launches):
        launches = sorted(launches, key=lambda t: t.start)
    first = (launches[0].block_dim, launches[0].mix_block_dim)
    odd = next((t for t in launches if (t.block_dim, t.mix_block_dim) != first), None)
    if odd is not None:
        raise Refused("differ in Block Dim / Mix Block Dim", odd.where)
    figures: dict[str, list[float]] = {}
    for t in launches:
        for name, value in t.figures.items():
            figures.setdefault(name, []).append(value)
    means = {k: math.fsum(v) / len(v) for k, v in figures.items()}
    if first[0] is None and pipes and any(p in means for p in SIMULATED):
        raise Refused("Block Dim is missing", launches[0].where)
    clocks = {t.clock_mhz for t in launches if t.clock_mhz is not None}
    if len(clocks) > 1:
        raise Refused("ran at different clocks", None)
    return Reading([t.task_us for t in launches], first[0], first[1], means, clock_mhz=next(iter(clocks), None))


def csv_expected(header: list[str], rows: list[tuple[int, list[str]]], damaged: list[tuple[int, list[str]]], op: str,
                 pipes: bool = True) -> Reading:
    """The reading a per-task table implies: ``rows`` the whole rows (line, cells under ``header``), ``damaged`` the
    rows of another cell count, set aside."""
    if not rows and not damaged:
        raise Refused("holds no task rows")
    name_at, type_at = column(header, TASK_COLUMNS["op"]), column(header, TASK_COLUMNS["task_type"])
    assert name_at is not None
    kind = [cells[type_at].strip() if type_at is not None else "" for _, cells in rows]
    skipped = Counter(k for k in kind if k.upper() in OTHER_TASKS)
    kept = [r for r, k in zip(rows, kind) if k.upper() not in OTHER_TASKS]
    names = [cells[name_at].strip() for _, cells in kept]
    if damaged and not any(n.startswith(op) for n in names):
        hits = [line for line, cells in damaged if any(c.strip().startswith(op) for c in cells)]
        if hits:
            raise Refused("left to compare", f"line {hits[0]} of")
    name = choose(names, op)
    chosen = [csv_launch(header, f"line {line}", cells, pipes) for line, cells in kept
              if cells[name_at].strip() == name]
    reading = launches_of(chosen, pipes)
    reading.damaged, reading.skipped = [line for line, _ in damaged], dict(skipped)
    return reading


def csv_launch(header: list[str], where: str, cells: list[str], pipes: bool) -> Launch:
    """One row as a launch, every refusal naming its line."""
    try:
        at = {f: column(header, TASK_COLUMNS[f]) for f in ("start", "task", "block_dim", "mix_block_dim")}
        task = value_of(cells[at["task"]]) if at["task"] is not None else None
        if not task:
            raise Refused("a launch takes time")
        start = value_of(cells[at["start"]], bounded=False) if at["start"] is not None else None
        counts = []
        for figure in ("block_dim", "mix_block_dim"):
            count = value_of(cells[at[figure]]) if at[figure] is not None else None
            if count is not None and float(count) != int(float(count)):
                raise Refused("is not a count")
            counts.append(None if count is None else int(float(count)))
        figures = {}
        for figure, names in {**PIPE_COLUMNS, **{f"{k}.time": v for k, v in CORE_TIME.items()}}.items():
            col = column(header, names)
            value = value_of(cells[col]) if col is not None else None
            if value is None and col is not None and pipes and figure in SIMULATED:
                raise Refused("is N/A")
            if value is not None:
                figures[figure] = float(value)
    except Refused as refused:
        refused.refusal.at = refused.refusal.at or where
        raise
    return Launch(where, start, float(task), counts[0] or None, counts[1], figures)


# --- mutating a CSV ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CsvFile:
    """A real CSV as csv reads it: the header, the data rows (one line each), the cell count most rows have and the
    header's named columns (its trailing empty cells aside)."""

    path: Path
    op: str
    data: bytes
    header: list[str]
    rows: list[list[str]]
    width: int
    named: int

    @classmethod
    def load(cls, relative: str, op: str) -> CsvFile:
        path = REAL / relative
        data = path.read_bytes()
        text = data.decode("utf-8")
        table = list(csv.reader(text.splitlines()))
        assert len(table) == len(text.splitlines()), "a cell spans lines: line numbers would not be rows"
        named = len(table[0])
        while named and not table[0][named - 1].strip():
            named -= 1
        width = Counter(len(r) for r in table[1:]).most_common(1)[0][0]
        return cls(path, op, data, table[0], table[1:], width, named)

    def implied(self, header: list[str], rows: list[list[str]]) -> tuple[list[str], list, list]:
        """The header's named columns, the whole rows (line, cells) and the damaged ones of ``rows`` (data rows on
        lines 2, 3, …; a blank one is no row): a row of the file's cell count (nothing past the named columns) is
        whole; the last row short of it is the file cut."""
        whole, damaged = [], []
        lines = [line for line, cells in enumerate(rows, start=2) if any(c.strip() for c in cells)]  # blank: none
        for line in lines:
            cells = rows[line - 2]
            if len(cells) == self.width and not any(c.strip() for c in cells[self.named:]):
                whole.append((line, cells[:self.named]))
            elif line == lines[-1] and len(cells) < self.width:
                raise Refused("the file is cut in its last row", f"line {line}")
            else:
                damaged.append((line, cells))
        return header[:self.named], whole, damaged


def encode(rows: list[list[str]], quoted: tuple[int, int] | None = None) -> bytes:
    """``rows`` as CSV text, a cell quoted where it must be, and cell ``quoted`` (row, column) quoted anyway."""
    def cell(text: str, force: bool) -> str:
        return f'"{text.replace(chr(34), chr(34) * 2)}"' if force or any(c in text for c in ',"\r\n') else text

    return "".join(",".join(cell(c, (i, j) == quoted) for j, c in enumerate(row)) + "\n"
                   for i, row in enumerate(rows)).encode()


def respellings(name: str, header: list[str]) -> list[str]:
    """Other names the column ``name`` is read under: its figure's other spellings (none already in the header),
    and itself in other case and spacing."""
    present = {key(h) for h in header}
    others = [s for names in SPELLINGS if key(name) in map(key, names) for s in names if key(s) not in present]
    return [*dict.fromkeys(others), name.upper(), name.replace(" ", ""), name.replace("(", " (")]


def mutate_csv(f: CsvFile, data: Any) -> tuple[bytes, list[str], list[list[str]]]:
    """One mutation of ``f``, drawn from ``data`` (each choice labelled, so a failing example reads as its
    mutation): the mutated bytes, and the header and data rows csv gives of them."""
    kind = data.draw(st.sampled_from(["drop", "add", "shorten", "quote", "empty", "number", "rename", "cut"]),
                     label="class")
    event(f"mutation {kind}")
    if kind == "cut":
        start = f.data.index(b"\n") + 1
        cut = f.data[:data.draw(st.integers(start, len(f.data)), label="bytes kept")]
        return cut, f.header, list(csv.reader(cut.decode().splitlines()))[1:]
    if kind == "rename":
        at = data.draw(st.sampled_from([j for j, h in enumerate(f.header[:f.named]) if respellings(h, f.header)]),
                       label="column")
        new = data.draw(st.sampled_from(respellings(f.header[at], f.header)), label=f"{f.header[at]} renamed")
        header = [*f.header[:at], new, *f.header[at + 1:]]
        return encode([header, *f.rows]), header, f.rows
    name_at = column(f.header, TASK_COLUMNS["op"]) or 0
    ours = [i for i, r in enumerate(f.rows) if len(r) > name_at and r[name_at] == f.op]
    mine = bool(ours) and data.draw(st.booleans(), label=f"a row of {f.op}")
    i = data.draw(st.sampled_from(ours) if mine else st.integers(0, len(f.rows) - 1), label="row index")
    row, rows = list(f.rows[i]), [list(r) for r in f.rows]
    read = [j for names in SPELLINGS if (j := column(f.header, names)) is not None and j < len(row)]
    last = len(row) - 1 if kind != "add" else len(row)
    j = data.draw(st.sampled_from(read) if data.draw(st.booleans(), label="a column read") else st.integers(0, last),
                  label="cell index")
    if kind == "drop":
        del row[j]
    elif kind == "shorten":  # the row cut before its cell j (one cell at least)
        del row[max(j, 1):]
    elif kind == "add":
        row.insert(j, data.draw(st.sampled_from(["", "1", "x", "N/A"]), label="cell added"))
    elif kind == "empty":
        row[j] = data.draw(st.sampled_from(MISSING_MARKS), label="cell emptied to")
    elif kind == "number":
        row[j] = data.draw(st.sampled_from(HOSTILE_NUMBERS), label="number")
    rows[i] = row
    return encode([f.header, *rows], (i + 1, j) if kind == "quote" else None), f.header, rows


# --- what a mutated database implies, by hand ----------------------------------------------------------------------

#: The tables and columns the mutations touch (as both real databases spell them) and the values they put there.
DB_TABLES = {"TASK": ("startNs", "endNs", "globalTaskId"),
             "COMPUTE_TASK_INFO": ("name", "globalTaskId", "blockDim", "mixBlockDim", "taskType", "opType"),
             "TASK_PMU_INFO": ("globalTaskId", "name", "value"), "STRING_IDS": ("id", "value"),
             "AICORE_FREQ": ("timestampNs", "freq")}
HOSTILE_CELLS = [-1, 0, 2.5, 1e300, "x", 2 ** 62, 1000.0, 10 ** 18]


def open_db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def db_rows(db: sqlite3.Connection, table: str) -> list[dict[str, Any]] | None:
    """The rows of ``table`` (the columns the mutations touch), None without the table."""
    if not db.execute(f"PRAGMA table_info({table})").fetchall():
        return None
    columns = DB_TABLES[table]
    return [dict(zip(columns, r)) for r in db.execute(f"SELECT {', '.join(columns)} FROM {table}")]


def whole_number(value: Any, where: str) -> int:
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise Refused("not a whole number", where)


def metric_value(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            0 <= value <= LARGEST * 1000:
        return float(value)
    raise Refused("not a time or count", where)


def db_expected(path: Path, op: str, pipes: bool = True) -> Reading:
    """The reading a database implies: TASK joined with COMPUTE_TASK_INFO on globalTaskId, names through
    STRING_IDS, other task types skipped, the operator's launches with their TASK_PMU_INFO metrics (ns) and the
    AICORE_FREQ clock at their start."""
    db = open_db(path)
    tables = {t: db_rows(db, t) for t in DB_TABLES}
    db.close()
    strings = {r["id"]: r["value"] for r in tables["STRING_IDS"] or []}
    tasks = tables["TASK"] or []
    joined = [(c, t) for c in tables["COMPUTE_TASK_INFO"] or []  # a compute task without its TASK row: t None
              for t in [t for t in tasks if c["globalTaskId"] is not None and t["globalTaskId"] == c["globalTaskId"]]
              or [None]]
    kind = [str(strings.get(c["taskType"])) for c, _ in joined]
    skipped = Counter(k for k in kind if k.upper() in OTHER_TASKS)
    kept = [j for j, k in zip(joined, kind) if k.upper() not in OTHER_TASKS]
    nameless = [c["globalTaskId"] for c, _ in kept if strings.get(c["name"]) is None]
    if nameless:
        raise Refused("which STRING_IDS lacks", f"globalTaskId {nameless[0]}" if len(nameless) == 1 else None)
    name = choose([str(strings[c["name"]]) for c, _ in kept], op)
    chosen = [(c, t) for c, t in kept if str(strings[c["name"]]) == name]
    ids = {c["globalTaskId"] for c, _ in chosen}
    samples: dict[Any, dict[str, list[float]]] = {}
    for r in tables["TASK_PMU_INFO"] or []:
        if r["globalTaskId"] in ids and r["name"] in strings:
            where = f"globalTaskId {r['globalTaskId']}"
            samples.setdefault(r["globalTaskId"], {}).setdefault(str(strings[r["name"]]), []).append(
                metric_value(r["value"], where))
    metrics = {i: {n: math.fsum(v) / len(v) for n, v in m.items()} for i, m in samples.items()}
    clocks = []
    for r in tables["AICORE_FREQ"] or []:
        mhz = metric_value(r["freq"], "AICORE_FREQ")
        if not 0 < mhz <= LARGEST:
            raise Refused("a clock of", "AICORE_FREQ")
        clocks.append((Decimal(whole_number(r["timestampNs"], "AICORE_FREQ")) / 1000, mhz))
    clocks.sort()
    required = {figure for m in metrics.values() for figure, names in PMU_METRICS.items()
                if pipes and figure in SIMULATED and any(n in m for n in names)}
    launches = [db_launch(c, t, metrics.get(c["globalTaskId"], {}), required, clocks) for c, t in chosen]
    reading = launches_of(launches, pipes)
    reading.skipped = dict(skipped)
    return reading


def db_launch(c: dict[str, Any], t: dict[str, Any] | None, metrics: dict[str, float], required: set[str],
              clocks: list[tuple[Decimal, float]]) -> Launch:
    """One launch of the database: its task µs, exact from the integers; blocks; metrics in µs; the clock."""
    where = f"globalTaskId {c['globalTaskId']}"
    if t is None:
        raise Refused("that TASK has no row of", where)
    start, end = whole_number(t["startNs"], where), whole_number(t["endNs"], where)
    if end <= start:
        raise Refused("is not after its startNs", where)
    task = (end - start) / 1000
    if task > LARGEST:
        raise Refused("longer than any launch", where)
    blocks, mix = (whole_number(c[k], where) if c[k] is not None else None for k in ("blockDim", "mixBlockDim"))
    figures = {}
    for figure, names in PMU_METRICS.items():
        metric = next((n for n in names if n in metrics), None)
        if metric is None and figure in required:
            raise Refused("TASK_PMU_INFO has no", where)
        if metric is not None:
            figures[figure] = metrics[metric] / 1000
    low, high = CORE_SHARE
    if any(core and not low * task <= core <= high * task for core in (figures.get("cube.time"),
                                                                       figures.get("vec.time"))):
        raise Refused("not the unit msprof documents", where)
    at = Decimal(start) / 1000
    clock = next((mhz for stamp, mhz in reversed(clocks) if stamp <= at), clocks[0][1]) if clocks else None
    return Launch(where, start, task, blocks or None, mix, figures, clock)


def mutate_db(original: Path, path: Path, op: str, data: Any) -> str:
    """One mutation of a copy of the database ``original`` at ``path``, drawn from ``data``: its class."""
    kind = data.draw(st.sampled_from(["remove", "null", "value", "cut"]), label="class")
    event(f"mutation {kind}")
    if kind == "cut":
        whole = original.read_bytes()
        path.write_bytes(whole[:data.draw(st.integers(0, len(whole) - 1), label="bytes kept")])
        return kind
    shutil.copy(original, path)
    db = sqlite3.connect(path)
    tables = [t for t in DB_TABLES if db.execute(f"PRAGMA table_info({t})").fetchall()]
    table = data.draw(st.sampled_from(tables), label="table")
    everything = [r for (r,) in db.execute(f"SELECT rowid FROM {table}")]
    related = [r for (r,) in db.execute(RELATED[table], (op,))] if table in RELATED else everything
    rowid = data.draw(st.sampled_from(related if related and data.draw(st.booleans(), label=f"a row of {op}")
                                      else everything), label=f"{table} rowid")
    try:
        if kind == "remove":
            db.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
        else:
            col = data.draw(st.sampled_from(DB_TABLES[table]), label="column")
            value = None if kind == "null" else data.draw(st.sampled_from(HOSTILE_CELLS), label="value")
            db.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (value, rowid))
        db.commit()
    except sqlite3.IntegrityError:  # a primary key cannot be NULL, text or a fraction: no such database exists
        reject()
    finally:
        db.close()
    return kind


#: The rows of each table that belong to the operator ``?`` (by its name), for the mutations to hit often.
_OF_OP = "SELECT c.globalTaskId FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name WHERE s.value = ?"
RELATED = {"TASK": f"SELECT rowid FROM TASK WHERE globalTaskId IN ({_OF_OP})",
           "COMPUTE_TASK_INFO": f"SELECT rowid FROM COMPUTE_TASK_INFO WHERE globalTaskId IN ({_OF_OP})",
           "TASK_PMU_INFO": f"SELECT rowid FROM TASK_PMU_INFO WHERE globalTaskId IN ({_OF_OP})",
           "STRING_IDS": "SELECT id FROM STRING_IDS WHERE value = ?"}


# --- the outcome ---------------------------------------------------------------------------------------------------

def outcome(path: Path, op: str, expected: Reading | Refusal | tuple[Reading, Refusal], box: Path) -> str:
    """The reader's outcome on ``path`` is ``expected``; a refusal is one line naming the file (and the line or
    task at fault), and the command gives it: exit 2, nothing written, the input unchanged.  ``expected`` a
    reading and a refusal: either is right.  Returns the outcome in words (for the statistics)."""
    before = digest(path)
    if isinstance(expected, tuple):
        try:
            read_profile(path, op)
            expected = expected[0]
        except InputError:
            expected = expected[1]
    try:
        board = read_profile(path, op)
    except InputError as exc:
        message = str(exc)
        assert isinstance(expected, Refusal), f"refused, but the mutation implies a reading {expected}: {message}"
        assert "\n" not in message and str(path) in message and expected.words in message, (expected, message)
        assert expected.at is None or re.search(re.escape(expected.at) + r"\b", message), (expected, message)
        listing = sorted(os.listdir(box))
        r = tfa("profile", str(path), "--op", op, "--set", "case.s0=128", cwd=box)
        assert (r.code, r.out, r.err) == (2, "", f"tfa-sim: error: {message}\n"), r
        assert sorted(os.listdir(box)) == listing and digest(path) == before
        return f"refused: {expected.words}"
    assert isinstance(expected, Reading), f"read, but the mutation implies a refusal {expected}"
    assert board.launch_task_us == expected.launches
    assert board.task_us == pytest.approx(math.fsum(expected.launches) / len(expected.launches), rel=1e-12)
    assert (board.block_dim, board.mix_block_dim) == (expected.block_dim, expected.mix_block_dim)
    assert board.means.keys() == expected.means.keys()
    for name, value in expected.means.items():
        assert board.means[name] == pytest.approx(value, rel=1e-12, abs=1e-300), name
    assert [d.line for d in board.damaged] == expected.damaged and board.skipped == expected.skipped
    assert board.current_mhz == expected.clock_mhz and digest(path) == before
    return "read" + (", damaged rows left out" if board.damaged else "")


def implied(compute: Any) -> Reading | Refusal:
    try:
        return compute()
    except Refused as refused:
        return refused.refusal


@pytest.fixture(scope="module")
def csv_files() -> dict[str, CsvFile]:
    return {name: CsvFile.load(*where) for name, where in CSV_FILES.items()}


def test_every_real_file_is_fuzzed():
    """Every real profile in tests/data/msprof/real is one of the fuzzed files (op_statistic.csv is refused by its
    name whatever it holds)."""
    found = {p.relative_to(REAL).as_posix() for p in REAL.rglob("*") if p.suffix in (".csv", ".db")}
    fuzzed = {where for where, _ in [*CSV_FILES.values(), *DB_FILES.values()]}
    assert found - fuzzed == {"msinsight_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/op_statistic.csv"}


@pytest.mark.parametrize("name", sorted(CSV_FILES))
def test_the_unmutated_files_read_as_their_rows_say(csv_files, name, tmp_path):
    """The harness itself: each file, and each as this module writes it back, reads as the hand reading says."""
    f = csv_files[name]
    expected = implied(lambda: csv_expected(*f.implied(f.header, f.rows), f.op))
    assert isinstance(expected, Reading) and expected.launches
    outcome(f.path, f.op, expected, tmp_path)
    copy = tmp_path / f.path.name
    copy.write_bytes(encode([f.header, *f.rows]))
    outcome(copy, f.op, expected, tmp_path)


@pytest.mark.parametrize("name", sorted(CSV_FILES))
@FUZZ
@given(data=st.data())
def test_a_mutated_real_csv_reads_as_the_mutation_implies_or_is_refused(csv_files, tmp_path, name, data):
    f = csv_files[name]
    mutated, header, rows = mutate_csv(f, data)
    box = Path(os.path.join(tmp_path, f"box{len(os.listdir(tmp_path))}"))
    box.mkdir()
    path = box / f.path.name
    path.write_bytes(mutated)
    expected = implied(lambda: csv_expected(*f.implied(header, rows), f.op))
    event(outcome(path, f.op, expected, box))
    shutil.rmtree(box)


@pytest.mark.parametrize("name", sorted(DB_FILES))
def test_the_unmutated_databases_read_as_their_rows_say(name, tmp_path):
    where, op = DB_FILES[name]
    expected = implied(lambda: db_expected(REAL / where, op))
    assert isinstance(expected, Reading) and expected.launches
    outcome(REAL / where, op, expected, tmp_path)


@pytest.mark.parametrize("name", sorted(DB_FILES))
@FUZZ
@given(data=st.data())
def test_a_mutated_real_database_reads_as_the_mutation_implies_or_is_refused(tmp_path, name, data):
    where, op = DB_FILES[name]
    box = Path(os.path.join(tmp_path, f"box{len(os.listdir(tmp_path))}"))
    box.mkdir()
    path = box / Path(where).name
    if mutate_db(REAL / where, path, op, data) == "cut":  # refused as cut, or read as before where its pages are whole
        expected: Reading | Refusal | tuple = (db_expected(REAL / where, op), Refusal("database"))
    else:
        expected = implied(lambda: db_expected(path, op))
    event(outcome(path, op, expected, box))
    shutil.rmtree(box)
