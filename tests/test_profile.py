"""``tfa-sim profile`` / ``tfa_sim.profile``: the board's figures exactly as the files give them beside the model's
own run, the disagreements ranked by |log board/model|, the directory it writes, and every bad input refused with
one line and nothing written."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from test_hostile_cli import tfa
from test_profile_reader import DATA, expected_op, expected_summary, rewrite

import tfa_sim
from tfa_sim.rundir.msprof import SIMULATED

SHAPE = {"schedule.cv_fifo_cons_sync_period": 1}
#: Each fixture's operator and the config it was made for (tests/data/msprof/README.md).
FIXTURES = {"a2_op_single": (None, {"case.s0": 512, "case.s1": 2048, **SHAPE}),
            "a3_op_multi": ("runTFA", {"case.s0": 2048, "case.s1": 1024, **SHAPE}),
            "a2_app_8x": ("runTFA", {"case.s0": 128, "case.s1": 8192, **SHAPE}),
            "a3_app_9x": ("runTFA", {"case.s0": 1024, "case.s1": 4096, **SHAPE})}


def model_means(summary: dict) -> dict[str, float]:
    """The model's busy µs per unit, averaged per pipe kind, from a run's summary.json."""
    by_kind: dict[str, list[float]] = {}
    for pipes in summary["pipes"].values():
        for name, fraction in pipes.items():
            unit, pipe = name.split(".")
            kind = "cube" if unit.startswith("cube") else "vec"
            by_kind.setdefault(f"{kind}.{pipe}", []).append(fraction * summary["total_cycles"] / summary["clock_mhz"])
    return {k: sum(v) / len(v) for k, v in by_kind.items()}


def board_means(name: str, op: str | None) -> tuple[float, dict[str, float]]:
    """The board's task and per-pipe busy µs per core (one wave: a block is a core), from the files by hand."""
    if any((DATA / name).rglob("OpBasicInfo*.csv")):
        want = expected_op(DATA / name, op)
        per: dict[str, list[float]] = {}
        for (_, _, _, pipe), v in want["units"].items():
            per.setdefault(pipe, []).append(v)
        return want["task"], {p: sum(v) / len(v) for p, v in per.items()}
    want = expected_summary(DATA / name, op)
    return want["task"], want["means"]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_table_holds_the_boards_figures_beside_the_models(name):
    op, overrides = FIXTURES[name]
    result = tfa_sim.profile(DATA / name, overrides=overrides, op=op)
    run = tfa_sim.run(overrides=overrides, numerics=False, event_log=False)
    task, board = board_means(name, op)
    model = model_means(run.summary)
    report = result.report
    assert result.task_duration_us == pytest.approx(task, rel=1e-12)
    assert report["model_us"] == run.time_us and report["model_interval_us"] == run.summary["time_interval_us"]
    for pipe, p in report["pipes"].items():
        assert p["board_us"] == pytest.approx(board[pipe], rel=1e-12), pipe
        if pipe in SIMULATED:
            assert p["model_us"] == pytest.approx(model[pipe], rel=1e-9), pipe
            assert p["ratio"] == pytest.approx(board[pipe] / model[pipe], rel=1e-9)
        else:
            assert p["model_us"] is None and p["ratio"] is None and p["note"] == "not simulated"
    by_distance = sorted(SIMULATED, key=lambda n: abs(math.log(board[n] / model[n])), reverse=True)
    assert result.largest == by_distance
    assert result.findings[0].startswith(f"{by_distance[0]}: the board is busy ")


def test_the_largest_disagreement_is_the_one_made_largest():
    """a2_op_single's vector pipe was made 1.40× the model's (tests/data/msprof/README.md): it comes first."""
    result = tfa_sim.profile(DATA / "a2_op_single", overrides=FIXTURES["a2_op_single"][1])
    assert result.largest[0] == "vec.V"
    assert "the board is busy 1.40× the model's time" in result.findings[0]


def test_blocks_beyond_the_cores_add_up_per_core_as_the_model_places_them():
    """4 blocks on 2 cores: core c runs blocks c and c + 2, so its figure is their sum."""
    op, overrides = FIXTURES["a2_op_single"]
    report = tfa_sim.profile(DATA / "a2_op_single", overrides={**overrides, "hardware.cores": 2}).report
    units = expected_op(DATA / "a2_op_single", op)["units"]
    want = [units[("vec", core, lane, "vec.V")] + units[("vec", core + 2, lane, "vec.V")]
            for core in (0, 1) for lane in (0, 1)]
    assert report["cores"] == 2
    assert report["pipes"]["vec.V"]["board_per_core_us"] == pytest.approx(want, rel=1e-12)
    assert report["pipes"]["vec.V"]["board_us"] == pytest.approx(sum(want) / 4, rel=1e-12)


def test_the_notebook_table_and_the_dataframe():
    result = tfa_sim.profile(DATA / "a3_app_9x", overrides=FIXTURES["a3_app_9x"][1], op="runTFA")
    table = result.to_pandas()
    assert list(table.index) == ["task", *result.report["pipes"]]
    assert table.loc["task", "board_us"] == result.task_duration_us
    html = result._repr_html_()
    assert "<table>" in html and "vec.scalar" in html and result.findings[0].split(":")[0] in html


def test_the_command_writes_its_directory_and_replaces_only_its_own_files(tmp_path):
    op, overrides = FIXTURES["a3_op_multi"]
    sets = [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]
    out = tfa("profile", str(DATA / "a3_op_multi"), "--op", op, *sets, cwd=tmp_path)
    assert out.code == 0, out.err
    written = next((tmp_path / "runs").iterdir())
    assert written.name.startswith("profile-case_float_H_128_S0_2048_S1_1024-")
    assert {p.name for p in written.iterdir()} >= {"profile.json", "profile.png", "profile.svg"}
    report = json.loads((written / "profile.json").read_text())
    assert {"task_duration_us", "model_us", "model_interval_us", "pipes", "largest"} <= report.keys()
    wrote = f"  wrote {written.relative_to(tmp_path)}/ (profile.json, profile.png, profile.svg, roofline.svg)"
    assert out.out.splitlines()[-1] == wrote
    assert f"furthest from 1 (|log board/model|): {report['largest'][0]} " in out.out
    again = tfa("profile", str(DATA / "a3_op_multi"), "--op", op, *sets, "--out", str(written), cwd=tmp_path)
    assert again.code == 0, again.err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "profile.json").write_text("{}")
    refused = tfa("profile", str(DATA / "a3_op_multi"), "--op", op, *sets, "--out", str(mine), cwd=tmp_path)
    assert refused.code == 2 and "profile.json (not written by tfa-sim)" in refused.err
    assert sorted(p.name for p in mine.iterdir()) == ["profile.json"] and (mine / "profile.json").read_text() == "{}"


def bad_copy(tmp_path: Path, change) -> Path:
    target = tmp_path / "in" / "profile"
    shutil.copytree(next((DATA / "a2_op_single").iterdir()), target)
    change(target)
    return target


def other_operator_only(root: Path) -> None:
    summary = next((DATA / "a2_app_8x").rglob("op_summary_*.csv")).read_text().splitlines()
    (root / "op_summary_1.csv").write_text("\n".join(line for line in summary if "runTFA" not in line))
    for name in ("OpBasicInfo.csv", "PipeUtilization.csv"):
        (root / name).unlink()


def blank_then_nan(path: Path) -> None:
    """A blank line after the header (msprof writes none, an editor may), then the NaN of line 3, now line 4."""
    lines = path.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join([lines[0], "", *lines[1:]]).replace(",22.0057,", ",nan,"), encoding="utf-8")


#: Bad input: a change to a copy of a2_op_single, extra arguments, and what the one line must say.
BAD = {
    "missing file": (lambda d: (d / "PipeUtilization.csv").unlink(), (), "has no PipeUtilization.csv files"),
    "missing column": (lambda d: rewrite(d / "OpBasicInfo.csv", "Task Duration(us)", "Duration", 0), (),
                       r"has no column Task Duration(us) (the task's time)"),
    "another Block Dim": (lambda d: None, ("--set", "case.s0=1024"), "Block Dim 4, but case_float_H_128_S0_1024_S1_2048"
                          " launches 8 blocks"),
    "NaN": (lambda d: rewrite(d / "PipeUtilization.csv", ",22.0057,", ",nan,"), (),
            "line 3, column aiv_vec_time(us): nan is not a time or count"),
    "NaN after a blank line": (lambda d: blank_then_nan(d / "PipeUtilization.csv"), (),
                               "line 4, column aiv_vec_time(us): nan is not a time or count"),
    "negative time": (lambda d: rewrite(d / "PipeUtilization.csv", ",9.45722,", ",-9.45722,"), (),
                      "column aic_cube_time(us): -9.45722 is not a time or count"),
    "another operator's rows only": (other_operator_only, (), "aic_mac_time(us) of Cast is N/A"),
    "another operator picked": (lambda d: None, ("--op", "MatMulV2", "--dir", "a3_op_multi"),
                                "block 0 of MatMulV2 has 1 cube and 0 vector core rows"),
    "no such operator": (lambda d: None, ("--op", "FlashAttention"), "--op FlashAttention: profile"),
    "binary file": (lambda d: (d / "PipeUtilization.csv").write_bytes(b"\x89PNG\r\n\x1a\n\0\0"), (),
                    "PipeUtilization.csv is binary, not text (byte 0 is 0x89)"),
    "unknown chip": (lambda d: rewrite(d / "OpBasicInfo.csv", ",1800,1800", ",1000,1000"), (),
                     "Rated Freq 1000 MHz is no preset's clock"),
    "another clock": (lambda d: rewrite(d / "OpBasicInfo.csv", ",1800,1800", ",1500,1800"), (),
                      "the board ran at 1500 MHz, the model's 910b2 at 1800 MHz; give --hw 910b4"),
    "no profile": (lambda d: shutil.rmtree(d), (), "not found; give the OPPROF_"),
    "header only": (lambda d: (d / "PipeUtilization.csv").write_text(
        (d / "PipeUtilization.csv").read_text().splitlines()[0] + "\n"), (), "has no rows of runTFA"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    change, extra, says = BAD[case]
    src = bad_copy(tmp_path, change)
    extra = list(extra)
    if "--dir" in extra:
        i = extra.index("--dir")
        src = DATA / extra.pop(i + 1)
        extra.pop(i)
    sets = [a for k, v in FIXTURES["a2_op_single"][1].items() for a in ("--set", f"{k}={v}")]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = tfa("profile", str(src), *sets, *extra, cwd=tmp_path)
    assert out.code == 2 and out.out == ""
    assert len(out.err.splitlines()) == 1 and out.err.startswith("tfa-sim: error: "), out.err
    assert says in out.err, out.err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "nothing written"
