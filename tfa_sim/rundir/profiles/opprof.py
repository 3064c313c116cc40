"""``msprof op``'s output (``OPPROF_{timestamp}_XXX``): per launch ``OpBasicInfo.csv`` (one row: Op Name, Task
Duration(us), Block Dim, Mix Block Dim, Current Freq, Rated Freq, …) and ``PipeUtilization.csv`` (a row per block and
sub-block: block_id, sub_block_id, aic_time(us), aic_cube_time(us) / aic_mac_time(us), …, aiv_vec_time(us), …).
One operator: the files sit in the directory itself; several operators or devices:
``[deviceN/]OpName/<launch>/OpBasicInfo_<time>.csv``, the launches numbered in the order they ran."""
from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from pathlib import Path

from tfa_sim.rundir.profiles.board import BoardProfile, Unit, choose_op, given, one_clock, one_shape, pick
from tfa_sim.rundir.profiles.columns import BASIC, CORE_TIME, PIPE_COLUMNS, SIMULATED
from tfa_sim.rundir.profiles.table import FIX_COLLECT, Table
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.units import LANES

#: What msprof op writes, by file name (a multi-operator run adds ``_<timestamp>``).
BASIC_FILE = re.compile(r"OpBasicInfo(_\d+)?\.csv", re.IGNORECASE)
PIPE_FILE = re.compile(r"PipeUtilization(_\d+)?\.csv", re.IGNORECASE)


def launch_order(path: Path) -> list[tuple[int, str]]:
    """A launch directory's sort key: its path with the numbers in it compared as numbers (launch 10 after 9)."""
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", str(path)) if part]


def read_op_launches(root: Path, launches: list[Path], op: str | None, pipes: bool,
                     launch: int | None) -> BoardProfile:
    """msprof op: the launches of the chosen operator (or the one ``launch`` picks), each OpBasicInfo +
    PipeUtilization; every figure the mean over the launches compared."""
    infos = {d: _basic(Table(_only(d, BASIC_FILE, "OpBasicInfo.csv"))) for d in launches}
    name = choose_op([str(i["op"]) for i in infos.values()], op, f"profile {root}")
    ordered = sorted((d for d in launches if infos[d]["op"] == name), key=launch_order)
    chosen = [ordered[i] for i in pick(len(ordered), launch, name, f"profile {root}")]
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
    one_shape({str(d): (_count_of(infos[d]["block_dim"]), _count_of(infos[d]["mix_block_dim"])) for d in chosen}, name,
              f"profile {root}", len(ordered))
    first = infos[chosen[0]]
    return BoardProfile(root, "msprof op", files, name, math.fsum(tasks) / len(tasks), len(ordered),
                        _count_of(first["block_dim"]), _count_of(first["mix_block_dim"]),
                        _clock(infos, ordered, chosen, "current", name, root),
                        _clock(infos, ordered, chosen, "rated", name, root),
                        _merge(per_launch), {}, {**columns, "task": str(first["task_column"])},
                        [_task(infos[d], d)[0] for d in ordered], launch,
                        op_type=given(first["op_type"]))


def _basic(table: Table) -> dict[str, float | str | None]:
    """OpBasicInfo.csv's one row: op name and type, task µs, Block Dim, Mix Block Dim, Current and Rated Freq."""
    table.require_whole("the launch's figures")
    if len(table.rows) != 1:
        raise InputError(f"profile file {table.path} has {len(table.rows)} operator rows, msprof op writes one; "
                         f"give the files of one launch")
    cols = {k: table.column(BASIC[k], why) for k, why in
            (("op", "the operator"), ("task", "the task's time"), ("block_dim", "the launch's blocks"),
             ("current", "the clock the board ran at"), ("rated", "which chip it is"))}
    mix = table.column(BASIC["mix_block_dim"])
    out: dict[str, float | str | None] = {"op": table.text(0, cols["op"]),
                                          "op_type": table.text(0, table.column(BASIC["op_type"]))}
    out.update({k: table.number(0, c) for k, c in cols.items() if k != "op" and c is not None})
    out["task_column"] = table.header[cols["task"] or 0]
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


def _count_of(value: float | str | None) -> int | None:
    return value if isinstance(value, int) else None


def _clock(infos: dict[Path, dict[str, float | str | None]], ordered: list[Path], chosen: list[Path], which: str,
           name: str, root: Path) -> float | None:
    """The ``which`` clock (``current``: Current Freq, ``rated``: Rated Freq) of the launches compared: one."""
    clocks = {i: v if isinstance(v := infos[d][which], float) else None for i, d in enumerate(ordered) if d in chosen}
    return one_clock(clocks, name, f"profile {root}", "clocks" if which == "current" else "Rated Freq")


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
    table.require_whole("a core of a block")
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
