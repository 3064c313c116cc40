"""The per-task CSV tables: the op summary of ``msprof --application`` (``op_summary_*.csv``) and torch_npu's
``kernel_details.csv`` (the op summary with Op Name, OP Type, Task Type, Task Start Time and Task Duration renamed
Name, Type, Accelerator Core, Start Time and Duration, a Step Id first).  A row per task; its pipe times are one
block's (``aicore_time(us)`` is "the time of the task when all blocks are scheduled simultaneously"), so they are
read as the mean over cores.  Rows of :data:`OTHER_TASKS` are skipped; a Block Dim of 0 (torch_npu's Level0 writes
no block count) is no Block Dim.  A row whose cell count is not its file's is left out and named, never
realigned; the launches that are whole are compared."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from tfa_sim.rundir.profiles.board import (
    BoardProfile,
    Task,
    choose_op,
    from_tasks,
    given,
    missing_columns,
    one_device,
)
from tfa_sim.rundir.profiles.columns import CORE_TIME, OTHER_TASKS, PIPE_COLUMNS, SIMULATED, TASK_COLUMNS
from tfa_sim.rundir.profiles.table import FIX_COLLECT, Damaged, Table
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import plain

#: The figures of a task row: the pipes and the cores' whole times, with their spellings.
FIGURES = {**PIPE_COLUMNS, **{f"{kind}.time": names for kind, names in CORE_TIME.items()}}


def read_task_tables(root: Path, tables: list[Table], layout: str, op: str | None, pipes: bool,
                     launch: int | None) -> BoardProfile:
    """The chosen operator's task rows in ``tables`` (one op summary's files, or one kernel_details.csv); rows
    whose cell count is not their file's are left out and named (``BoardProfile.damaged``)."""
    rows = [(t, r) for t in tables for r in range(len(t.rows))]
    damaged = [d for t in tables for d in t.damaged]
    what = f"{layout} {root}"
    if not rows and not damaged:
        raise InputError(f"{what} holds no task rows; {FIX_COLLECT}")
    names = {id(t): t.column(TASK_COLUMNS["op"], "the operator of each task") for t in tables}
    types = {id(t): t.column(TASK_COLUMNS["task_type"]) for t in tables}
    skipped = Counter(t.text(r, types[id(t)]) for t, r in rows if t.text(r, types[id(t)]).upper() in OTHER_TASKS)
    kept = [(t, r) for t, r in rows if t.text(r, types[id(t)]).upper() not in OTHER_TASKS]
    whole = [t.text(r, names[id(t)]) for t, r in kept]
    _some_launch_whole(whole, op, damaged, what)
    name = choose_op(whole, op, what)
    chosen = [(t, r) for t, r in kept if t.text(r, names[id(t)]) == name]
    one_device([t.text(r, t.column(TASK_COLUMNS["device"])) for t, r in chosen], name, what)
    columns: dict[str, str] = {}
    tasks = [_task_row(t, r, name, pipes, columns) for t, r in chosen]
    board = from_tasks(root, layout, [str(t.path) for t in tables], name, tasks, columns, launch, pipes)
    t, r = chosen[0]
    board.op_type = given(t.text(r, t.column(TASK_COLUMNS["op_type"])))
    board.missing = missing_columns(columns, PIPE_COLUMNS)
    board.skipped = dict(sorted(skipped.items()))
    board.damaged = damaged
    return board


def _some_launch_whole(names: list[str], op: str | None, damaged: list[Damaged], what: str) -> None:
    """Refuse, naming the damaged rows, a profile whose operator (``op``, or any) has no whole row left: the rows
    that might be its launches are damaged (their cell count is not the file's), which is not a cut file.  ``op``
    begins the names of operators (as msprof's --kernel-name): when a damaged row holds a name it begins that no
    whole row has, the operator meant may be the damaged one, so the whole name is asked for."""
    if not damaged or (op is None and names) or (op is not None and op in names):
        return
    hits = [d for d in damaged if op is None or d.names(op, whole=True)]
    if op is not None and not hits:
        whole = set(names)
        hits = [d for d in damaged if any(c.strip().startswith(op) and c.strip() not in whole for c in d.cells)]
        if hits and any(n.startswith(op) for n in whole):
            raise InputError(f"--op {plain(op)} begins the names of whole rows' operators and a name in damaged rows "
                             f"of {what}: {hits[0].says()}; give the operator's whole name (damaged rows are left "
                             f"out, never realigned)")
    if hits:
        which = f"of {plain(op)} " if op is not None else ""
        raise InputError(f"{what} has no whole row {which}left to compare: {hits[0].says()}"
                         + (f" (and {len(hits) - 1} more such rows)" if len(hits) > 1 else "")
                         + ": damaged rows, not a cut file (its last row is whole); collect the profile again")


def _task_row(t: Table, r: int, name: str, pipes: bool, columns: dict[str, str]) -> Task:
    """One row as a launch: its task µs (> 0), start, Block Dim, Mix Block Dim and figures; the column of each
    figure is noted in ``columns``."""
    where = f"profile file {t.path} line {t.lines[r]}"
    task_col = t.column(TASK_COLUMNS["task"], "the task's time") or 0
    columns["task"] = t.header[task_col]
    task = t.number(r, task_col)
    if not task:
        said = "missing (empty or N/A)" if task is None else "0 µs"
        raise InputError(f"{where}: the task's time of {name} is {said}; a launch takes time: collect with "
                         f"--task-time=l1")
    start = t.column(TASK_COLUMNS["start"])
    blocks = _whole(t, r, t.column(TASK_COLUMNS["block_dim"], "the launch's blocks"), "Block Dim")
    row = Task(where, t.exact(r, start) if start is not None else None, task, blocks or None,
               _whole(t, r, t.column(TASK_COLUMNS["mix_block_dim"]), "Mix Block Dim"))
    for figure, spellings in FIGURES.items():
        col = t.column(spellings)
        if col is None:
            continue
        columns[figure] = t.header[col]
        value = t.number(r, col)
        if value is None and pipes and figure in SIMULATED:
            raise InputError(f"{where}: {t.header[col]} of {name} is N/A: {name} ran on no cube and vector cores as "
                             f"the TFA kernel does (pick the kernel with --op NAME), or the profile has no "
                             f"PipeUtilization (collect with --task-time=l1 --aic-metrics=PipeUtilization)")
        if value is not None:
            row.values[figure] = value
    return row


def _whole(t: Table, r: int, col: int | None, what: str) -> int | None:
    """A count ≥ 0 (Block Dim, Mix Block Dim: 0 where a task has no such blocks), None when missing."""
    value = t.number(r, col) if col is not None else None
    if value is not None and value != int(value):
        raise InputError(f"profile file {t.path} line {t.lines[r]}: {what} {value:g} is not a count; the profile is "
                         f"damaged: collect it again")
    return None if value is None else int(value)
