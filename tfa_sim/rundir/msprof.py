"""Reading a board's profile of one kernel: what the files say, checked, nothing inferred (docs/profiles.md).

Four layouts, one module each in :mod:`tfa_sim.rundir.profiles`:

* **msprof op** (``OPPROF_{timestamp}_XXX``): per launch OpBasicInfo.csv and PipeUtilization.csv (``opprof``);
* **op summary** of ``msprof --application`` (``PROF_XXX/mindstudio_profiler_output/op_summary_*.csv``) and
  **kernel_details** of torch_npu's profiler (``*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv``): a row per
  task (``tasks``);
* **database**: ``msprof_*.db`` and ``ascend_pytorch_profiler_*.db``, read with sqlite3, read-only (``database``).

A path is a directory holding one of them (searched to depth :data:`MAX_DEPTH`) or one of their files.  A directory
holding several (a torch_npu directory holds kernel_details.csv, the op summary of its PROF_ directory and, with
``export_type`` db, a database, all of one run) is read in the order of :data:`PREFERENCE` and the others are named
(``BoardProfile.others``); msprof op output beside any other layout is two runs, and refused.  Column names are
matched in every spelling :mod:`~tfa_sim.rundir.profiles.columns` lists; ``NA``, ``N/A`` and empty cells are
missing values; every number is finite and ≥ 0, or the file is refused with one line naming it, the row and the
column.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from tfa_sim.rundir.profiles.board import BoardProfile
from tfa_sim.rundir.profiles.columns import CORE_TIME, PIPE_COLUMNS, SIMULATED
from tfa_sim.rundir.profiles.database import read_database
from tfa_sim.rundir.profiles.opprof import BASIC_FILE, PIPE_FILE, read_op_launches
from tfa_sim.rundir.profiles.table import Table
from tfa_sim.rundir.profiles.tasks import read_task_tables
from tfa_sim.spec.errors import InputError

__all__ = ["CORE_TIME", "PIPE_COLUMNS", "SIMULATED", "BoardProfile", "read_profile"]

#: The files of each per-task layout, by name.
LAYOUT_FILES = {"kernel_details": re.compile(r"kernel_details(_[\w.-]*)?\.csv", re.IGNORECASE),
                "op summary": re.compile(r"op_summary(_[\w.-]*)?\.csv", re.IGNORECASE),
                "database": re.compile(r"(ascend_pytorch_profiler|msprof)(_\d+)?\.db", re.IGNORECASE)}
#: Which layout a directory holding several is read from: torch_npu's own table first, then msprof's.
PREFERENCE = ("kernel_details", "op summary", "database")
#: Each layout in a sentence.
LAYOUT_WORDS = {"msprof op": "msprof op output", "op summary": "an op summary", "kernel_details":
                "torch_npu's kernel_details.csv", "database": "a profile database"}
STATISTIC_FILE = re.compile(r"op_statistic(_[\w.-]*)?\.csv", re.IGNORECASE)
DEVICE_DIR = re.compile(r"device_?(\d+)", re.IGNORECASE)
#: How deep and how wide DIR is searched (OPPROF/deviceN/OpName/launch is depth 3).
MAX_DEPTH, MAX_DIRS = 5, 5000
GIVE = ("give the OPPROF_… directory msprof op wrote, the PROF_… directory of msprof --application (or its "
        "op_summary_*.csv), a torch_npu …_ascend_pt directory (or its kernel_details.csv), or a msprof_*.db or "
        "ascend_pytorch_profiler_*.db")


def read_profile(path: Path, op: str | None = None, pipes: bool = True, launch: int | None = None) -> BoardProfile:
    """The profile of operator ``op`` (None: the only one) under ``path``, in any layout the module docstring
    names.  ``pipes``: the simulated pipes' values must be there where the layout has their columns (the
    side-by-side needs them; a calibration point needs only the task); ``launch``: compare that launch alone
    (0-based, in start-time order) rather than the mean of them all."""
    if not os.path.lexists(path):
        raise InputError(f"profile {path} not found; {GIVE}")
    if not path.is_dir() and (BASIC_FILE.fullmatch(path.name) or PIPE_FILE.fullmatch(path.name)):
        path = path.parent  # one of msprof op's files: its launch's directory
    elif not path.is_dir():
        return _read_file(path, op, pipes, launch)
    launches, found = _walk(path)
    _one_device(path, [*launches, *(f for files in found.values() for f in files)])
    if launches:
        other = next((layout for layout in PREFERENCE if found[layout]), None)
        if other:
            raise InputError(f"profile {path} holds both msprof op output ({launches[0]}) and "
                             f"{LAYOUT_WORDS[other]} ({found[other][0]}): give the directory of one of them")
        return read_op_launches(path, launches, op, pipes, launch)
    layout = next((layout for layout in PREFERENCE if found[layout]), None)
    if layout is None:
        raise InputError(f"profile {path} holds no profile tfa-sim reads (no OpBasicInfo.csv, op_summary_*.csv, "
                         f"kernel_details.csv, msprof_*.db or ascend_pytorch_profiler_*.db); {GIVE}")
    board = _read_layout(path, layout, _one_run(path, layout, found[layout]), op, pipes, launch)
    board.others = [f"{LAYOUT_WORDS[other]} ({_listed(path, found[other])})" for other in PREFERENCE
                    if other != layout and found[other]]
    return board


def _read_file(path: Path, op: str | None, pipes: bool, launch: int | None) -> BoardProfile:
    """A file given itself: a database (``.db``), or a per-task CSV (kernel_details by its Name column)."""
    if path.suffix.lower() == ".db":
        return read_database(path, op, pipes, launch)
    if STATISTIC_FILE.fullmatch(path.name):
        raise InputError(f"profile {path} is an op_statistic.csv: each operator type's launches summed (Count, "
                         f"Avg Time), no launch's Block Dim or pipes; give the kernel_details.csv (torch_npu) or "
                         f"op_summary_*.csv (msprof) beside it")
    table = Table(path)
    layout = "op summary" if table.column(("Op Name",)) is not None else "kernel_details"
    return read_task_tables(path, [table], layout, op, pipes, launch)


def _read_layout(root: Path, layout: str, files: list[Path], op: str | None, pipes: bool,
                 launch: int | None) -> BoardProfile:
    """The profile in ``files`` of one per-task ``layout`` found under ``root``."""
    if layout == "database":
        board = read_database(files[0], op, pipes, launch)
        board.source = root
        return board
    return read_task_tables(root, [Table(f) for f in files], layout, op, pipes, launch)


def _walk(root: Path) -> tuple[list[Path], dict[str, list[Path]]]:
    """The msprof op launch directories (holding an OpBasicInfo*.csv) under ``root`` and the files of each
    per-task layout; a directory with msprof op's PipeUtilization*.csv and no OpBasicInfo*.csv is a launch whose
    files are not all there, refused (never a launch left out unsaid)."""
    launches: list[Path] = []
    found: dict[str, list[Path]] = {layout: [] for layout in PREFERENCE}
    for seen, (here, dirs, files) in enumerate(os.walk(root)):
        if seen > MAX_DIRS:
            raise InputError(f"profile {root} holds more than {MAX_DIRS} directories; give the profile's own "
                             f"directory (OPPROF_…, PROF_…, …_ascend_pt)")
        depth = len(Path(here).relative_to(root).parts)
        dirs[:] = [] if depth >= MAX_DEPTH else sorted(d for d in dirs if d.lower() != "dump")
        if any(BASIC_FILE.fullmatch(f) for f in files):
            launches.append(Path(here))
        elif any(PIPE_FILE.fullmatch(f) for f in files):
            raise InputError(f"profile {root}: {here} holds msprof op's PipeUtilization.csv but no OpBasicInfo.csv: a "
                             f"launch's files are not all there; copy the profile from the board again")
        for layout, pattern in LAYOUT_FILES.items():
            found[layout] += [Path(here) / f for f in sorted(files) if pattern.fullmatch(f)]
    return sorted(launches), found


def _one_device(root: Path, found: list[Path]) -> None:
    """Refuse profiles of several devices at once (a multi-device msprof run has a ``deviceN`` directory each)."""
    devices = sorted({m.group(0) for p in found for part in p.relative_to(root).parts
                      if (m := DEVICE_DIR.fullmatch(part))})
    if len(devices) > 1:
        raise InputError(f"profile {root} holds profiles of {len(devices)} devices ({', '.join(devices)}): give one, "
                         f"e.g. {root / devices[0]}")


def _one_run(root: Path, layout: str, files: list[Path]) -> list[Path]:
    """The files of ``layout`` that one run wrote: an op summary's files in one directory, one kernel_details.csv,
    one database (torch_npu's before msprof's, which a torch_npu directory may hold beside it)."""
    if layout == "database":
        torch = [f for f in files if f.name.lower().startswith("ascend_pytorch_profiler")]
        files = torch or files
    parents = sorted({str(f.parent) for f in files})
    if len(parents) > 1 or (layout != "op summary" and len(files) > 1):
        raise InputError(f"profile {root} holds {LAYOUT_WORDS[layout]} of several runs or ranks "
                         f"({_listed(root, files)}): give the directory of one")
    return files


def _listed(root: Path, files: list[Path]) -> str:
    """Up to three of ``files``, relative to ``root``."""
    shown = ", ".join(str(f.relative_to(root)) for f in files[:3])
    return shown + (f" and {len(files) - 3} more" if len(files) > 3 else "")
