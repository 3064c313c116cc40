"""Profiler files as they come (issue 49): real public files of tests/data/msprof/real (README.md there, "Real
files") read as their rows say — a damaged row in the middle named and left out, a file cut in its last row
refused as cut, a database's durations exact to the nanosecond at epoch timestamps, a figure of equal cores drawn —
each checked against the file read here by hand (csv, sqlite3)."""
from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import statistics
from decimal import Decimal
from pathlib import Path

import pytest
from msprof_db import write_database
from test_hostile_cli import assert_refused, tfa
from test_profile_database import SOURCE
from test_profile_reader import DATA
from test_profile_torch_npu import KERNEL_DETAILS

import tfa_sim
from tfa_sim.rundir.msprof import PIPE_COLUMNS, SIMULATED, read_profile
from tfa_sim.spec.errors import InputError

REAL = DATA / "real"
DAMAGED = REAL / "msinsight_damaged_row" / "test_rank_0"
DAMAGED_CSV = DAMAGED / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
OP_SUMMARY = REAL / "msinsight_op_summary" / "op_summary_1.csv"
MSPROF_DB = REAL / "msinsight_msprof_db" / "msprof_0.db"
TORCH_DB = REAL / "msinsight_db_level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
ADVISOR = REAL / "mstt_advisor"
FLASH = "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore"


def whole_rows(path: Path) -> tuple[list[dict[str, str]], list[int]]:
    """The rows with as many cells as the header, as dicts, and the lines of the others (no row spans lines)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    whole = [dict(zip(rows[0], r)) for r in rows[1:] if len(r) == len(rows[0])]
    return whole, [n for n, r in enumerate(rows[1:], start=2) if len(r) != len(rows[0])]


def durations(rows: list[dict[str, str]], op: str, name: str = "Name", task: str = "Duration(us)") -> list[float]:
    """The operator's task times in start-time order, the starts compared as the exact decimals they are."""
    chosen = [r for r in rows if r[name] == op]
    chosen.sort(key=lambda r: Decimal(r.get("Start Time(us)", r.get("Task Start Time(us)", "0")).strip()))
    return [float(r[task]) for r in chosen]


# --- a damaged row in the middle, a file cut at its end ------------------------------------------------------------

@pytest.mark.parametrize("path, name, task", [(DAMAGED, "Name", "Duration(us)"),
                                              (OP_SUMMARY, "Op Name", "Task Duration(us)")],
                         ids=["kernel_details.csv", "op_summary_1.csv"])
def test_a_damaged_row_in_the_middle_is_left_out_and_named(path, name, task):
    """MindStudio Insight's file: line 17, the fourth FlashAttentionScore launch, lacks its Duration cell (31 cells
    under 32 headers); the three whole launches are compared."""
    csv_file = next(path.rglob("*.csv")) if path.is_dir() else path
    rows, damaged = whole_rows(csv_file)
    assert damaged == [17]
    board = read_profile(path, "FlashAttentionScore")
    assert board.launch_task_us == durations(rows, "FlashAttentionScore", name, task) == [6969.308, 7119.9688,
                                                                                          7023.5739]
    assert (board.block_dim, board.mix_block_dim, board.launches) == (24, 48, 3)
    assert [(d.path, d.line, len(d.cells), d.width) for d in board.damaged] == [(csv_file, 17, 31, 32)]
    assert board.skipped == {"AI_CPU": 2, "DSA_SQE": 2, "HCCL": 4}


def test_the_report_names_the_skipped_line_and_why(tmp_path):
    out = tfa("profile", str(DAMAGED), "--op", "FlashAttentionScore", "--set", "case.s0=3072", "--set",
              "case.s1=1024", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert out.code == 0, out.err
    note = (f"  skipped 1 damaged row: line 17 of {DAMAGED_CSV} (31 cells where its rows have 32) — a cell missing or "
            f"one too many, so the row is left out, not realigned; the whole rows are compared")
    assert note in out.out.splitlines()
    report = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert report["skipped_lines"] == [{"file": str(DAMAGED_CSV), "line": 17, "last_line": 17, "cells": 31,
                                        "row_cells": 32, "header_cells": 32}]
    assert report["launch_task_us"] == [6969.308, 7119.9688, 7023.5739]


def test_a_file_cut_in_its_last_row_is_refused_as_cut(tmp_path):
    copy = Path(shutil.copytree(DAMAGED, tmp_path / "in"))
    target = copy / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    text = target.read_text(encoding="utf-8")
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    target.write_text(text[: text.index(last) + len(last) // 2], encoding="utf-8")  # cut in the middle of line 22
    cells = len(next(csv.reader([last[: len(last) // 2]])))
    before = sorted(tmp_path.rglob("*"))
    out = tfa("profile", str(copy), "--op", "FlashAttentionScore", "--set", "case.s0=3072", cwd=tmp_path)
    assert_refused(out, f"line 22 has {cells} cells where its rows have 32: the file is cut in its last row")
    assert out.out == "" and sorted(tmp_path.rglob("*")) == before


def drop_duration(path: Path, op: str) -> list[int]:
    """Every row of ``op`` without its Duration cell (as line 17 of the real file); the lines changed."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    at = rows[0].index("Duration(us)")
    changed = [n for n, r in enumerate(rows[1:], start=2) if r[rows[0].index("Name")] == op]
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(
            r[:at] + r[at + 1:] if n in changed else r for n, r in enumerate(rows, start=1))
    return changed


def test_an_operator_whose_rows_are_all_damaged_is_refused_naming_them(tmp_path):
    copy = Path(shutil.copytree(DAMAGED, tmp_path / "in"))
    lines = drop_duration(copy / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "FlashAttentionScore")
    assert lines == [14, 15, 16, 17]
    out = tfa("profile", str(copy), "--op", "FlashAttentionScore", "--set", "case.s0=3072", cwd=tmp_path)
    assert_refused(out, "has no whole row of FlashAttentionScore left to compare: line 14 of", "has 31 cells where its "
                   "rows have 32 (and 3 more such rows): damaged rows, not a cut file")
    assert read_profile(copy, "NonZero", pipes=False).launches == 3  # the other operators' rows are whole


def test_msprof_op_refuses_a_damaged_block_row(tmp_path):
    """msprof op's PipeUtilization.csv has a row per core of a block: none may be left out."""
    launch = Path(shutil.copytree(next((DATA / "a2_op_single").iterdir()), tmp_path / "launch"))
    lines = (launch / "PipeUtilization.csv").read_text().split("\n")
    lines[3] = lines[3].rsplit(",", 1)[0]
    (launch / "PipeUtilization.csv").write_text("\n".join(lines))
    with pytest.raises(InputError, match=r"line 4 of .*PipeUtilization.csv has \d+ cells where its rows have \d+ "
                                         r"\(a damaged row, not a cut file\); each row is a core of a block"):
        read_profile(launch)


# --- exact timestamps ------------------------------------------------------------------------------------------------

def by_hand(database: Path) -> dict[str, list[tuple[int, int, int | None]]]:
    """Per operator, its launches as (startNs, endNs, blockDim) in start order, read with sqlite3 alone."""
    db = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    rows = db.execute("SELECT s.value, t.startNs, t.endNs, c.blockDim FROM COMPUTE_TASK_INFO c JOIN TASK t ON "
                      "t.globalTaskId = c.globalTaskId JOIN STRING_IDS s ON s.id = c.name "
                      "ORDER BY t.startNs").fetchall()
    db.close()
    out: dict[str, list[tuple[int, int, int | None]]] = {}
    for name, start, end, blocks in rows:
        out.setdefault(name, []).append((start, end, blocks))
    return out


def test_a_real_msprof_database_gives_each_duration_to_the_nanosecond():
    """msprof_0.db's TASK times are epoch ns (1.698·10^18): a float subtraction is off by up to 256 ns (2.420 µs of
    aclnnCast read 2.304 before issue 49); the durations are endNs − startNs exactly."""
    launches = by_hand(MSPROF_DB)
    assert len(launches) == 9 and all(s > 1.6e18 for runs in launches.values() for s, _, _ in runs)
    assert any(float(e) - float(s) != e - s for runs in launches.values() for s, e, _ in runs)
    for op, runs in launches.items():
        board = read_profile(MSPROF_DB, op, launch=0)
        assert board.launch_task_us == [(e - s) / 1000 for s, e, _ in runs], op
        assert [round(t * 1000) for t in board.launch_task_us] == [e - s for s, e, _ in runs], op
        assert board.block_dim == runs[0][2] and board.missing and board.means == {}
    assert read_profile(MSPROF_DB, "aclnnCast_CastAiCore_Cast").task_us == 2.42


def test_a_real_torch_npu_database_gives_its_launches_and_pipes():
    """The trimmed Level1 database: TASK_PMU_INFO's *_time metrics are ns; AICORE_FREQ gives the clock."""
    db = sqlite3.connect(f"{TORCH_DB.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    pmu = dict(db.execute("SELECT s.value, p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name JOIN "
                          "COMPUTE_TASK_INFO c ON c.globalTaskId = p.globalTaskId JOIN STRING_IDS n ON n.id = c.name "
                          "WHERE n.value = 'Conv2D1'").fetchall())
    (clock,) = {f for (f,) in db.execute("SELECT freq FROM AICORE_FREQ")}
    db.close()
    launches = by_hand(TORCH_DB)
    board = read_profile(TORCH_DB, "Conv2D1")
    (start, end, blocks), = launches["Conv2D1"]
    assert board.launch_task_us == [(end - start) / 1000] == [314.667] and board.block_dim == blocks == 16
    for pipe, names in PIPE_COLUMNS.items():
        metric = next(n.removesuffix("(us)") for n in names if n.removesuffix("(us)") in pmu)
        assert board.means[pipe] == pmu[metric] / 1000, pipe
    assert board.means["cube.time"] == pmu["aic_total_time"] / 1000 and round(board.means["cube.time"], 3) == 311.573
    assert (board.current_mhz, board.skipped, board.missing) == (clock, {"DSA_SQE": 2}, [])
    matmul = read_profile(TORCH_DB, "aclnnAddmm_MatMulCommon_MatMulV2", launch=2)
    assert matmul.launch_task_us == [(e - s) / 1000 for s, e, _ in launches["aclnnAddmm_MatMulCommon_MatMulV2"]]
    assert matmul.block_dim == 21 and [b for _, _, b in launches["aclnnAddmm_MatMulCommon_MatMulV2"]] == [16, 16, 21]


#: Durations (ns) that a float subtraction of epoch-scale ends gets wrong (its unit there is 256 ns).
EPOCH = 1_736_413_971_558_972_912
DURATIONS = [41_848, 2_420, 9_999]


def test_a_database_at_epoch_scale_gives_endns_minus_startns(tmp_path):
    database = write_database(tmp_path / "msprof_1.db", SOURCE)
    starts = [EPOCH + 10_000_000 * k + 1 for k in range(len(DURATIONS))]
    with sqlite3.connect(database) as db:
        ids = [i for (i,) in db.execute("SELECT c.globalTaskId FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON "
                                        "s.id = c.name WHERE s.value = 'runTFA' ORDER BY c.globalTaskId")]
        for task, start, ns in zip(ids, starts, DURATIONS):
            db.execute("UPDATE TASK SET startNs = ?, endNs = ? WHERE globalTaskId = ?", (start, start + ns, task))
        db.execute("UPDATE AICORE_FREQ SET timestampNs = ?", (EPOCH,))
        db.execute("DROP TABLE TASK_PMU_INFO")  # the cores' times of a3_app_9x would not fit these tasks
    db.close()
    board = read_profile(database, "runTFA")
    assert len(ids) == 3 and board.launch_task_us == [ns / 1000 for ns in DURATIONS]
    assert [round(t * 1000) for t in board.launch_task_us] == DURATIONS and board.current_mhz == 1800.0
    assert [float(s + ns) - float(s) for s, ns in zip(starts, DURATIONS)] != DURATIONS  # what floats made of it


def test_start_times_order_launches_to_the_nanosecond(tmp_path):
    """Two launches 1 ns apart at an epoch start (a float holds 0.25 µs there): the later one in the file first."""
    with KERNEL_DETAILS.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r["Name"] == "runTFA")
    path = tmp_path / "kernel_details.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        for start, duration in (("1736413971558972.913", "20.5"), ("1736413971558972.912", "10.25")):
            writer.writerow({**row, "Start Time(us)": f"{start}\t", "Duration(us)": duration})
    assert float("1736413971558972.913") == float("1736413971558972.912")
    assert read_profile(path).launch_task_us == [10.25, 20.5]


# --- a flash attention kernel whose cores are all equal ------------------------------------------------------------

def test_a_real_flash_attention_profile_is_read_as_its_rows_say():
    """msprof-analyze's test file: four launches of FlashAttentionScore (MIX_AIC, Block Dim 20, Mix 40) with
    PipeUtilization columns; its MatMulV5 rows are four copies of one launch (equal starts: the file's order)."""
    rows, damaged = whole_rows(ADVISOR / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    board = read_profile(ADVISOR, FLASH)
    chosen = [r for r in rows if r["Name"] == FLASH]
    assert damaged == [] and board.launch_task_us == durations(rows, FLASH) == [410.188, 406.128, 407.008, 405.228]
    assert (board.block_dim, board.mix_block_dim, board.op_type) == (20, 40, "FlashAttentionScore")
    for pipe, names in PIPE_COLUMNS.items():
        column = next(n for n in names if n in chosen[0])
        assert board.means[pipe] == pytest.approx(statistics.fmean(float(r[column]) for r in chosen), rel=1e-12)
    assert board.columns["cube.M"] == "aic_mac_time(us)" and board.missing == []
    assert read_profile(ADVISOR, "aclnnMatmul_MatMulV3Common_MatMulV5").launch_task_us == [521.31] * 4


@pytest.mark.parametrize("s1", [1024, 2048])
def test_a_profile_of_equal_cores_draws_its_figure_and_exits_0(tmp_path, s1):
    """20 blocks on 20 of the 910B2's cores: the model's per-core min and max equal its mean up to rounding
    (at S1 2048 the mean came out below the min, and matplotlib refused the negative whisker before issue 49)."""
    out = tfa("profile", str(ADVISOR), "--op", FLASH, "--set", "case.s0=2560", "--set", f"case.s1={s1}", "--out",
              str(tmp_path / "out"), cwd=tmp_path)
    assert out.code == 0, out.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".tfa-sim-files.json", "profile.json",
                                                                    "profile.png", "profile.svg", "roofline.svg"]
    report = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert report["block_dim"] == 20 and all(report["pipes"][p]["model_us"] for p in SIMULATED)
    assert (tmp_path / "out" / "profile.png").read_bytes().startswith(b"\x89PNG")


def test_the_model_side_of_equal_cores_is_what_made_the_whisker_negative():
    """The model's figures for the launch above: a pipe equally busy on every core, its mean a rounding below."""
    report = tfa_sim.profile(ADVISOR, op=FLASH, overrides={"case.s0": 2560, "case.s1": 2048}).report
    equal = [p for p in report["pipes"].values()
             if p["model_us"] is not None and p["model_min_us"] == p["model_max_us"]]
    assert equal and any(p["model_us"] < p["model_min_us"] for p in equal)


# --- what a reading must not do silently (a second look from outside) ---------------------------------------------

def edited(tmp_path: Path, source: Path, edit) -> Path:
    """A copy of the kernel_details.csv ``source`` with ``edit(lines)`` applied to its lines (split at LF only)."""
    path = tmp_path / "kernel_details.csv"
    lines = source.read_text(encoding="utf-8").split("\n")
    edit(lines)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_a_prefix_does_not_fall_through_to_another_operator_when_the_named_ones_rows_are_damaged(tmp_path):
    """Every FlashAttentionScore row of the advisor's file damaged: ``--op`` its name, or a prefix that also begins
    FlashAttentionScore_varlen (whole), is refused — not the varlen operator compared in its place."""
    copy = Path(shutil.copytree(ADVISOR, tmp_path / "in"))
    assert drop_duration(copy / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", FLASH) == [14, 15, 16, 17]
    with pytest.raises(InputError, match=f"has no whole row of {FLASH} left to compare: line 14 of"):
        read_profile(copy, FLASH)
    prefix = FLASH.rsplit("_", 1)[0]
    assert read_profile(ADVISOR, prefix + "_FlashAttentionScore_varlen").launches == 1  # whole, begun by the prefix
    with pytest.raises(InputError, match=f"--op {prefix} begins the names of whole rows' operators and a name in "
                                         f"damaged rows .* give the operator's whole name"):
        read_profile(copy, prefix)


def test_a_column_named_twice_is_refused_not_read_from_either_copy(tmp_path):
    path = edited(tmp_path, KERNEL_DETAILS, lambda ls: ls.__setitem__(0, ls[0].replace("Wait Time(us)",
                                                                                           "Duration(us)")))
    with pytest.raises(InputError, match=r"has the column Duration\(us\) 2 times \(columns 11, 12\): which one to "
                                         r"read cannot be told"):
        read_profile(path, "runTFA")


def test_lines_end_only_where_csv_lines_do(tmp_path):
    """A U+2028 in a quoted cell and a form feed in an unquoted one are a cell's characters (``str.splitlines``
    broke lines there): the damaged row of line 8 is named as line 8, and a row with a form feed is whole."""
    rows, _ = whole_rows(KERNEL_DETAILS)

    def edit(ls: list[str]) -> None:
        ls[3] = ls[3].replace(",static,", ',"sta\u2028tic",', 1)
        ls[5] = ls[5].replace(",static,", ",sta\x0ctic,", 1)
        ls[7] = ls[7].replace(",static,", ",", 1)

    board = read_profile(edited(tmp_path, KERNEL_DETAILS, edit), "runTFA")
    assert [(d.line, d.last) for d in board.damaged] == [(8, 8)]  # the third runTFA launch (lines 4, 6, 8)
    assert board.launch_task_us == durations(rows, "runTFA")[:2]


def test_a_quote_left_open_is_named_by_the_lines_it_took(tmp_path):
    board = read_profile(edited(tmp_path, KERNEL_DETAILS, lambda ls: ls.__setitem__(5, ls[5] + '"')), "runTFA")
    (row,) = board.damaged
    assert (row.line, row.last) == (6, 8)
    assert row.says().startswith("lines 6–8 (a quote left open) of ")


def test_launches_on_several_devices_are_refused(tmp_path):
    """An op summary or kernel_details.csv whose rows of the operator name two devices, and a database whose TASK
    rows do: a launch is one device's."""
    def second_device(ls: list[str]) -> None:
        ls += [",".join("1" if i == 1 else c for i, c in enumerate(ln.split(","))) for ln in ls[1:] if "runTFA" in ln]

    with pytest.raises(InputError, match=r"holds launches of runTFA on 2 devices \(0, 1\): tfa-sim compares one "
                                         r"device's launches"):
        read_profile(edited(tmp_path, KERNEL_DETAILS, second_device), "runTFA")
    database = write_database(tmp_path / "msprof_1.db", SOURCE)
    with sqlite3.connect(database) as db:
        db.execute("UPDATE TASK SET deviceId = 1 WHERE globalTaskId = (SELECT max(c.globalTaskId) FROM "
                   "COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name WHERE s.value = 'runTFA')")
    db.close()
    with pytest.raises(InputError, match=r"on 2 devices \(0, 1\)"):
        read_profile(database, "runTFA")


def test_launches_at_different_clocks_are_named_not_averaged(tmp_path):
    """AICORE_FREQ drops to 1750 MHz before the third launch: the mean clock (1783 MHz, within 1 % of the
    preset's) would have passed; the launches of each clock are named, and one launch is compared alone."""
    database = write_database(tmp_path / "msprof_1.db", SOURCE)
    with sqlite3.connect(database) as db:
        (third,) = db.execute("SELECT t.startNs FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = "
                              "t.globalTaskId JOIN STRING_IDS s ON s.id = c.name WHERE s.value = 'runTFA' "
                              "ORDER BY t.startNs LIMIT 1 OFFSET 2").fetchone()
        db.execute("INSERT INTO AICORE_FREQ VALUES (0, ?, 1750)", (third - 1,))
    db.close()
    with pytest.raises(InputError, match=r"the launches of runTFA ran at different clocks \(1750 MHz: launch 2; "
                                         r"1800 MHz: launches 0, 1\); compare the launches of one clock with "
                                         r"--launch N"):
        read_profile(database, "runTFA")
    assert read_profile(database, "runTFA", launch=0).current_mhz == 1800.0
    assert read_profile(database, "runTFA", launch=2).current_mhz == 1750.0


def test_msprof_op_launches_are_all_there_and_at_one_clock(tmp_path):
    """A launch directory without its OpBasicInfo.csv is refused (it was left out unsaid); launches whose Current
    Freq differ are named, not averaged."""
    root = Path(shutil.copytree(DATA / "a3_op_multi", tmp_path / "in"))
    second = next(root.rglob("runTFA/1"))
    basic = next(second.glob("OpBasicInfo*.csv"))
    text = basic.read_text(encoding="utf-8")
    basic.write_text(text.replace(",1800,1800", ",1500,1800"), encoding="utf-8")
    with pytest.raises(InputError, match=r"the launches of runTFA ran at different clocks \(1500 MHz: launch 1; "
                                         r"1800 MHz: launch 0\)"):
        read_profile(root, "runTFA")
    assert read_profile(root, "runTFA", launch=1).current_mhz == 1500.0
    basic.unlink()
    with pytest.raises(InputError, match=r"runTFA/1 holds msprof op's PipeUtilization.csv but no OpBasicInfo.csv"):
        read_profile(root, "runTFA")


def test_a_launch_without_its_task_row_is_refused_not_left_out(tmp_path):
    database = write_database(tmp_path / "msprof_1.db", SOURCE)
    with sqlite3.connect(database) as db:
        (task,) = db.execute("SELECT max(c.globalTaskId) FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name "
                             "WHERE s.value = 'runTFA'").fetchone()
        db.execute("DELETE FROM TASK WHERE globalTaskId = ?", (task,))
    db.close()
    with pytest.raises(InputError, match=f"globalTaskId {task}: COMPUTE_TASK_INFO has a launch of runTFA that TASK "
                                         f"has no row of"):
        read_profile(database, "runTFA")


def test_an_empty_task_time_is_said_to_be_missing(tmp_path):
    with KERNEL_DETAILS.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    at, name = rows[0].index("Duration(us)"), rows[0].index("Name")
    path = tmp_path / "kernel_details.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(
            [r[:at] + [""] + r[at + 1:] if n and r[name] == "runTFA" else r for n, r in enumerate(rows)])
    with pytest.raises(InputError, match="the task's time of runTFA is missing \\(empty or N/A\\)"):
        read_profile(path, "runTFA")
