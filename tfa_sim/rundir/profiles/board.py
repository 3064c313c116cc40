"""What a profile says of one operator, whatever its layout: its launches, their task times and Block Dim, the
pipes' busy µs; and the choices every layout shares (the operator, one launch or all of them)."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from tfa_sim.rundir.profiles.columns import COLLECT_PIPES, MISSING, SIMULATED
from tfa_sim.rundir.profiles.table import Damaged
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import plain


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
    from msprof op, or ``means`` per core from a per-task table), with the column each came from.

    ``task_us`` is the compared figure: the one ``launch`` picked (0-based, in start-time order), else the mean of
    every launch's task µs, which ``launch_task_us`` lists in that order.  ``block_dim`` is None where the profile
    does not give it (torch_npu's Level0 writes 0); ``missing`` names the pipe columns the profile lacks,
    ``others`` the other layouts found beside the one read, ``skipped`` the rows of other task types by type,
    ``damaged`` the rows left out because their cell count is not their file's."""

    source: Path
    layout: str  # "msprof op" | "op summary" | "kernel_details" | "database"
    files: list[str]
    op_name: str
    task_us: float
    launches: int
    block_dim: int | None
    mix_block_dim: int | None
    current_mhz: float | None
    rated_mhz: float | None
    units: list[Unit] | None
    means: dict[str, float]
    columns: dict[str, str]
    launch_task_us: list[float] = field(default_factory=list)
    launch: int | None = None
    op_type: str | None = None
    missing: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    damaged: list[Damaged] = field(default_factory=list)

    @property
    def collect(self) -> str:
        """How to collect the missing pipe columns ('' when none is missing)."""
        return COLLECT_PIPES if self.missing else ""


@dataclass
class Task:
    """One launch as a per-task table gives it (an op summary's or kernel_details.csv's row, a database's task):
    where it is (for messages), its start (µs, for the launch order: exact, as the file writes it, since a float
    holds an epoch timestamp only to 0.25 µs), task µs, Block Dim, Mix Block Dim and the busy µs of each pipe and
    core (``cube.time``, ``vec.time``) it has a value for, and the AI Core clock it ran at where the table says."""

    where: str
    start: Decimal | None
    task_us: float
    block_dim: int | None
    mix_block_dim: int | None
    values: dict[str, float] = field(default_factory=dict)
    clock_mhz: float | None = None


def choose_op(names: list[str], op: str | None, where: str) -> str:
    """The operator of ``names`` (one per task) that ``op`` names: its whole name, else the one name it begins
    (as msprof's --kernel-name); None: the only operator there is."""
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name] += 1
    listed = ", ".join(f"{n} ({c} task{'s' if c > 1 else ''})" for n, c in sorted(counts.items())[:6])
    if not counts:
        raise InputError(f"{where} holds no task of an AI Core operator; give the profile of the kernel")
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


def pick(count: int, launch: int | None, name: str, where: str) -> list[int]:
    """The launches compared: the one ``launch`` names (0-based), or all ``count`` of them."""
    if launch is None:
        return list(range(count))
    if not 0 <= launch < count:
        raise InputError(f"--launch {launch}: {where} holds {count} launch{'es' if count > 1 else ''} of {name}, "
                         f"numbered 0 … {count - 1} in start-time order; give one of them, or leave --launch out "
                         f"to compare their mean")
    return [launch]


def one_shape(shapes: dict[str, tuple[int | None, int | None]], name: str, where: str, count: int) -> None:
    """Refuse launches of several shapes (``shapes``: where each launch is → its Block Dim and Mix Block Dim, in
    start-time order), naming where the first launch of another shape than the first is."""
    if len(set(shapes.values())) > 1:
        seen = sorted({_pair(b, m) for b, m in shapes.values()})
        first = next(iter(shapes.values()))
        odd, (b, m) = next((at, shape) for at, shape in shapes.items() if shape != first)
        raise InputError(f"{where}: the launches of {name} differ in Block Dim / Mix Block Dim ({', '.join(seen)}); "
                         f"pick one with --launch N (0 … {count - 1}, in start-time order), or give a profile of "
                         f"launches of one shape (the first: {_pair(*first)}; {odd}: {_pair(b, m)})")


def _pair(block_dim: int | None, mix_block_dim: int | None) -> str:
    """Block Dim / Mix Block Dim as a message shows them ("none" where the profile gives none)."""
    return "/".join("none" if n is None else str(n) for n in (block_dim, mix_block_dim))


def one_device(devices: list[object], name: str, where: str) -> object:
    """The device the launches of ``name`` ran on (``devices``: each launch's, None where the profile does not
    say); launches on several devices in one file are refused: a launch is one device's."""
    found = sorted({str(d) for d in devices if given(d) is not None})
    if len(found) > 1:
        raise InputError(f"{where} holds launches of {name} on {len(found)} devices ({', '.join(found[:6])}): "
                         f"tfa-sim compares one device's launches; give the profile of one device (its own "
                         f"directory or export)")
    return found[0] if found else None


def one_clock(clocks: dict[int, float | None], name: str, where: str, what: str = "clocks") -> float | None:
    """The clock the launches compared ran at (``clocks``: each one's, by its number in start-time order; None: the
    profile gives none); launches at different clocks (a throttled one) are refused, naming each clock's launches.
    ``what``: the clock's name (a chip's Rated Freq differs between launches only in a damaged profile)."""
    launches: dict[float, list[int]] = defaultdict(list)
    for i, mhz in sorted(clocks.items()):
        if mhz is not None:
            launches[mhz].append(i)
    if len(launches) > 1:
        listed = "; ".join(f"{mhz:g} MHz: launch{'es' if len(at) > 1 else ''} {', '.join(map(str, at[:6]))}"
                           + (" …" if len(at) > 6 else "") for mhz, at in sorted(launches.items()))
        raise InputError(f"{where}: the launches of {name} ran at different {what} ({listed}); compare the launches "
                         f"of one clock with --launch N")
    return next(iter(launches), None)


def given(text: object) -> str | None:
    """A name a table gives (an operator's type), None where it marks it missing (empty, NA, N/A)."""
    return None if text is None or str(text).strip().lower() in MISSING else str(text).strip()


def in_order(tasks: list[Task]) -> list[Task]:
    """The tasks in start-time order, ties (and tasks without a start) in the file's order."""
    if any(t.start is None for t in tasks):
        return list(tasks)
    return sorted(tasks, key=lambda t: t.start if t.start is not None else Decimal(0))


def from_tasks(source: Path, layout: str, files: list[str], name: str, tasks: list[Task], columns: dict[str, str],
               launch: int | None, pipes: bool) -> BoardProfile:
    """The profile of the operator ``name`` from its launches (``tasks``) in a per-task table, every figure the
    mean over the launches compared; ``columns``: the column (or metric) each pipe and core time came from."""
    ordered = in_order(tasks)
    where = f"profile {source}"
    chosen = [ordered[i] for i in pick(len(ordered), launch, name, where)]
    one_shape({t.where: (t.block_dim, t.mix_block_dim) for t in chosen}, name, where, len(ordered))
    figures: dict[str, list[float]] = defaultdict(list)
    for task in chosen:
        for pipe, value in task.values.items():
            figures[pipe].append(value)
    means = {k: math.fsum(v) / len(v) for k, v in figures.items()}
    head = chosen[0]
    if head.block_dim is None and pipes and any(p in means for p in SIMULATED):
        raise InputError(f"{head.where}: Block Dim is missing, so the pipes' figures (one block's) cannot be put on "
                         f"the cores; collect with --task-time=l1 (torch_npu: profiler_level Level1)")
    task_us = math.fsum(t.task_us for t in chosen) / len(chosen)
    compared = {id(t) for t in chosen}
    return BoardProfile(source, layout, files, name, task_us, len(ordered), head.block_dim, head.mix_block_dim,
                        one_clock({i: t.clock_mhz for i, t in enumerate(ordered) if id(t) in compared}, name, where),
                        None, None, means,
                        {k: v for k, v in columns.items() if not k.endswith(".time")}, [t.task_us for t in ordered],
                        launch)


def missing_columns(columns: dict[str, str], spellings: dict[str, tuple[str, ...]]) -> list[str]:
    """The simulated pipes' columns a table lacks (``columns``: the pipes it has), each as its spellings."""
    return ["/".join(spellings[p]) for p in SIMULATED if p not in columns]
