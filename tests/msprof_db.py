"""Synthetic SQLite exports for the tests: the tasks of a per-task CSV (an op summary or kernel_details.csv of
tests/data/msprof) written as msprof_*.db / ascend_pytorch_profiler_*.db tables, following msprof's
docs/en/user_guide/profile_data_file_references_db.md (tests/data/msprof/README.md, "Databases").

Two real databases are committed (tests/data/msprof/real: an msprof_0.db whole, a torch_npu one trimmed), of other
kernels; these synthetic ones give the tests the launches of the CSV fixtures, every time in ns (TASK
startNs/endNs, TASK_PMU_INFO's ``*_time`` metrics), every name an id into STRING_IDS, in the two schemas msprof has
written, and the damage each test needs.
"""
from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

#: COMPUTE_TASK_INFO's columns: as torch_npu's and CANN 8.x's exports have them, and as msprof 26 (CANN 9) documents
#: them, where blockDim and gridDim are the SIMT model's (Ascend 950), ids into STRING_IDS, and blockNum the blocks.
COMPUTE_COLUMNS = {
    "cann8": ("name", "globalTaskId", "blockDim", "mixBlockDim", "taskType", "opType", "inputFormats",
              "inputDataTypes", "inputShapes", "outputFormats", "outputDataTypes", "outputShapes", "attrInfo"),
    "msprof26": ("name", "globalTaskId", "blockNum", "mixBlockNum", "taskType", "opType", "inputFormats",
                 "inputDataTypes", "inputShapes", "outputFormats", "outputDataTypes", "outputShapes", "attrInfo",
                 "opState", "hf32Eligible", "gridDim", "blockDim")}
TASK_COLUMNS = ("startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "globalPid", "taskType", "contextId",
                "streamId", "taskId", "modelId")
#: The CSV's names for each figure (an op summary's, then kernel_details.csv's).
NAMES = {"op": ("Op Name", "Name"), "type": ("OP Type", "Type"), "kind": ("Task Type", "Accelerator Core"),
         "start": ("Task Start Time(us)", "Start Time(us)"), "task": ("Task Duration(us)", "Duration(us)"),
         "blocks": ("Block Dim", "Block Num"), "mix": ("Mix Block Dim", "Mix Block Num")}
#: The op summary's names of the cores' whole times, and MetricSummary's (TASK_PMU_INFO's).
CORE_METRICS = {"aicore_time(us)": "aic_total_time", "aic_time(us)": "aic_total_time",
                "aiv_time(us)": "aiv_total_time"}
#: Task types a compute task has no row of in COMPUTE_TASK_INFO for (communication has tables of its own).
COMMUNICATION = ("HCCL", "COMMUNICATION")


def cell(row: dict[str, str], figure: str) -> str:
    return next(row[n].strip() for n in NAMES[figure] if n in row)


def metric(column: str) -> str:
    """TASK_PMU_INFO's name of an op summary's pipe column: without ``(us)``, the core times renamed."""
    return CORE_METRICS.get(column, column.removesuffix("(us)"))


class Strings:
    """STRING_IDS as it is filled: one id per distinct text."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids) + 1)


def write_database(path: Path, source: Path, schema: str = "cann8", time_scale: float = 1000.0,
                   wal: bool = False, freq_mhz: float = 1800.0) -> Path:
    """Write the tasks of the CSV ``source`` into a new database ``path``.  ``time_scale``: ns per µs of the
    ``*_time`` metrics (1.0 writes them in µs, as no msprof does); ``wal``: a database in WAL mode."""
    rows = list(csv.DictReader(source.read_text(encoding="utf-8").splitlines()))
    strings = Strings()
    tasks, infos, pmu = [], [], []
    for task_id, row in enumerate(rows, start=1):
        start = round(float(cell(row, "start")) * 1000)
        tasks.append((start, start + round(float(cell(row, "task")) * 1000), 0, task_id, task_id, 4170,
                      strings("KERNEL_MIX_AIC"), 0, 2, task_id, 4294967295))
        if cell(row, "kind") in COMMUNICATION:
            continue
        infos.append(_info(row, task_id, schema, strings))
        for column, value in row.items():
            if column and column.startswith(("ai", "cube")) and value.strip() not in ("N/A", "NA", ""):
                scale = time_scale if metric(column).endswith("_time") else 1.0
                pmu.append((task_id, strings(metric(column)), float(value) * scale))
    with sqlite3.connect(path) as db:
        if wal:
            db.execute("PRAGMA journal_mode=WAL")
        _tables(db, schema)
        db.executemany(f"INSERT INTO TASK VALUES ({', '.join('?' * len(TASK_COLUMNS))})", tasks)
        db.executemany(f"INSERT INTO COMPUTE_TASK_INFO VALUES ({', '.join('?' * len(COMPUTE_COLUMNS[schema]))})",
                       infos)
        db.executemany("INSERT INTO TASK_PMU_INFO VALUES (?, ?, ?)", pmu)
        db.execute("INSERT INTO AICORE_FREQ VALUES (0, ?, ?)", (tasks[0][0] - 1000, freq_mhz))
        db.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(i, s) for s, i in strings.ids.items()])
    db.close()
    return path


def _info(row: dict[str, str], task_id: int, schema: str, strings: Strings) -> tuple[object, ...]:
    """A COMPUTE_TASK_INFO row of the CSV row."""
    counts = [int(cell(row, f)) if cell(row, f) not in ("N/A", "NA", "") else 0 for f in ("blocks", "mix")]
    shapes = [strings(row.get(c, "N/A")) for c in ("Input Formats", "Input Data Types", "Input Shapes",
                                                   "Output Formats", "Output Data Types", "Output Shapes")]
    out = (strings(cell(row, "op")), task_id, *counts, strings(cell(row, "kind")), strings(cell(row, "type")),
           *shapes, strings("N/A"))
    if schema == "msprof26":  # opState, hf32Eligible; gridDim and blockDim: SIMT figures, ids of "N/A" here
        out += (strings(row.get("OP State", "N/A")), strings("NO"), strings("N/A"), strings("N/A"))
    return out


def _tables(db: sqlite3.Connection, schema: str) -> None:
    db.execute("CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT)")
    db.execute(f"CREATE TABLE TASK ({', '.join(f'{c} INTEGER' for c in TASK_COLUMNS)})")
    db.execute(f"CREATE TABLE COMPUTE_TASK_INFO ({', '.join(f'{c} INTEGER' for c in COMPUTE_COLUMNS[schema])})")
    db.execute("CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER, name INTEGER, value NUMERIC)")
    db.execute("CREATE TABLE AICORE_FREQ (deviceId INTEGER, timestampNs NUMERIC, freq INTEGER)")
    db.execute("CREATE TABLE NPU_INFO (id INTEGER, name TEXT)")
    db.execute("INSERT INTO NPU_INFO VALUES (0, 'Ascend910B')")
