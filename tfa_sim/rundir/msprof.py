"""Reading a board's msprof profile of one kernel: what the files say, checked, nothing inferred.

Two layouts (tests/data/msprof/README.md cites the documentation pages each follows):

* **msprof op** (``OPPROF_{timestamp}_XXX``): per launch ``OpBasicInfo.csv`` (one row: Op Name, Task
  Duration(us), Block Dim, Mix Block Dim, Current Freq, Rated Freq, …) and ``PipeUtilization.csv`` (a row per
  block and sub-block: block_id, sub_block_id, aic_time(us), aic_cube_time(us) / aic_mac_time(us), …,
  aiv_vec_time(us), …).  One operator: the files sit in the directory itself; several operators or devices:
  ``[deviceN/]OpName/<launch>/OpBasicInfo_<time>.csv``.
* **op summary** of ``msprof --application`` (``PROF_XXX/mindstudio_profiler_output/op_summary_*.csv``): a row
  per task with the same pipe columns; its pipe times are one block's (``aicore_time(us)`` is "the time of the
  task when all blocks are scheduled simultaneously"), so they are read as the mean over cores.

Column names are matched ignoring case and spaces, in every spelling :data:`PIPE_COLUMNS` and :data:`BASIC`
list; ``NA``, ``N/A`` and empty cells are missing values; every number is finite and ≥ 0, or the file is refused
with one line naming it, the row and the column.
"""
from __future__ import annotations

import csv
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import plain, read_bytes, show
from tfa_sim.spec.units import LANES

#: The pipes msprof reports, under the names summary.json uses, with every column spelling accepted (CANN 8.0.RC1's
#: msprof op and every op summary say ``aic_mac_*``, later msprof op ``aic_cube_*``).
PIPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "cube.M": ("aic_cube_time(us)", "aic_mac_time(us)"), "cube.MTE1": ("aic_mte1_time(us)",),
    "cube.MTE2": ("aic_mte2_time(us)",), "cube.FIX": ("aic_fixpipe_time(us)",),
    "cube.scalar": ("aic_scalar_time(us)",), "vec.V": ("aiv_vec_time(us)",), "vec.MTE2": ("aiv_mte2_time(us)",),
    "vec.MTE3": ("aiv_mte3_time(us)",), "vec.scalar": ("aiv_scalar_time(us)",)}
#: The pipes the timing model simulates; the scalar pipes it does not (their board figures are shown alone).
SIMULATED = ("cube.M", "cube.MTE1", "cube.MTE2", "cube.FIX", "vec.V", "vec.MTE2", "vec.MTE3")
#: A unit's whole time on the task: the cube core's and a vector core's.
CORE_TIME = {"cube": ("aic_time(us)", "aicore_time(us)"), "vec": ("aiv_time(us)",)}
#: Task-level columns (OpBasicInfo.csv, op summary), every spelling accepted (``Block Num`` from msprof 26 / CANN 9).
BASIC: dict[str, tuple[str, ...]] = {
    "op": ("Op Name",), "task": ("Task Duration(us)",), "block_dim": ("Block Dim", "Block Num"),
    "mix_block_dim": ("Mix Block Dim", "Mix Block Num"), "current": ("Current Freq",), "rated": ("Rated Freq",)}
MISSING = ("", "na", "n/a")
#: What msprof writes, by file name (a multi-operator run adds ``_<timestamp>``).
BASIC_FILE = re.compile(r"OpBasicInfo(_\d+)?\.csv", re.IGNORECASE)
PIPE_FILE = re.compile(r"PipeUtilization(_\d+)?\.csv", re.IGNORECASE)
SUMMARY_FILE = re.compile(r"op_summary(_[\w.-]*)?\.csv", re.IGNORECASE)
DEVICE_DIR = re.compile(r"device_?(\d+)", re.IGNORECASE)
#: How deep and how wide DIR is searched for msprof's files (OPPROF/deviceN/OpName/launch is depth 3).
MAX_DEPTH, MAX_DIRS = 5, 5000
MAX_BYTES = 1 << 28
FIX_COLLECT = "collect with msprof op (its default --aic-metrics include PipeUtilization) or msprof --application"


def _key(name: str) -> str:
    return re.sub(r"\s+", "", name).lower()


@dataclass
class Unit:
    """One cube or vector core of one block: its pipes' busy µs and its whole time (``time``) on the task."""

    kind: str  # cube | vec
    block: int
    lane: int
    values: dict[str, float] = field(default_factory=dict)


@dataclass
class BoardProfile:
    """One operator's profile: the task and, per pipe, the board's busy time (``units`` per block and sub-block
    from msprof op, or ``means`` per core from an op summary), with the column each came from."""

    source: Path
    layout: str  # "msprof op" | "op summary"
    files: list[str]
    op_name: str
    task_us: float  # mean over the launches read
    launches: int
    block_dim: int
    mix_block_dim: int | None
    current_mhz: float | None
    rated_mhz: float | None
    units: list[Unit] | None
    means: dict[str, float]
    columns: dict[str, str]


class Table:
    """A CSV file msprof wrote: its header and rows as text, with checked number reading."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = read_bytes(path, "profile file", "give the files msprof wrote", max_bytes=MAX_BYTES)
        try:
            text = data.decode("utf-8-sig")
            bad = text.find("\0")
        except UnicodeDecodeError as exc:
            text, bad = "", exc.start
        if bad >= 0:
            raise InputError(f"profile file {path} is binary, not text (byte {bad} is 0x{data[bad]:02x}): not the CSV "
                             f"msprof writes; give the .csv files of msprof's output")
        reader = csv.reader(text.splitlines())
        try:  # each kept row with the file's line it ends on (blank lines are skipped, not renumbered)
            numbered = [(reader.line_num, r) for r in reader if any(cell.strip() for cell in r)]
        except csv.Error as exc:
            raise InputError(f"profile file {path} is not a CSV ({exc})") from None
        if not numbered:
            raise InputError(f"profile file {path} is empty; {FIX_COLLECT}")
        self.header = [h.strip() for h in numbered[0][1]]
        self.rows = [r for _, r in numbered[1:]]
        self.lines = [n for n, _ in numbered[1:]]
        for n, row in zip(self.lines, self.rows):
            if len(row) != len(self.header):
                raise InputError(f"profile file {path} line {n} has {len(row)} cells, its header {len(self.header)}: "
                                 f"the file is cut or damaged")
        self._index = {_key(h): i for i, h in enumerate(self.header)}

    def column(self, names: tuple[str, ...], required: str = "") -> int | None:
        """The index of the first of ``names`` present; None, or with ``required`` (why it is needed) an error."""
        for name in names:
            if _key(name) in self._index:
                return self._index[_key(name)]
        if required:
            raise InputError(f"profile file {self.path} has no column {' or '.join(names)} ({required}); "
                             f"{FIX_COLLECT}")
        return None

    def number(self, row: int, col: int) -> float | None:
        """The cell as a finite number ≥ 0 (a unit written after it, ``1800 MHz``, ``12.5us``, aside), None when
        msprof marks it missing (empty, NA, N/A)."""
        text = re.sub(r"\s*(mhz|us|μs|µs)$", "", self.rows[row][col].strip(), flags=re.IGNORECASE)
        if text.lower() in MISSING:
            return None
        where = f"profile file {self.path} line {self.lines[row]}, column {self.header[col]}"
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{where}: {show(text)} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise InputError(f"{where}: {text} is not a time or count (NaN, infinite or negative); the profile is "
                             f"damaged: collect it again")
        return value

    def count(self, row: int, col: int, what: str) -> int | None:
        """A whole number ≥ 1 (Block Dim, block_id + 1), or None when missing."""
        value = self.number(row, col)
        if value is not None and (value != int(value) or (value < 1 and what != "block_id")):
            raise InputError(f"profile file {self.path} line {self.lines[row]}: {what} {value:g} is not a count; "
                             f"collect with --task-time=l1")
        return None if value is None else int(value)


def read_profile(path: Path, op: str | None = None, pipes: bool = True) -> BoardProfile:
    """The profile of operator ``op`` (None: the only one) under ``path``: an msprof op output directory (or one
    of its files), an ``msprof --application`` directory or an op summary CSV.  ``pipes``: the simulated pipes'
    columns are required (the side-by-side needs them; a calibration point needs only the task)."""
    if not os.path.lexists(path):
        raise InputError(f"profile {path} not found; give the OPPROF_… directory msprof op wrote, the PROF_… "
                         f"directory of msprof --application, or its op_summary_*.csv")
    if not path.is_dir() and (BASIC_FILE.fullmatch(path.name) or PIPE_FILE.fullmatch(path.name)):
        path = path.parent  # one of msprof op's files: its launch's directory
    elif not path.is_dir():
        return _read_summary(path, [Table(path)], op, pipes)
    launches, summaries = _walk(path)
    if launches and summaries:
        raise InputError(f"profile {path} holds both msprof op output ({launches[0]}) and an op summary "
                         f"({summaries[0]}): give the directory of one of them")
    if not launches and not summaries:
        raise InputError(f"profile {path} holds no msprof output (no OpBasicInfo.csv, no op_summary_*.csv); give "
                         f"the OPPROF_… directory of msprof op or the PROF_… directory of msprof --application")
    _one_device(path, launches or summaries)
    if summaries:
        parents = sorted({str(s.parent) for s in summaries})
        if len(parents) > 1:
            raise InputError(f"profile {path} holds op summaries of several runs ({', '.join(parents[:3])}): "
                             f"give one PROF_… directory")
        return _read_summary(path, [Table(s) for s in summaries], op, pipes)
    return _read_op_launches(path, launches, op, pipes)


def _walk(root: Path) -> tuple[list[Path], list[Path]]:
    """The launch directories (holding an OpBasicInfo*.csv) and the op summary files under ``root``."""
    launches: list[Path] = []
    summaries: list[Path] = []
    for seen, (here, dirs, files) in enumerate(os.walk(root)):
        if seen > MAX_DIRS:
            raise InputError(f"profile {root} holds more than {MAX_DIRS} directories; give the OPPROF_… or PROF_… "
                             f"directory itself")
        depth = len(Path(here).relative_to(root).parts)
        dirs[:] = [] if depth >= MAX_DEPTH else sorted(d for d in dirs if d.lower() != "dump")
        if any(BASIC_FILE.fullmatch(f) for f in files):
            launches.append(Path(here))
        summaries += [Path(here) / f for f in sorted(files) if SUMMARY_FILE.fullmatch(f)]
    return sorted(launches), summaries


def _one_device(root: Path, found: list[Path]) -> None:
    """Refuse profiles of several devices at once (a multi-device msprof op run has a ``deviceN`` directory each)."""
    devices = sorted({m.group(0) for p in found for part in p.relative_to(root).parts
                      if (m := DEVICE_DIR.fullmatch(part))})
    if len(devices) > 1:
        raise InputError(f"profile {root} holds profiles of {len(devices)} devices ({', '.join(devices)}): give one, "
                         f"e.g. {root / devices[0]}")


def choose_op(names: list[str], op: str | None, where: str) -> str:
    """The operator of ``names`` (one per task) that ``op`` names: its whole name, else the one name it begins
    (as msprof's --kernel-name); None: the only operator there is."""
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name] += 1
    listed = ", ".join(f"{n} ({c} task{'s' if c > 1 else ''})" for n, c in sorted(counts.items())[:6])
    if op is None:
        if len(counts) == 1:
            return names[0]
        raise InputError(f"{where} holds tasks of {len(counts)} operators: {listed}; pick one with --op NAME")
    if op in counts:
        return op
    matching = [n for n in counts if n.startswith(op)]
    if len(matching) == 1:
        return matching[0]
    if matching:
        raise InputError(f"--op {plain(op)} begins {len(matching)} operators' names in {where} "
                         f"({', '.join(sorted(matching)[:6])}): give the whole name")
    raise InputError(f"--op {plain(op)}: {where} has no task of that operator, only {listed}; give the profile of "
                     f"the kernel, or pick one of these with --op")


def _basic(table: Table) -> dict[str, float | str | None]:
    """OpBasicInfo.csv's one row: op name, task µs, Block Dim, Mix Block Dim, Current and Rated Freq (MHz)."""
    if len(table.rows) != 1:
        raise InputError(f"profile file {table.path} has {len(table.rows)} operator rows, msprof op writes one; "
                         f"give the files of one launch")
    cols = {k: table.column(BASIC[k], why) for k, why in
            (("op", "the operator"), ("task", "the task's time"), ("block_dim", "the launch's blocks"),
             ("current", "the clock the board ran at"), ("rated", "which chip it is"))}
    mix = table.column(BASIC["mix_block_dim"])
    out: dict[str, float | str | None] = {"op": table.rows[0][cols["op"] or 0].strip()}
    out.update({k: table.number(0, c) for k, c in cols.items() if k != "op" and c is not None})
    out["block_dim"] = table.count(0, cols["block_dim"] or 0, "Block Dim")
    out["mix_block_dim"] = table.count(0, mix, "Mix Block Dim") if mix is not None else None
    return out


def _only(directory: Path, pattern: re.Pattern[str], what: str) -> Path:
    """The one file of ``directory`` whose name ``pattern`` matches."""
    found = sorted(f for f in os.listdir(directory) if pattern.fullmatch(f))
    if len(found) != 1:
        raise InputError(f"profile {directory} has {len(found) or 'no'} {what} file{'s' if len(found) != 1 else ''}"
                         f"{' (' + ', '.join(found[:3]) + ')' if found else ''}; a launch's directory holds one: "
                         f"{FIX_COLLECT}")
    return directory / found[0]


def _task(info: dict[str, float | str | None], path: Path) -> tuple[float, int]:
    """The task's µs (> 0) and Block Dim of a launch's basic figures."""
    task, blocks = info.get("task"), info.get("block_dim")
    if not isinstance(task, float) or task <= 0:
        raise InputError(f"profile file {path}: Task Duration(us) is {task}; a launch takes time: collect with "
                         f"--task-time=l1")
    if not isinstance(blocks, int):
        raise InputError(f"profile file {path}: Block Dim is missing; collect with --task-time=l1")
    return task, blocks


def _read_op_launches(root: Path, launches: list[Path], op: str | None, pipes: bool) -> BoardProfile:
    """msprof op: the launches of the chosen operator, each OpBasicInfo + PipeUtilization, averaged."""
    infos = {d: _basic(Table(_only(d, BASIC_FILE, "OpBasicInfo.csv"))) for d in launches}
    name = choose_op([str(i["op"]) for i in infos.values()], op, f"profile {root}")
    chosen = [d for d in launches if infos[d]["op"] == name]
    tasks, per_launch, files = [], [], []
    columns: dict[str, str] = {}
    for d in chosen:
        basic_file = _only(d, BASIC_FILE, "OpBasicInfo.csv")
        task, blocks = _task(infos[d], basic_file)
        pipe_file = _only(d, PIPE_FILE, "PipeUtilization.csv")
        units, columns = _units(Table(pipe_file), pipes)
        _check_units(units, blocks, pipe_file, name)
        tasks.append(task)
        per_launch.append(units)
        files += [str(basic_file), str(pipe_file)]
    dims = sorted({infos[d]["block_dim"] for d in chosen}, key=str)
    if len(dims) > 1:
        raise InputError(f"profile {root}: the launches of {name} differ in Block Dim ({', '.join(map(str, dims))}); "
                         f"give a directory of launches of one shape")
    first = infos[chosen[0]]
    return BoardProfile(root, "msprof op", files, name, math.fsum(tasks) / len(tasks), len(tasks), int(dims[0] or 0),
                        _optional_int(first["mix_block_dim"]), _mean_of([infos[d]["current"] for d in chosen]),
                        _mean_of([infos[d]["rated"] for d in chosen]), _merge(per_launch), {}, columns)


def _optional_int(value: float | str | None) -> int | None:
    return value if isinstance(value, int) else None


def _mean_of(values: list[float | str | None]) -> float | None:
    numbers = [v for v in values if isinstance(v, float)]
    return math.fsum(numbers) / len(numbers) if numbers else None


def _pipe_columns(table: Table, pipes: bool) -> dict[str, int]:
    """The column of each pipe the table has; with ``pipes`` every simulated pipe's is required."""
    cols = {}
    for pipe, names in PIPE_COLUMNS.items():
        col = table.column(names, f"the busy time of {pipe}" if pipes and pipe in SIMULATED else "")
        if col is not None:
            cols[pipe] = col
    return cols


def _units(table: Table, pipes: bool) -> tuple[list[Unit], dict[str, str]]:
    """PipeUtilization.csv's rows as units: a row with an aic_time(us) is its block's cube core, one with an
    aiv_time(us) one of its vector cores (numbered by the digits ending sub_block_id, else in file order)."""
    block_col = table.column(("block_id",), "the block of each row") or 0
    sub_col = table.column(("sub_block_id",), "the core of each row") or 0
    times = {kind: table.column(names, f"which rows are {kind} cores") or 0 for kind, names in CORE_TIME.items()}
    cols = _pipe_columns(table, pipes)
    units: list[Unit] = []
    order: list[tuple[int, int]] = []
    for r, row in enumerate(table.rows):
        block = table.count(r, block_col, "block_id")
        if block is None:
            raise InputError(f"profile file {table.path} line {table.lines[r]}: block_id is missing")
        found = False
        for kind, col in times.items():
            time = table.number(r, col)
            if time is None:
                continue
            unit = Unit(kind, block, 0, {f"{kind}.time": time})
            for pipe, c in cols.items():
                value = table.number(r, c) if pipe.startswith(kind + ".") else None
                if value is None and pipe.startswith(kind + ".") and pipes and pipe in SIMULATED:
                    raise InputError(f"profile file {table.path} line {table.lines[r]}: {table.header[c]} is missing "
                                     f"on a {kind} core's row; {FIX_COLLECT}")
                if value is not None:
                    unit.values[pipe] = value
            digits = re.search(r"(\d+)\s*$", row[sub_col])
            order.append((int(digits.group(1)) if digits else len(units), len(units)))
            units.append(unit)
            found = True
        if not found:
            raise InputError(f"profile file {table.path} line {table.lines[r]} has neither aic_time(us) nor "
                             f"aiv_time(us): no core to put it on")
    _number_lanes(units, order)
    return units, {pipe: table.header[c] for pipe, c in cols.items()}


def _number_lanes(units: list[Unit], order: list[tuple[int, int]]) -> None:
    """Number each block's vector cores 0, 1, … in the order of their sub_block_id digits (then file order)."""
    by_block: dict[int, list[tuple[tuple[int, int], Unit]]] = defaultdict(list)
    for key, unit in zip(order, units):
        if unit.kind == "vec":
            by_block[unit.block].append((key, unit))
    for members in by_block.values():
        for lane, (_, unit) in enumerate(sorted(members, key=lambda m: m[0])):
            unit.lane = lane


def _check_units(units: list[Unit], block_dim: int, path: Path, name: str) -> None:
    """Blocks 0…Block Dim−1, each with one cube core and :data:`LANES` vector cores."""
    blocks = sorted({u.block for u in units})
    if not blocks:
        raise InputError(f"profile file {path} has no rows of {name}: give the PipeUtilization.csv msprof op wrote "
                         f"for the launch")
    if blocks != list(range(block_dim)):
        raise InputError(f"profile file {path} has rows of {len(blocks)} blocks (block_id {blocks[0]}…{blocks[-1]}), "
                         f"its OpBasicInfo's Block Dim is {block_dim}: give both files of one launch")
    for block in blocks:
        cubes = sum(u.block == block and u.kind == "cube" for u in units)
        vecs = sum(u.block == block and u.kind == "vec" for u in units)
        if (cubes, vecs) != (1, LANES):
            raise InputError(f"profile file {path}: block {block} of {name} has {cubes} cube and {vecs} vector core "
                             f"rows; the TFA kernel runs one cube and {LANES} vector cores per block: give its profile "
                             f"(--op NAME)")


def _merge(launches: list[list[Unit]]) -> list[Unit]:
    """The units of several launches of one shape, each value the mean over the launches that have it."""
    sums: dict[tuple[str, int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for units in launches:
        for u in units:
            for name, value in u.values.items():
                sums[(u.kind, u.block, u.lane)][name].append(value)
    return [Unit(kind, block, lane, {n: math.fsum(v) / len(v) for n, v in values.items()})
            for (kind, block, lane), values in sorted(sums.items())]


def _read_summary(root: Path, tables: list[Table], op: str | None, pipes: bool) -> BoardProfile:
    """An op summary: the task rows of the chosen operator, their figures averaged (one block's each)."""
    rows = [(t, r) for t in tables for r in range(len(t.rows))]
    if not rows:
        raise InputError(f"op summary {root} holds no task rows; {FIX_COLLECT}")
    name_of = {id(t): t.column(BASIC["op"], "the operator of each task") or 0 for t in tables}
    name = choose_op([t.rows[r][name_of[id(t)]].strip() for t, r in rows], op, f"op summary {root}")
    chosen = [(t, r) for t, r in rows if t.rows[r][name_of[id(t)]].strip() == name]
    figures: dict[str, list[float]] = defaultdict(list)
    dims, mixes, columns = set(), set(), {}
    for t, r in chosen:
        blocks = t.count(r, t.column(BASIC["block_dim"], "the launch's blocks") or 0, "Block Dim")
        figures["task"].append(_task({"task": t.number(r, t.column(BASIC["task"], "the task's time") or 0),
                                      "block_dim": blocks}, t.path)[0])
        mix = t.column(BASIC["mix_block_dim"])
        dims.add(blocks)
        mixes.add(t.count(r, mix, "Mix Block Dim") if mix is not None else None)
        cols = {**_pipe_columns(t, pipes), **{f"{k}.time": c for k, names in CORE_TIME.items()
                                            if (c := t.column(names)) is not None}}
        for pipe, c in cols.items():
            value = t.number(r, c)
            if value is None and pipes and pipe in SIMULATED:
                raise InputError(f"op summary {t.path} line {t.lines[r]}: {t.header[c]} of {name} is N/A: {name} "
                                 f"ran on no cube and vector cores as the TFA kernel does (pick the kernel with --op "
                                 f"NAME), or the profile has no PipeUtilization (collect with --task-time=l1 "
                                 f"--aic-metrics=PipeUtilization)")
            if value is not None:
                figures[pipe].append(value)
            columns[pipe] = t.header[c]
    if len(dims) > 1 or len(mixes) > 1:
        raise InputError(f"op summary {root}: the tasks of {name} differ in Block Dim or Mix Block Dim; give a "
                         f"profile of launches of one shape")
    means = {k: math.fsum(v) / len(v) for k, v in figures.items() if k != "task"}
    return BoardProfile(root, "op summary", [str(t.path) for t in tables], name,
                        math.fsum(figures["task"]) / len(chosen), len(chosen), int(next(iter(dims)) or 0),
                        next(iter(mixes)), None, None, None, means,
                        {k: v for k, v in columns.items() if not k.endswith(".time")})
