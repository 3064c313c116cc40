"""torch_npu's profiler output read as msprof's is (issue 43): kernel_details.csv in the spellings and quirks real
files have, a torch_npu directory holding several layouts, many launches and ``--launch``, profiles without pipe
columns, real public files (tests/data/msprof/README.md, "Real files"), and bad input refused with one line."""
from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_cli import assert_refused, tfa
from test_profile_reader import DATA, expected_summary

import tfa_sim
from tfa_sim.rundir.msprof import PIPE_COLUMNS, SIMULATED, read_profile
from tfa_sim.spec.errors import InputError

TORCH = DATA / "torch_a3_9x" / "llm_4170_20260307093000123_ascend_pt"
KERNEL_DETAILS = TORCH / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
REAL = DATA / "real"
#: The config a3_app_9x and torch_a3_9x were made for (tests/data/msprof/README.md).
SHAPE = {"case.s0": 1024, "case.s1": 4096, "schedule.cv_fifo_cons_sync_period": 1}
SETS = [a for k, v in SHAPE.items() for a in ("--set", f"{k}={v}")]
#: kernel_details.csv's own names (torch_npu renames the op summary's).
NAME, DURATION, START = "Name", "Duration(us)", "Start Time(us)"


def table(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def cell(row: dict[str, str], *names: str) -> float | None:
    """The first of ``names`` the row has, as a number (None where the file writes N/A)."""
    text = next(row[n] for n in names if n in row).strip()
    return None if text in ("N/A", "NA", "") else float(text)


def expected_kernel_details(path: Path, op: str) -> dict[str, object]:
    """kernel_details.csv read by hand: the operator's rows in start-time order (file order on ties), each figure
    the mean over them."""
    rows = [r for r in table(path) if r[NAME] == op]
    rows = sorted(rows, key=lambda r: float(r[START].strip()))
    means = {pipe: statistics.fmean(cell(r, *names) for r in rows) for pipe, names in PIPE_COLUMNS.items()
             if any(n in rows[0] for n in names)}
    blocks = {cell(r, "Block Dim", "Block Num") for r in rows}
    return {"task": [float(r[DURATION]) for r in rows], "means": means, "blocks": blocks}


@pytest.mark.parametrize("given_as", ["the _ascend_pt directory", "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"])
def test_kernel_details_reads_as_the_op_summary_of_the_same_launches(given_as):
    """torch_a3_9x is a3_app_9x's op summary as torch_npu renames it, with rows of other task types between."""
    path = {"the _ascend_pt directory": TORCH, "ASCEND_PROFILER_OUTPUT": KERNEL_DETAILS.parent,
            "kernel_details.csv": KERNEL_DETAILS}[given_as]
    board = read_profile(path, "runTFA")
    want = expected_summary(DATA / "a3_app_9x", "runTFA")
    assert (board.layout, board.op_type, board.columns["task"]) == ("kernel_details", "runTFA", "Duration(us)")
    assert board.launch_task_us == [48.06, 47.266, 48.855] and board.launches == want["launches"] == 3
    assert board.task_us == pytest.approx(want["task"], rel=1e-12)
    assert (board.block_dim, board.mix_block_dim) == (want["block_dim"], 16)
    assert board.means.keys() >= want["means"].keys()
    for pipe, value in want["means"].items():
        assert board.means[pipe] == pytest.approx(value, rel=1e-12), pipe
    assert board.skipped == {"AI_CPU": 1, "DSA_SQE": 1, "HCCL": 1} and board.missing == []


def rewrite(path: Path, old: str, new: str, header_only: bool = False) -> None:
    text = path.read_text(encoding="utf-8")
    head, _, body = text.partition("\n")
    path.write_text(head.replace(old, new) + "\n" + (body if header_only else body.replace(old, new)),
                    encoding="utf-8")


def op_summary_names(path: Path) -> None:
    """The op summary's names for the renamed columns (a hand-made export mixing both is read too)."""
    for old, new in (("Name,Type", "Op Name,OP Type"), (",Accelerator Core,", ",Task Type,"),
                     (",Duration(us)", ",Task Duration(us)")):
        rewrite(path, old, new, True)


def quoted_start_times(path: Path) -> None:
    """Every start time quoted, its tab inside the quotes."""
    rewrite(path, "000\t,", '000\t",')
    rewrite(path, ",17273", ',"17273')


#: Spellings and quirks of the versions and of real files, each made in a copy of torch_a3_9x's kernel_details.csv.
SPELLINGS = {
    "Block Dim, Mix Block Dim (CANN 8.0)": lambda p: rewrite(p, "Block Num", "Block Dim", True),
    "the op summary's names (Op Name, OP Type, Task Type, Task Duration)": op_summary_names,
    "no Step Id": lambda p: p.write_text("\n".join(line.split(",", 1)[1] for line in p.read_text().splitlines())),
    "no trailing empty column": lambda p: p.write_text("\n".join(line[:-1] for line in p.read_text().splitlines())),
    "a trailing empty column in the rows alone": lambda p: rewrite(p, "cube_utilization(%),", "cube_utilization(%)",
                                                                   True),
    "NA for N/A": lambda p: rewrite(p, "N/A", "NA"),
    "every start time quoted with its tab": quoted_start_times,
    "CRLF line ends": lambda p: p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n")),
    "headers in another case and spacing": lambda p: rewrite(p, "Duration(us)", "duration (us)", True),
}


@pytest.mark.parametrize("quirk", sorted(SPELLINGS))
def test_every_spelling_and_quirk_reads_the_same_figures(tmp_path, quirk):
    copy = tmp_path / "kernel_details.csv"
    shutil.copy(KERNEL_DETAILS, copy)
    SPELLINGS[quirk](copy)
    got, want = read_profile(copy, "runTFA"), read_profile(KERNEL_DETAILS, "runTFA")
    assert copy.read_bytes() != KERNEL_DETAILS.read_bytes(), "the quirk changed the file"
    assert (got.task_us, got.launch_task_us, got.block_dim, got.mix_block_dim, got.means) == \
        (want.task_us, want.launch_task_us, want.block_dim, want.mix_block_dim, want.means)


#: Real public kernel_details.csv files (tests/data/msprof/README.md): path, operator, what they hold.
REAL_FILES = {
    "torch_npu 2.7.1, a FlashAttention kernel": (
        "msinsight_st_level2/rank_0_ascend_pt", "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        {"launches": 1, "block_dim": 20, "mix_block_dim": 40, "skipped": {}}),
    "torch_npu 2.7.1, five launches of a matmul": (
        "msinsight_st_level2/rank_0_ascend_pt", "aclnnMatmul_MatMulV3Common_MatMulV3",
        {"launches": 5, "block_dim": 20, "mix_block_dim": 0, "skipped": {}}),
    "Level1 with DSA_SQE rows": ("msinsight_level1/rank0_ascend_pt", "Conv2D1",
                                 {"launches": 1, "block_dim": 16, "mix_block_dim": 0, "skipped": {"DSA_SQE": 2}}),
}


@pytest.mark.parametrize("name", sorted(REAL_FILES))
def test_a_real_kernel_details_is_read_as_its_rows_say(name):
    where, op, facts = REAL_FILES[name]
    board = read_profile(REAL / where, op)
    want = expected_kernel_details(next((REAL / where).rglob("kernel_details.csv")), op)
    assert board.layout == "kernel_details" and board.launch_task_us == want["task"]
    assert board.task_us == pytest.approx(statistics.fmean(want["task"]), rel=1e-12)
    assert {k: getattr(board, k) for k in facts} == facts
    for pipe, value in want["means"].items():
        assert board.means[pipe] == pytest.approx(value, rel=1e-12), pipe
    assert board.missing == []


def test_a_real_level0_profile_has_no_pipes_nor_blocks_and_gives_the_task_alone():
    """torch_npu's Level0 writes no pipe columns, Type N/A and Block Dim 0; its HCCL row is skipped."""
    path = REAL / "msinsight_level0" / "rank0_ascend_pt"
    board = read_profile(path, "Conv2D4")
    assert board.launch_task_us == [104.702, 70.841] and board.task_us == pytest.approx((104.702 + 70.841) / 2)
    assert (board.block_dim, board.mix_block_dim, board.op_type, board.means) == (None, None, None, {})
    assert board.skipped == {"HCCL": 1}
    assert board.missing == ["aic_cube_time(us)/aic_mac_time(us)", "aic_mte1_time(us)", "aic_mte2_time(us)",
                             "aic_fixpipe_time(us)", "aiv_vec_time(us)", "aiv_mte2_time(us)", "aiv_mte3_time(us)"]
    assert "aic_metrics PipeUtilization" in board.collect
    result = tfa_sim.profile(path, op="Conv2D4", overrides=SHAPE)
    report = result.report
    assert report["task_duration_us"] == board.task_us and report["largest"] == [] and report["findings"] == []
    assert all(p["board_us"] is None and p["note"] == "not in the profile" for n, p in report["pipes"].items()
               if n in SIMULATED)
    assert any(n.startswith("Block Dim: not in the profile") for n in report["notes"])
    assert any(n.startswith("pipes: the profile has no column aic_cube_time(us)/aic_mac_time(us)") and
               "so the task alone is compared; collect them with aic_metrics PipeUtilization" in n
               for n in report["notes"])


def test_a_real_profile_of_other_aic_metrics_gives_the_task_and_names_the_columns_it_lacks():
    """MindStudio Insight's test profile: aic_metrics MemoryL0 (no pipe times), four FlashAttentionScore launches
    whose start times a spreadsheet rounded to 1.69512E+15 (so they keep the file's order), HCCL, AI_CPU and
    DSA_SQE rows between them."""
    path = REAL / "msinsight_memory_l0" / "test_rank_0"
    board = read_profile(path, "FlashAttentionScore")
    assert board.launch_task_us == [6969.308, 7119.9688, 7023.5739, 7151.6806]
    assert (board.block_dim, board.mix_block_dim) == (24, 48)
    assert board.skipped == {"AI_CPU": 2, "DSA_SQE": 2, "HCCL": 4} and len(board.missing) == 7
    assert read_profile(path, "FlashAttentionScore", launch=1).task_us == 7119.9688
    report = tfa_sim.profile(path, op="FlashAttentionScore", overrides={**SHAPE, "case.s0": 24 * 128}).report
    assert report["task_duration_us"] == pytest.approx(statistics.fmean(board.launch_task_us), rel=1e-12)
    assert report["task_median_us"] == pytest.approx((7023.5739 + 7119.9688) / 2, rel=1e-12)
    assert (report["task_min_us"], report["task_max_us"]) == (6969.308, 7151.6806)


def test_the_launches_of_two_shapes_are_refused_unless_one_is_picked():
    path = REAL / "msinsight_level1" / "rank0_ascend_pt"
    op = "aclnnAddmm_MatMulCommon_MatMulV2"
    with pytest.raises(InputError, match=r"the launches of aclnnAddmm_MatMulCommon_MatMulV2 differ in Block Dim / "
                                         r"Mix Block Dim \(16/0, 21/0\); pick one with --launch N \(0 … 2"):
        read_profile(path, op)
    board = read_profile(path, op, launch=2)
    assert (board.task_us, board.block_dim, board.launch) == (57.241, 21, 2)
    assert board.means["cube.M"] == 10.71 and board.launch_task_us == [346.567, 114.922, 57.241]


def several_layouts(tmp_path: Path) -> Path:
    """torch_a3_9x with the op summary of its PROF_ directory and, beside kernel_details.csv, a database."""
    from msprof_db import write_database

    root = Path(shutil.copytree(TORCH, tmp_path / TORCH.name))
    shutil.copytree(next((DATA / "a3_app_9x").iterdir()), root / "PROF_000001_20260307093000456_A")
    write_database(root / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db", KERNEL_DETAILS)
    return root


def test_a_directory_of_several_layouts_reads_kernel_details_and_says_so(tmp_path):
    root = several_layouts(tmp_path)
    board = read_profile(root, "runTFA")
    assert board.layout == "kernel_details" and board.files == [str(root / "ASCEND_PROFILER_OUTPUT" /
                                                                     "kernel_details.csv")]
    assert board.others == [
        "an op summary (PROF_000001_20260307093000456_A/mindstudio_profiler_output/op_summary_20260304150731.csv)",
        "a profile database (ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db)"]
    out = tfa("profile", str(root), "--op", "runTFA", *SETS, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert out.code == 0, out.err
    assert (f"  read kernel_details {root}/ASCEND_PROFILER_OUTPUT/kernel_details.csv; also there, not read: an op "
            f"summary (") in out.out


def test_msprof_op_output_beside_a_torch_npu_profile_is_refused(tmp_path):
    root = Path(shutil.copytree(TORCH, tmp_path / "both"))
    shutil.copytree(DATA / "a2_op_single", root / "op")
    with pytest.raises(InputError, match=r"holds both msprof op output \(.*\) and torch_npu's kernel_details.csv"):
        read_profile(root)


def test_two_ranks_are_refused_naming_them(tmp_path):
    for rank in ("rank0_ascend_pt", "rank1_ascend_pt"):
        shutil.copytree(TORCH, tmp_path / "job" / rank)
    with pytest.raises(InputError, match=r"holds torch_npu's kernel_details.csv of several runs or ranks "
                                         r"\(rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv, rank1"):
        read_profile(tmp_path / "job", "runTFA")
    assert read_profile(tmp_path / "job" / "rank1_ascend_pt", "runTFA").launches == 3


def test_op_statistic_is_refused_with_the_file_to_give():
    with pytest.raises(InputError, match=r"is an op_statistic.csv: each operator type's launches summed .* give the "
                                         r"kernel_details.csv \(torch_npu\)"):
        read_profile(REAL / "msinsight_level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv")


def test_the_summary_says_how_many_launches_and_their_spread(tmp_path):
    out = tfa("profile", str(TORCH), "--op", "runTFA", *SETS, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert out.code == 0, out.err
    mean = (48.06 + 47.266 + 48.855) / 3
    assert f"  {'task':12s} {'48.06 (47.27–48.85)':>30s} " in out.out
    assert (f"  launches: 3 of runTFA read, min 47.27, median 48.06, max 48.85 µs; their mean {mean:.2f} µs is "
            f"compared (--launch N, 0-based in start-time order, compares one)") in out.out.splitlines()
    report = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert report["launch_task_us"] == [48.06, 47.266, 48.855] and report["launch"] is None
    assert (report["task_min_us"], report["task_median_us"], report["task_max_us"]) == (47.266, 48.06, 48.855)
    assert report["task_duration_us"] == pytest.approx(mean, rel=1e-12)


@pytest.mark.parametrize("launch", [0, 1, 2])
def test_launch_compares_one_launch_with_its_own_pipes(launch):
    """--launch N is 0-based in start-time order: N's task and pipes, the spread of all three beside it."""
    rows = sorted((r for r in table(KERNEL_DETAILS) if r[NAME] == "runTFA"), key=lambda r: float(r[START].strip()))
    result = tfa_sim.profile(TORCH, op="runTFA", launch=launch, overrides=SHAPE)
    report = result.report
    assert report["launch"] == launch and report["task_duration_us"] == float(rows[launch][DURATION])
    assert report["pipes"]["vec.V"]["board_us"] == pytest.approx(float(rows[launch]["aiv_vec_time(us)"]), rel=1e-12)
    assert report["notes"][0] == (f"launches: launch {launch} of the 3 of runTFA compared (--launch, 0-based in "
                                  f"start-time order); all 3: min 47.27, median 48.06, max 48.85 µs")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 10**5)), min_size=1, max_size=6,
                unique_by=lambda t: t[0]))
def test_launches_are_ordered_by_start_time_whatever_the_file_order(tmp_path, launches):
    """Rows of one operator in any file order: launch k is the k-th to start, the spread is of all of them."""
    rows = table(KERNEL_DETAILS)
    tfa_row = next(r for r in rows if r[NAME] == "runTFA")
    path = tmp_path / "kernel_details.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        for start, duration in launches:
            writer.writerow({**tfa_row, START: f"{1727348291000 + start / 1000:.3f}\t", DURATION: f"{duration / 1000}"})
    by_start = [d / 1000 for _, d in sorted(launches)]
    board = read_profile(path)
    assert board.launch_task_us == by_start and board.task_us == pytest.approx(statistics.fmean(by_start))
    for k, duration in enumerate(by_start):
        assert read_profile(path, launch=k).task_us == duration
    with pytest.raises(InputError, match=rf"--launch {len(by_start)}: .* numbered 0 … {len(by_start) - 1} in "
                                         r"start-time order"):
        read_profile(path, launch=len(by_start))


def no_pipes(path: Path) -> None:
    """kernel_details.csv as torch_npu writes it with aic_metrics None: the base columns alone."""
    rows = table(path)
    keep = [c for c in rows[0] if c and not c.startswith(("ai", "cube_"))]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, keep, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def test_a_profile_without_pipe_columns_compares_the_task_alone(tmp_path):
    copy = Path(shutil.copytree(TORCH, tmp_path / "p"))
    no_pipes(copy / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    out = tfa("profile", str(copy), "--op", "runTFA", *SETS, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert out.code == 0, out.err
    report = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert report["largest"] == [] and report["findings"] == [] and report["block_dim"] == 8
    assert report["task_duration_us"] == pytest.approx((48.06 + 47.266 + 48.855) / 3, rel=1e-12)
    assert len(report["missing_columns"]) == 7 and "AiCMetrics.PipeUtilization" in report["collect"]
    assert "  pipes: the profile has no column aic_cube_time(us)/aic_mac_time(us), aic_mte1_time(us)" in out.out
    assert "furthest from 1" not in out.out


def cut_mid_row(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: text.index("runTFA", text.index("runTFA") + 10) + 40])


#: Bad input: a change to a copy of torch_a3_9x, the arguments, and what the one line must say.
BAD = {
    "another version without Duration(us)": (
        lambda p: rewrite(p, ",Duration(us),", ",Elapsed(us),", True), ("--op", "runTFA"),
        "has no column Task Duration(us) or Duration(us) (the task's time)"),
    "Block Num not the config's": (lambda p: None, ("--op", "runTFA", "--set", "case.s0=2048"),
                                   "Block Dim 8, but case_float_H_128_S0_2048_S1_4096 launches 16 blocks"),
    "Mix Block Num not two vector cores a block": (
        lambda p: rewrite(p, ",8,NO,16,", ",8,NO,12,"), ("--op", "runTFA"),
        "Mix Block Dim 12 is not 2 vector cores for each of the 8 blocks"),
    "a launch out of range": (lambda p: None, ("--op", "runTFA", "--launch", "3"),
                              "--launch 3: profile", "holds 3 launches of runTFA, numbered 0 … 2"),
    "a negative launch": (lambda p: None, ("--op", "runTFA", "--launch", "-1"), "--launch -1: profile"),
    "a row cut short": (cut_mid_row, ("--op", "runTFA"), "line 6 has 10 cells where its rows have 48: the file is cut"),
    "a NaN duration": (lambda p: rewrite(p, ",48.06,", ",nan,"), ("--op", "runTFA"),
                       "column Duration(us): nan is not a time or count"),
    "no operator named": (lambda p: None, (), "holds tasks of 2 operators: Cast (2 tasks), runTFA (3 tasks); pick"),
    "the chosen operator an AI_CPU task": (
        lambda p: None, ("--op", "trans_Cast_5"), "--op trans_Cast_5: kernel_details",
        "has no task of that operator, only Cast (2 tasks), runTFA (3 tasks)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    change, extra, *says = BAD[case]
    copy = Path(shutil.copytree(TORCH, tmp_path / "in" / TORCH.name))
    change(copy / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = tfa("profile", str(copy), *SETS, *extra, cwd=tmp_path)
    assert_refused(out, *says)
    assert out.out == "" and sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_real_flash_attention_kernel_is_refused_as_not_the_configs_launch(tmp_path):
    out = tfa("profile", str(REAL / "msinsight_st_level2"), "--op", "aclnnFlashAttentionScore", *SETS, cwd=tmp_path)
    assert_refused(out, "Block Dim 20, but case_float_H_128_S0_1024_S1_4096 launches 8 blocks")
    assert list(tmp_path.iterdir()) == []
