"""The SQLite exports (msprof_*.db, ascend_pytorch_profiler_*.db) read as the op summary of the same launches is
(issue 43): both schemas msprof has written, TASK_PMU_INFO's ns checked against the task, the database opened
read-only and immutable (byte for byte as it was, no file beside it), and every bad database one line, exit 2."""
from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from msprof_db import write_database
from test_hostile_cli import assert_refused, tfa
from test_profile_reader import DATA, expected_summary
from test_profile_torch_npu import KERNEL_DETAILS, SETS, SHAPE

import tfa_sim
from tfa_sim.rundir.msprof import read_profile
from tfa_sim.spec.errors import InputError

SOURCE = next((DATA / "a3_app_9x").rglob("op_summary_*.csv"))
#: File names each schema is exported under.
NAMES = {"cann8": "ascend_pytorch_profiler_0.db", "msprof26": "msprof_20260307093000.db"}


@pytest.fixture(params=sorted(NAMES))
def database(request, tmp_path) -> Path:
    """a3_app_9x's tasks as a database of one schema, in a directory of its own."""
    folder = tmp_path / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir()
    return write_database(folder / NAMES[request.param], SOURCE, request.param)


def state(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` and the SHA-256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_database_reads_as_the_op_summary_of_the_same_launches(database):
    """Task time from TASK (endNs − startNs), blocks from COMPUTE_TASK_INFO (blockNum, not msprof 26's SIMT
    blockDim), pipes from TASK_PMU_INFO in ns; the clock from AICORE_FREQ."""
    board = read_profile(database, "runTFA")
    want = expected_summary(DATA / "a3_app_9x", "runTFA")
    assert (board.layout, board.op_type, board.columns["task"]) == ("database", "runTFA", "TASK endNs − startNs")
    assert board.launch_task_us == pytest.approx([48.06, 47.266, 48.855], rel=1e-12)
    assert board.task_us == pytest.approx(want["task"], rel=1e-12) and board.launches == 3
    assert (board.block_dim, board.mix_block_dim, board.current_mhz) == (8, 16, 1800.0)
    assert board.columns["cube.M"] == "aic_mac_time" and board.missing == []
    for pipe, value in want["means"].items():
        assert board.means[pipe] == pytest.approx(value, rel=1e-12), pipe
    assert board.means["cube.time"] == pytest.approx((46.3189 + 45.7109 + 46.8116) / 3, rel=1e-12)


def test_the_directory_holding_a_database_reads_it(database):
    board = read_profile(database.parent, "runTFA", launch=1)
    assert (board.source, board.files, board.task_us) == (database.parent, [str(database)], pytest.approx(47.266))


def test_other_task_types_are_skipped(tmp_path):
    """The AI_CPU and DSA_SQE tasks of torch_a3_9x have COMPUTE_TASK_INFO rows; its HCCL task has none."""
    board = read_profile(write_database(tmp_path / "msprof_1.db", KERNEL_DETAILS), "runTFA")
    assert board.skipped == {"AI_CPU": 1, "DSA_SQE": 1} and board.launches == 3


def test_a_database_is_left_as_it_was_with_no_file_beside_it(database):
    before = state(database.parent)
    read_profile(database, "runTFA")
    tfa_sim.profile(database.parent, op="runTFA", overrides=SHAPE)
    assert state(database.parent) == before == {database.name: before[database.name]}


def test_a_wal_database_gets_no_wal_or_shm_file(tmp_path):
    """A read-only connection to a WAL database makes -wal and -shm files beside it (the control below); the
    immutable one tfa-sim opens makes none."""
    (tmp_path / "db").mkdir()
    database = write_database(tmp_path / "db" / "msprof_1.db", SOURCE, wal=True)
    before = state(database.parent)
    assert read_profile(database, "runTFA").launches == 3
    assert state(database.parent) == before and list(before) == ["msprof_1.db"]
    control = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    control.execute("SELECT COUNT(*) FROM TASK").fetchone()
    control.close()
    assert sorted(os.listdir(database.parent)) == ["msprof_1.db", "msprof_1.db-shm", "msprof_1.db-wal"]


@pytest.mark.parametrize("scale, share", [(1.0, "0.000964"), (1e6, "964")], ids=["µs", "ps"])
def test_pmu_times_not_in_ns_are_refused(tmp_path, scale, share):
    """TASK_PMU_INFO's *_time metrics are ns (msprof scales MetricSummary's µs by 1000): a core's whole time must
    be 0.02 … 1.05 of its task's; written in µs or in ps it is not."""
    database = write_database(tmp_path / "msprof_1.db", SOURCE, time_scale=scale)
    with pytest.raises(InputError, match=rf"TASK_PMU_INFO aic_total_time is .*, which as ns \(msprof's unit for "
                                         rf"\*_time metrics\) is {share} of the task's 48060 ns \(TASK endNs − "
                                         r"startNs\), outside 0.02 … 1.05"):
        read_profile(database, "runTFA")


def test_a_database_without_task_pmu_info_gives_the_task_alone(tmp_path):
    database = write_database(tmp_path / "msprof_1.db", SOURCE)
    with sqlite3.connect(database) as db:
        db.execute("DROP TABLE TASK_PMU_INFO")
    db.close()
    board = read_profile(database, "runTFA")
    assert board.means == {} and board.missing[0] == "aic_cube_time/aic_mac_time" and len(board.missing) == 7
    report = tfa_sim.profile(database, op="runTFA", overrides=SHAPE).report
    assert report["largest"] == [] and report["task_duration_us"] == pytest.approx((48.06 + 47.266 + 48.855) / 3)


def test_a_board_clock_other_than_the_presets_is_named(tmp_path):
    database = write_database(tmp_path / "msprof_1.db", SOURCE, freq_mhz=1500.0)
    with pytest.raises(InputError, match=r"the board ran at 1500 MHz, the model's 910b2 at 1800"):
        tfa_sim.profile(database, op="runTFA", overrides=SHAPE)


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def execute(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    db.close()


#: A damage to a database of a3_app_9x's tasks and what the one line says.
BAD = {
    "not SQLite": (lambda p: p.write_text("Op Name,Task Duration(us)\nrunTFA,48.06\n"),
                   "is not an SQLite database (it begins b'Op Name,'); give the msprof_*.db"),
    "empty": (lambda p: p.write_bytes(b""), "is not an SQLite database (it begins b'')"),
    "cut in half": (truncated, "is damaged or cut (database disk image is malformed): copy it from the board again"),
    "another schema": (lambda p: execute(p, "DROP TABLE TASK"),
                       "has no table TASK: not a profile msprof or torch_npu exported"),
    "no endNs": (lambda p: execute(p, "ALTER TABLE TASK DROP COLUMN endNs"),
                 "table TASK has no column endNs: not the schema msprof documents"),
    "a name id STRING_IDS lacks": (lambda p: execute(p, "DELETE FROM STRING_IDS WHERE value = 'runTFA'"),
                                   "COMPUTE_TASK_INFO names the operator of globalTaskId"),
    "a PMU value of text": (lambda p: execute(p, "UPDATE TASK_PMU_INFO SET value = 'fast' WHERE globalTaskId = 2"),
                            "TASK_PMU_INFO", "of globalTaskId 2 is 'fast', not a time or count"),
    "a task ending before it starts": (
        lambda p: execute(p, "UPDATE TASK SET endNs = startNs - 5 WHERE globalTaskId = 3"),
        "globalTaskId 3: TASK's endNs", "is not after its startNs"),
    "Block Num not the config's": (lambda p: execute(p, "UPDATE COMPUTE_TASK_INFO SET blockDim = 4"),
                                   "Block Dim 4, but case_float_H_128_S0_1024_S1_4096 launches 8 blocks"),
    "Mix Block Num not two vector cores a block": (lambda p: execute(p, "UPDATE COMPUTE_TASK_INFO SET mixBlockDim = 8"),
                                                   "Mix Block Dim 8 is not 2 vector cores for each of the 8 blocks"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_database_is_one_line_exit_2_nothing_written_and_left_as_it_was(tmp_path, case):
    change, *says = BAD[case]
    folder = tmp_path / "in"
    folder.mkdir()
    database = write_database(folder / "ascend_pytorch_profiler_0.db", SOURCE)
    change(database)
    before, listing = state(folder), sorted(tmp_path.rglob("*"))
    out = tfa("profile", str(database), "--op", "runTFA", *SETS, cwd=tmp_path)
    assert_refused(out, *says)
    assert out.out == "" and state(folder) == before and sorted(tmp_path.rglob("*")) == listing
