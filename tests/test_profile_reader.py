"""The msprof reader (tfa_sim/rundir/msprof.py) on the profiles of tests/data/msprof: what it reads is what the files
say, in every layout and spelling the documentation shows, and the files it must refuse are refused."""
from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pytest

from tfa_sim.rundir.msprof import PIPE_COLUMNS, read_profile
from tfa_sim.spec.errors import InputError

DATA = Path(__file__).resolve().parent / "data" / "msprof"
#: Each fixture, its operator (None: the only one) and the launches of it the files hold.
FIXTURES = {"a2_op_single": (None, 1), "a3_op_multi": ("runTFA", 2), "a2_app_8x": ("runTFA", 1),
            "a3_app_9x": ("runTFA", 3)}


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def value(row: dict[str, str], *names: str) -> float | None:
    """The first of ``names`` the row has, as msprof wrote it (None where it marks the value missing)."""
    for name in names:
        if name in row:
            return None if row[name] in ("NA", "N/A", "") else float(row[name])
    return None


def expected_op(directory: Path, op: str | None) -> dict[str, object]:
    """An msprof op directory read by hand: every launch of the operator, its task and per-unit pipe times."""
    launches = [b.parent for b in sorted(directory.rglob("OpBasicInfo*.csv"))
                if op is None or rows(b)[0]["Op Name"] == op]
    tasks, units = [], {}
    for launch in launches:
        tasks.append(float(rows(next(launch.glob("OpBasicInfo*.csv")))[0]["Task Duration(us)"]))
        lanes: dict[str, int] = {}
        for row in rows(next(launch.glob("PipeUtilization*.csv"))):
            kind = "cube" if value(row, "aic_time(us)") is not None else "vec"
            lane = 0 if kind == "cube" else lanes.setdefault(row["block_id"], 0)
            lanes[row["block_id"]] = lane + (kind == "vec")
            for pipe, names in PIPE_COLUMNS.items():
                if pipe.startswith(kind):
                    units.setdefault((kind, int(row["block_id"]), lane, pipe), []).append(value(row, *names))
    return {"task": sum(tasks) / len(tasks), "launches": len(tasks),
            "units": {key: sum(v) / len(v) for key, v in units.items()}}


def expected_summary(directory: Path, op: str) -> dict[str, object]:
    """An op summary read by hand: the operator's task rows, each figure the mean over them."""
    chosen = [r for f in directory.rglob("op_summary_*.csv") for r in rows(f) if r["Op Name"] == op]
    means = {pipe: sum(value(r, *names) for r in chosen) / len(chosen) for pipe, names in PIPE_COLUMNS.items()}
    dims = {r.get("Block Dim", r.get("Block Num")) for r in chosen}
    return {"task": sum(float(r["Task Duration(us)"]) for r in chosen) / len(chosen), "launches": len(chosen),
            "means": means, "block_dim": int(dims.pop())}


@pytest.mark.parametrize("name", ["a2_op_single", "a3_op_multi"])
def test_msprof_op_units_hold_the_files_values(name):
    op, launches = FIXTURES[name]
    board = read_profile(DATA / name, op)
    want = expected_op(DATA / name, op)
    assert board.layout == "msprof op" and board.launches == launches == want["launches"]
    assert board.task_us == pytest.approx(want["task"], rel=1e-12)
    got = {(u.kind, u.block, u.lane, pipe): v for u in board.units for pipe, v in u.values.items()
           if not pipe.endswith(".time")}
    assert got.keys() == want["units"].keys()
    for key, v in want["units"].items():
        assert got[key] == pytest.approx(v, rel=1e-12), key
    assert board.mix_block_dim == 2 * board.block_dim
    assert (board.current_mhz, board.rated_mhz) == (1800.0, 1800.0)


@pytest.mark.parametrize("name", ["a2_app_8x", "a3_app_9x"])
def test_op_summary_means_hold_the_files_values(name):
    op, launches = FIXTURES[name]
    board = read_profile(DATA / name, op)
    want = expected_summary(DATA / name, op)
    assert board.layout == "op summary" and board.units is None and board.launches == launches == want["launches"]
    assert board.task_us == pytest.approx(want["task"], rel=1e-12)
    assert board.block_dim == want["block_dim"] and board.mix_block_dim == 2 * board.block_dim
    for pipe, v in want["means"].items():
        assert board.means[pipe] == pytest.approx(v, rel=1e-12), pipe


def test_the_spellings_of_each_version_are_read():
    """msprof op of CANN 8.0.RC1 spells the cube pipe aic_mac_*, later msOpProf aic_cube_*; op summaries aic_mac_*
    with Block Dim (8.x) or Block Num (9.x)."""
    assert read_profile(DATA / "a2_op_single").columns["cube.M"] == "aic_cube_time(us)"
    assert read_profile(DATA / "a3_op_multi", "runTFA").columns["cube.M"] == "aic_mac_time(us)"
    assert read_profile(DATA / "a3_app_9x", "runTFA").block_dim == 8


def test_the_operator_is_picked_by_name_or_the_start_of_it():
    assert read_profile(DATA / "a3_app_9x", "run").op_name == "runTFA"
    with pytest.raises(InputError, match=r"holds tasks of 2 operators: Cast \(2 tasks\), runTFA \(1 task\); pick"):
        read_profile(DATA / "a2_app_8x")


def copy(tmp_path: Path, name: str = "a2_op_single") -> Path:
    """A fixture's launch directory to change."""
    target = tmp_path / "profile"
    shutil.copytree(next((DATA / name).iterdir()), target)
    return target


def rewrite(path: Path, old: str, new: str, line: int | None = None) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    targets = range(len(lines)) if line is None else [line]
    for n in targets:
        lines[n] = lines[n].replace(old, new)
    path.write_text("\n".join(lines), encoding="utf-8")


def test_headers_are_matched_ignoring_case_and_spaces_and_rows_by_their_values(tmp_path):
    """Another spelling of the same columns, sub-blocks named otherwise, a byte-order mark: the same figures."""
    src = copy(tmp_path)
    want = read_profile(src)
    rewrite(src / "PipeUtilization.csv", "aiv_vec_time(us)", "AIV_Vec_Time (us)", 0)
    rewrite(src / "OpBasicInfo.csv", "Task Duration(us)", "task duration(us)", 0)
    rewrite(src / "PipeUtilization.csv", ",vector0,", ",aiv6,")
    rewrite(src / "PipeUtilization.csv", ",vector1,", ",aiv7,")
    (src / "OpBasicInfo.csv").write_bytes(b"\xef\xbb\xbf" + (src / "OpBasicInfo.csv").read_bytes())
    got = read_profile(src)
    assert got.task_us == want.task_us
    assert [(u.kind, u.block, u.lane, u.values) for u in got.units] == \
        [(u.kind, u.block, u.lane, u.values) for u in want.units]


def test_a_profile_of_several_devices_asks_for_one(tmp_path):
    for device in ("device0", "device1"):
        shutil.copytree(DATA / "a2_op_single", tmp_path / "OPPROF_1" / device / "runTFA" / "0")
    with pytest.raises(InputError, match=r"profiles of 2 devices \(device0, device1\): give one"):
        read_profile(tmp_path / "OPPROF_1")
    assert read_profile(tmp_path / "OPPROF_1" / "device1").op_name == "runTFA"


def test_a_calibration_reading_needs_no_pipe_columns(tmp_path):
    src = copy(tmp_path)
    table = rows(src / "PipeUtilization.csv")
    keep = [h for h in table[0] if "vec" not in h]
    with (src / "PipeUtilization.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, keep, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
    with pytest.raises(InputError, match=r"no column aiv_vec_time\(us\) \(the busy time of vec.V\)"):
        read_profile(src)
    assert math.isclose(read_profile(src, pipes=False).task_us, 24.27)


def test_one_of_msprof_ops_files_stands_for_its_launch():
    launch = next((DATA / "a2_op_single").iterdir())
    assert read_profile(launch / "PipeUtilization.csv").units == read_profile(launch).units
