"""``tfa-sim calibrate --profiles LIST``: each profile a point of timing ``task``, equal to the same launch given
as a points row; a fit from profiles is the fit from those rows, and its presets run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from msprof_db import write_database
from test_hostile_cli import assert_refused, tfa
from test_profile_reader import DATA

from tfa_sim.explore.points import load_points
from tfa_sim.explore.profile_points import calibration_points

CALIBRATION = DATA / "calibration"
SHIPPED_ROWS = Path(__file__).resolve().parent.parent / "configs" / "calibration" / "points.csv"


@pytest.mark.parametrize("listing", ["profiles.toml", "profiles.csv"])
def test_profiles_make_the_points_of_the_same_launches(listing):
    points, profiled = calibration_points([], [], None, str(CALIBRATION / listing))
    assert points == load_points(CALIBRATION / "points.csv")
    assert [p.board.op_name for p in profiled] == ["runTFA"] * 3
    assert {p.timing for p in points} == {"task"}


def two_profiles(tmp_path: Path) -> tuple[Path, Path]:
    """The first two calibration profiles as a LIST (absolute paths) and as a points CSV."""
    listing = tmp_path / "two.toml"
    entries = (CALIBRATION / "profiles.toml").read_text().split("[[profile]]")[1:3]
    listing.write_text("".join("[[profile]]" + e.replace('dir = "', f'dir = "{CALIBRATION}/') for e in entries))
    rows = (CALIBRATION / "points.csv").read_text().splitlines()
    points = tmp_path / "two.csv"
    points.write_text("\n".join(rows[1:4]) + "\n")
    return listing, points


def test_a_fit_from_profiles_is_the_fit_from_the_same_rows_and_its_preset_runs(tmp_path):
    listing, points = two_profiles(tmp_path)
    by_profiles = tfa("calibrate", "--profiles", str(listing), "--out", str(tmp_path / "a"), cwd=tmp_path)
    by_points = tfa("calibrate", "--points", str(points), "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert by_profiles.code == 0 and by_points.code == 0, by_profiles.err + by_points.err
    a, b = (json.loads((tmp_path / d / "calibration.json").read_text()) for d in "ab")
    assert [(r["param"], r["value"]) for r in a["parameters"]] == [(r["param"], r["value"]) for r in b["parameters"]]
    assert [p["predicted_us"] for p in a["points"]] == [p["predicted_us"] for p in b["points"]]
    assert "profiles: each pipe's busy time, board/model, at the fitted values" in by_profiles.out
    assert "profiles:" not in by_points.out
    run = tfa("run", "--hw", str(tmp_path / "a" / "910b2.toml"), "--no-numerics", "--no-event-log", "--set",
              "case.s1=2048", "--set", "kernel.build=jit", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert run.code == 0, run.err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["time_us"] == pytest.approx(a["points"][1]["predicted_us"], abs=1e-4)


def test_profiles_join_the_points_of_every_build(tmp_path):
    """The builds share one fit: rows of the manual build and profiles of the jit build make one set of points;
    ``--kernel`` keeps one build's."""
    points, _ = calibration_points([str(SHIPPED_ROWS)], [1], None, str(CALIBRATION / "profiles.csv"))
    assert len(points) == 17 + 3 and points[-1].timing == "task"
    other = tmp_path / "other.csv"
    other.write_text((CALIBRATION / "points.csv").read_text().replace(",jit,", ",manual,"))
    both, _ = calibration_points([str(other)], [], None, str(CALIBRATION / "profiles.csv"))
    assert [p.kernel for p in both] == ["manual"] * 3 + ["jit"] * 3
    picked, _ = calibration_points([str(other)], [], "manual", str(CALIBRATION / "profiles.csv"))
    assert {p.kernel for p in picked} == {"manual"} and len(picked) == 3


def listing_with(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "list.toml"
    path.write_text(text.replace("DIR", f"{CALIBRATION}/b1_s1024/OPPROF_20260305100000_CALIB1"))
    return path


ENTRY = '[[profile]]\ndir = "DIR"\nkernel = "jit"\n'
#: A bad LIST (or option) and what the one line says.
BAD = {
    "unknown key": (ENTRY + 'sett = { "case.s1" = 1024 }\n', (), "unknown key 'sett'"),
    "no kernel": ('[[profile]]\ndir = "DIR"\n', (), "entry 1: no kernel; an entry has dir, kernel"),
    "not a build": (ENTRY.replace('"jit"', '"older"'), (), "kernel 'older' must be the build that ran"),
    "not a point": (ENTRY + 'set = { "case.heads" = 2, "schedule.cv_fifo_cons_sync_period" = 1 }\n', (),
                    "case.heads = 2: a calibration point has 1 there"),
    "another Block Dim": (ENTRY + 'set = { "case.s0" = 512 }\n', (), "Block Dim 1, but case_float_H_128_S0_512"),
    "no profile": (ENTRY.replace("DIR", "DIR/nothing"), (), "not found; give the OPPROF_"),
    "exclude without points": (ENTRY, ("--exclude", "1"), "--exclude ROW leaves out rows of --points FILE"),
    "not TOML": ("[[profile]\n", (), "is not TOML"),
    "op not a string": (ENTRY + "op = 3\n", (), "op = 3 must be a string"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_list_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    text, extra, says = BAD[case]
    out = tfa("calibrate", "--profiles", str(listing_with(tmp_path, text)), *extra, "--out", str(tmp_path / "out"),
              cwd=tmp_path)
    assert out.code == 2 and len(out.err.splitlines()) == 1 and says in out.err, out.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["list.toml"]

def test_torch_npu_profiles_make_the_points_of_the_same_launches():
    """profiles_torch_npu.toml names torch_npu's kernel_details.csv (one of three launches picked with launch = 1)
    where profiles.toml names msprof op directories: the same points."""
    points, profiled = calibration_points([], [], None, str(CALIBRATION / "profiles_torch_npu.toml"))
    assert points == load_points(CALIBRATION / "points.csv")
    assert [p.board.layout for p in profiled] == ["kernel_details", "op summary", "kernel_details"]
    assert (profiled[0].board.launch, profiled[0].board.launch_task_us) == (1, [15.612, 15.43, 15.288])


def test_a_csv_list_takes_launch_as_a_column(tmp_path):
    listing = tmp_path / "list.csv"
    listing.write_text(f"dir,kernel,launch,set\n{CALIBRATION}/torch_npu/b1_s1024_ascend_pt,jit,1,case.s0=128 "
                       f"case.s1=1024 schedule.cv_fifo_cons_sync_period=1\n")
    points, profiled = calibration_points([], [], None, str(listing))
    assert points == load_points(CALIBRATION / "points.csv")[:1] and profiled[0].board.launch == 1


def test_a_database_in_the_list_makes_the_point_of_its_launch(tmp_path):
    write_database(tmp_path / "msprof_1.db", next((CALIBRATION / "b1_s2048").rglob("op_summary_*.csv")))
    listing = tmp_path / "list.toml"
    listing.write_text('[[profile]]\ndir = "msprof_1.db"\nkernel = "jit"\nop = "runTFA"\n'
                       'set = { "case.s0" = 128, "case.s1" = 2048, "schedule.cv_fifo_cons_sync_period" = 1 }\n')
    points, profiled = calibration_points([], [], None, str(listing))
    assert points == load_points(CALIBRATION / "points.csv")[1:2] and profiled[0].board.layout == "database"


def test_a_fit_from_torch_npu_profiles_is_the_fit_from_the_same_rows(tmp_path):
    """Two torch_npu profiles of profiles_torch_npu.toml (its entries 1 and 3) against points.csv's rows 1 and 3."""
    entries = (CALIBRATION / "profiles_torch_npu.toml").read_text().split("[[profile]]")
    listing, points = tmp_path / "torch.toml", tmp_path / "rows.csv"
    listing.write_text("".join("[[profile]]" + entries[n].replace('dir = "', f'dir = "{CALIBRATION}/') for n in (1, 3)))
    rows = (CALIBRATION / "points.csv").read_text().splitlines()
    points.write_text("\n".join([rows[1], rows[2], rows[4]]) + "\n")
    runs = {out: tfa("calibrate", option, str(path), "--out", str(tmp_path / out), cwd=tmp_path)
            for out, option, path in (("torch", "--profiles", listing), ("rows", "--points", points))}
    assert [r.code for r in runs.values()] == [0, 0], [r.err for r in runs.values()]
    fits = [json.loads((tmp_path / out / "calibration.json").read_text()) for out in runs]
    values, predicted = ([[(r["param"], r["value"]) for r in f["parameters"]] for f in fits],
                         [[p["predicted_us"] for p in f["points"]] for f in fits])
    assert values[0] == values[1] and predicted[0] == predicted[1]
    by_profiles = runs["torch"]
    assert "(910b2 jit task S0=128 S1=1024, task 15.430 µs, launch 1 of 3, model" in by_profiles.out
    assert "(910b2 jit task S0=512 S1=1024, task 14.833 µs, 1 launch, model" in by_profiles.out


LEVEL0 = DATA / "real" / "msinsight_level0" / "rank0_ascend_pt"
#: A bad ``launch`` key or a profile a point cannot come from, and what the one line says.
BAD_LAUNCH = {
    "launch not a number": (ENTRY + 'launch = "first"\n', "launch = 'first' must be a launch's number, 0 or more"),
    "a negative launch": (ENTRY + "launch = -1\n", "launch = -1 must be a launch's number"),
    "a launch the profile lacks": (ENTRY + "launch = 1\n", "--launch 1: profile", "holds 1 launch of runTFA, "
                                                                                   "numbered 0 … 0"),
    "a Level0 profile": (f'[[profile]]\ndir = "{LEVEL0}"\nkernel = "jit"\nop = "Conv2D4"\n',
                         "has no Block Dim (torch_npu's Level0 writes none), so it cannot be checked as the config's "
                         "launch: collect with profiler_level Level1"),
}


@pytest.mark.parametrize("case", sorted(BAD_LAUNCH))
def test_a_bad_launch_or_a_profile_without_blocks_is_one_line_exit_2(tmp_path, case):
    text, *says = BAD_LAUNCH[case]
    out = tfa("calibrate", "--profiles", str(listing_with(tmp_path, text)), "--out", str(tmp_path / "out"),
              cwd=tmp_path)
    assert_refused(out, *says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["list.toml"]


def test_a_profile_with_a_damaged_row_calibrates_from_its_whole_rows_and_the_report_names_the_line(tmp_path):
    """The op summary's first Cast row (line 2) loses a cell: it is left out, the runTFA launch is the same point,
    and the fit's report names the line (issue 49)."""
    listing, _ = two_profiles(tmp_path)
    source = CALIBRATION / "b1_s2048" / "PROF_000001_20260305101010101_CALIBRATIONSAMPLE"
    damaged = tmp_path / "damaged" / source.name
    shutil.copytree(source, damaged)
    summary = next((damaged / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    lines = summary.read_text().splitlines(True)
    lines[1] = lines[1].replace(",dynamic,", ",", 1)  # one cell fewer than the header
    summary.write_text("".join(lines))
    listing.write_text(listing.read_text().replace(str(source), str(damaged)))
    (tmp_path / "w").mkdir()
    whole = tfa("calibrate", "--profiles", str(two_profiles(tmp_path / "w")[0]), "--out", str(tmp_path / "a"),
                cwd=tmp_path)
    cut = tfa("calibrate", "--profiles", str(listing), "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert whole.code == cut.code == 0, cut.err
    a, b = (json.loads((tmp_path / d / "calibration.json").read_text()) for d in "ab")
    assert [p["time_us"] for p in a["points"]] == [p["time_us"] for p in b["points"]]
    assert f"skipped 1 damaged row: line 2 of {summary}" in cut.out and "damaged row" not in whole.out
