"""The SQLite exports: ``msprof_{timestamp}.db`` (msprof of CANN 8.x and later) and torch_npu's
``ascend_pytorch_profiler_{rank}.db`` (``export_type`` db), tables as msprof's profile_data_file_references_db.md
gives them: a launch's time from TASK (endNs − startNs, ns), its operator and blocks from COMPUTE_TASK_INFO, its
pipes from TASK_PMU_INFO (metric names without a unit: the ``*_time`` ones are ns, checked against the task), every
name an id into STRING_IDS.  TASK's startNs and endNs are epoch nanoseconds (about 1.7·10^18, beyond the 2^53 a
float holds to the unit): they stay integers until the duration endNs − startNs is formed, so it is exact.

A database is opened read-only and immutable: SQLite then takes no lock and writes no ``-wal``, ``-shm`` or journal
file beside it (a read-only connection to a WAL database would), and the file stays byte for byte as it was.
"""
from __future__ import annotations

import math
import os
import sqlite3
import stat
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from tfa_sim.rundir.profiles.board import (
    BoardProfile,
    Task,
    choose_op,
    from_tasks,
    given,
    missing_columns,
    one_device,
)
from tfa_sim.rundir.profiles.columns import (
    CORE_SHARE,
    DB_COLUMNS,
    DB_REQUIRED,
    LARGEST,
    OTHER_TASKS,
    PMU_METRICS,
    PMU_TIME_PER_US,
    SIMULATED,
    TASK_TIME_PER_US,
)
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import os_problem, show

MAGIC = b"SQLite format 3\0"
FIX_DB = "give the msprof_*.db of msprof or the ascend_pytorch_profiler_*.db of torch_npu's profiler"
#: Task ids asked for at once (SQLite allows 999 parameters).
CHUNK = 500


def read_database(path: Path, op: str | None, pipes: bool, launch: int | None) -> BoardProfile:
    """The chosen operator's launches in the database ``path``."""
    with connect(path) as db:
        cols = {table: _columns(db, path, table) for table in DB_COLUMNS}
        rows = _compute_tasks(db, cols)
        skipped = Counter(str(r["task_type"]) for r in rows if str(r["task_type"]).upper() in OTHER_TASKS)
        kept = [r for r in rows if str(r["task_type"]).upper() not in OTHER_TASKS]
        name = choose_op([_op_name(r, path) for r in kept], op, f"database {path}")
        chosen = [r for r in kept if r["op"] == name]
        device = one_device([r["device"] for r in chosen], name, f"database {path}")
        pmu = _pmu(db, cols, path, sorted({r["id"] for r in chosen}))
        freq = _frequencies(db, path, device)
    columns = {"task": "TASK endNs − startNs"}
    required = {figure for metrics in pmu.values() for figure, names in PMU_METRICS.items()
                if pipes and figure in SIMULATED and any(n in metrics for n in names)}
    tasks = [_task(path, r, pmu.get(r["id"], {}), name, required, columns) for r in chosen]
    for task in tasks:
        task.clock_mhz = _clock_at(freq, task.start)
    board = from_tasks(path, "database", [str(path)], name, tasks, columns, launch, pipes)
    board.op_type = given(chosen[0]["op_type"])
    board.missing = missing_columns(columns, PMU_METRICS)
    board.skipped = dict(sorted(skipped.items()))
    return board


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only, immutable connection to the database ``path``; every SQLite error one InputError line."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"database {path} is not a regular file; {FIX_DB}")
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC))
    except OSError as exc:
        raise InputError(f"database {path}: {os_problem(exc)}; {FIX_DB}") from None
    if head != MAGIC:
        raise InputError(f"database {path} is not an SQLite database (it begins {show(head[:8])}); {FIX_DB}")
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"database {path} cannot be opened ({exc}); {FIX_DB}") from None
    db.row_factory = sqlite3.Row
    try:
        yield db
    except sqlite3.Error as exc:
        raise InputError(f"database {path} is damaged or cut ({exc}): copy it from the board again") from None
    finally:
        db.close()


def _columns(db: sqlite3.Connection, path: Path, table: str) -> dict[str, str] | None:
    """The table's column for each figure of :data:`DB_COLUMNS` it has (None: no such table, which only
    TASK_PMU_INFO may be); a required one missing is another schema."""
    present = {row[1].lower(): row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    if not present:
        if table == "TASK_PMU_INFO":
            return None
        raise InputError(f"database {path} has no table {table}: not a profile msprof or torch_npu exported; {FIX_DB}")
    found = {figure: next((present[n.lower()] for n in names if n.lower() in present), "")
             for figure, names in DB_COLUMNS[table].items()}
    lacking = [" or ".join(DB_COLUMNS[table][f]) for f in DB_REQUIRED[table] if not found[f]]
    if lacking:
        raise InputError(f"database {path}: table {table} has no column {lacking[0]}: not the schema msprof "
                         f"documents (profile_data_file_references_db.md); {FIX_DB}")
    return {figure: column for figure, column in found.items() if column}


def _compute_tasks(db: sqlite3.Connection, cols: dict[str, dict[str, str] | None]) -> list[sqlite3.Row]:
    """Every compute task with its launch's times (``found`` None where TASK has no row of it), the names resolved
    through STRING_IDS."""
    task, info, ids = cols["TASK"] or {}, cols["COMPUTE_TASK_INFO"] or {}, cols["STRING_IDS"] or {}

    def named(figure: str) -> str:
        if figure not in info:
            return f"NULL AS {figure}"
        return f"(SELECT s.\"{ids['value']}\" FROM STRING_IDS s WHERE s.\"{ids['id']}\" = c.\"{info[figure]}\") " \
               f"AS {figure}"

    counts = [f"c.\"{info[f]}\" AS {f}" if f in info else f"NULL AS {f}" for f in ("block_dim", "mix_block_dim")]
    device = f"t.\"{task['device']}\"" if "device" in task else "NULL"
    query = (f"SELECT c.\"{info['id']}\" AS id, c.\"{info['op']}\" AS op_id, {named('op')}, {named('op_type')}, "
             f"{named('task_type')}, {', '.join(counts)}, t.\"{task['start']}\" AS start, t.\"{task['end']}\" AS end, "
             f"{device} AS device, t.\"{task['id']}\" AS found "
             f"FROM COMPUTE_TASK_INFO c LEFT JOIN TASK t ON t.\"{task['id']}\" = c.\"{info['id']}\"")
    return list(db.execute(query))


def _op_name(row: sqlite3.Row, path: Path) -> str:
    if row["op"] is None:
        raise InputError(f"database {path}: COMPUTE_TASK_INFO names the operator of globalTaskId {row['id']} by id "
                         f"{show(row['op_id'])}, which STRING_IDS lacks: the database is damaged; {FIX_DB}")
    return str(row["op"])


def _pmu(db: sqlite3.Connection, cols: dict[str, dict[str, str] | None], path: Path,
         ids: list[Any]) -> dict[Any, dict[str, float]]:
    """Per task id, each TASK_PMU_INFO metric (by name) as a number, the mean where a task ran several times."""
    pmu, names = cols["TASK_PMU_INFO"], cols["STRING_IDS"] or {}
    if pmu is None:
        return {}
    values: dict[Any, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for start in range(0, len(ids), CHUNK):
        part = ids[start:start + CHUNK]
        query = (f"SELECT p.\"{pmu['id']}\" AS id, s.\"{names['value']}\" AS name, p.\"{pmu['value']}\" AS value "
                 f"FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.\"{names['id']}\" = p.\"{pmu['name']}\" "
                 f"WHERE p.\"{pmu['id']}\" IN ({', '.join('?' * len(part))})")
        for row in db.execute(query, part):
            values[row["id"]][str(row["name"])].append(
                _number(row["value"], f"database {path}: TASK_PMU_INFO {row['name']} of globalTaskId {row['id']}"))
    return {i: {n: math.fsum(v) / len(v) for n, v in metrics.items()} for i, metrics in values.items()}


def _number(value: Any, where: str) -> float:
    """A finite number from 0 to :data:`LARGEST` ns (or units of another metric) from a database cell."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            0 <= value <= LARGEST * PMU_TIME_PER_US:
        return float(value)
    raise InputError(f"{where} is {show(value)}, not a time or count: the database is damaged; copy it again")


def _whole(value: Any, where: str) -> int:
    """A whole number ≥ 0 from a database cell, exactly: a timestamp in ns (an epoch's 1.7·10^18 is beyond the 2^53
    a float holds to the unit) or a count."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise InputError(f"{where} is {show(value)}, not a whole number of ns or a count: the database is damaged; copy "
                     f"it again")


def _task(path: Path, row: sqlite3.Row, metrics: dict[str, float], name: str, required: set[str],
          columns: dict[str, str]) -> Task:
    """One launch: task µs from TASK (endNs − startNs in integers, divided once), Block Dim and Mix Block Dim from
    COMPUTE_TASK_INFO, the pipes' and cores' busy µs from TASK_PMU_INFO (the metric each came from noted in
    ``columns``); ``required``: the simulated pipes every launch must have (those any launch compared has)."""
    where = f"database {path}, globalTaskId {row['id']}"
    if row["found"] is None:
        raise InputError(f"{where}: COMPUTE_TASK_INFO has a launch of {name} that TASK has no row of, so its time is "
                         f"unknown: the database is damaged; copy it again")
    start, end = (_whole(row[k], f"{where}: TASK {k}Ns") for k in ("start", "end"))
    if end <= start:
        raise InputError(f"{where}: TASK's endNs {end} is not after its startNs {start}; the database is damaged: "
                         f"copy it again")
    task_us = (end - start) / TASK_TIME_PER_US
    if task_us > LARGEST:
        raise InputError(f"{where}: TASK's endNs − startNs is {end - start} ns, longer than any launch of a kernel: "
                         f"the database is damaged; copy it again")
    blocks, mix = (_whole(row[k], f"{where}: {k}") if row[k] is not None else None
                   for k in ("block_dim", "mix_block_dim"))
    task = Task(where, Decimal(start).scaleb(-3), task_us, blocks or None, mix)
    for figure, spellings in PMU_METRICS.items():
        metric = next((m for m in spellings if m in metrics), None)
        if metric is None:
            if figure in required:
                raise InputError(f"{where}: TASK_PMU_INFO has no {'/'.join(spellings)} for {name}, which other "
                                 f"launches have: the database is damaged, or collect again with aic_metrics "
                                 f"PipeUtilization")
            continue
        columns[figure] = metric
        task.values[figure] = metrics[metric] / PMU_TIME_PER_US
    _check_unit(task, columns)
    return task


def _check_unit(task: Task, columns: dict[str, str]) -> None:
    """A core's whole time lies within :data:`CORE_SHARE` of the task's: the ``*_time`` metrics are ns."""
    low, high = CORE_SHARE
    for figure in ("cube.time", "vec.time"):
        core = task.values.get(figure)
        if core and not low * task.task_us <= core <= high * task.task_us:
            raise InputError(f"{task.where}: TASK_PMU_INFO {columns[figure]} is {core * PMU_TIME_PER_US:g}, which "
                             f"as ns (msprof's unit for *_time metrics) is {core / task.task_us:.3g} of the task's "
                             f"{task.task_us * TASK_TIME_PER_US:g} ns (TASK endNs − startNs), outside {low:g} … "
                             f"{high:g}: not the unit msprof documents; the database is damaged, or of an exporter "
                             f"tfa-sim does not know")


def _frequencies(db: sqlite3.Connection, path: Path, device: object) -> list[tuple[Decimal, float]]:
    """AICORE_FREQ's changes of ``device`` (None: of every device; where the table has no deviceId, its every row)
    in time order: (timestampNs as µs, exactly; MHz); none without the table."""
    present = {row[1] for row in db.execute("PRAGMA table_info(AICORE_FREQ)")}
    if not {"timestampNs", "freq"} <= present:
        return []
    out = []
    own = device is not None and "deviceId" in present
    query = "SELECT timestampNs, freq FROM AICORE_FREQ" + (" WHERE CAST(deviceId AS TEXT) = ?" if own else "")
    for stamp, freq in db.execute(query, (str(device),) if own else ()):
        where = f"database {path}: AICORE_FREQ"
        mhz = _number(freq, f"{where} freq at timestampNs {show(stamp)}")
        if not 0 < mhz <= LARGEST:
            raise InputError(f"{where}: a clock of {mhz:g} MHz; the database is damaged: copy it again")
        out.append((Decimal(_whole(stamp, f"{where} timestampNs")).scaleb(-3), mhz))
    return sorted(out)


def _clock_at(freq: list[tuple[Decimal, float]], start_us: Decimal | None) -> float | None:
    """The AI Core clock (MHz) in effect at ``start_us``: AICORE_FREQ's last change before it (else its first)."""
    if not freq or start_us is None:
        return None
    return next((f for t, f in reversed(freq) if t <= start_us), freq[0][1])
