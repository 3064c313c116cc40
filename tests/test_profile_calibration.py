"""``tfa-sim calibrate --profiles LIST``: each profile a point of timing ``task``, equal to the same launch given
as a points row; a fit from profiles is the fit from those rows, and its presets run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_cli import tfa
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
