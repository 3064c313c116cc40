"""The roofline (issue 51): the limits from the presets' own numbers, the work a run did counted by hand, the ceiling
check (no simulated run is faster than its own hardware), the command's files and errors, the docs' figure."""
from __future__ import annotations

import itertools
import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

import tfa_sim
from tfa_sim.api import runner
from tfa_sim.cli import main
from tfa_sim.rundir.event_file import load_log
from tfa_sim.rundir.outputs import read_log
from tfa_sim.spec.config import CONFIG_DIR
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware, preset_names
from tfa_sim.spec.limits import chip_limits
from tfa_sim.spec.work import parse
from tfa_sim.views.roofline import RANKED, format_nearest
from tfa_sim.views.roofline_chart import chart, svg

ROOT = Path(__file__).resolve().parents[1]
#: The docs' figure and the runs it shows (docs/guide/roofline.md).
DOCS_FIGURE = ROOT / "docs" / "img" / "roofline.svg"
DOCS_RUNS = {"tour": {}, "tour-4096": {"case.s0": 4096, "case.s1": 4096}}
#: A float's rounding beyond the ceiling (the tables round to 6 decimals).
TOLERANCE = 1e-5


def preset(name: str) -> dict:
    return tomllib.loads((CONFIG_DIR / "hw" / f"{name}.toml").read_text())


@pytest.mark.parametrize("name", preset_names())
def test_limits_are_the_presets_numbers(name: str) -> None:
    """Each limit by hand from the preset file: 16³ MACs, 256 B ÷ 4 B ÷ cycles per repeat, the path rates."""
    p, limits = preset(name), chip_limits(load_hardware(tfa_sim.load_config(hw=name).hardware))
    assert limits["cube.M"].per_cycle == 16 ** 3 == p["cube"]["fractal"] ** 3
    per_repeat = {"binary": 2, "div": 4, "scalar": 1, "exp": 2, "convert": 1, "reduce": 1}
    assert {c: p["vector"][f"{c}_per_repeat"] for c in per_repeat} == per_repeat  # the shipped cost model
    for cls, cycles in per_repeat.items():
        assert limits[f"vec.V.{cls}"].per_cycle == 64 / cycles
    for resource, path in (("cube.MTE2", "gm_to_l1"), ("cube.FIX", "l0c_to_gm"), ("vec.MTE2", "gm_to_ub"),
                           ("vec.MTE3", "ub_to_gm"), ("cube.MTE1.l1_to_l0a", "l1_to_l0a"),
                           ("cube.MTE1.l1_to_l0b", "l1_to_l0b")):
        assert limits[resource].per_cycle == p["move"][path]
    assert limits["gm.L2"].per_cycle == p["gm"]["l2_bandwidth"] and limits["gm.L2"].scope == "chip"
    assert limits["gm.HBM"].per_cycle == p["gm"]["hbm_bandwidth"]


@pytest.fixture(scope="module")
def one_block() -> dict:
    """The built-in case (one block: S0 128, S1 1024, HEAD 128, TILE_S1 256, CUBE 128×128), timing only."""
    return runner.compute(tfa_sim.load_config(overrides={"numerics.enabled": False})).summary


def test_one_block_work_by_hand(one_block: dict) -> None:
    """Every resource's work counted by hand from the kernel's loads, stores, extracts, matmuls and vector ops."""
    res = one_block["roofline"]["resources"]
    s0, s1, head, tiles, subs = 128, 1024, 128, 4, 8  # 4 tiles of 256, 8 sub-tiles of 128
    work = {name: row["work"] for name, row in res.items()}
    assert work["cube.M"] == 2 * s0 * s1 * head  # QK and PV
    assert work["cube.MTE2"] == s0 * head * 2 + 3 * s1 * head * 2  # Q, K, V (fp16); P is S0 × S1 fp16 too
    assert work["cube.FIX"] == s0 * s1 * 4 + tiles * s0 * head * 4  # QK (fp32) and a PV per tile
    assert work["vec.MTE2"] == s0 * s1 * 4 + tiles * s0 * head * 4  # QK loads, PV loads
    assert work["vec.MTE3"] == s0 * s1 * 2 + s0 * head * 4  # P (fp16), O (fp32)
    assert work["cube.MTE1.l1_to_l0a"] == 2 * subs * s0 * head * 2  # the Q panel, then P, per sub-tile
    assert work["cube.MTE1.l1_to_l0b"] == 2 * subs * 128 * head * 2  # K, then V, per sub-tile
    slices = 2 * 2  # row slices per tile: two AIVs, two slices of 32 rows each
    assert work["vec.V.exp"] == s0 * s1 + 64 * (tiles - 1) * slices  # the tile's exp and, later, the row state's
    assert work["vec.V.convert"] == s0 * s1  # x_exp to fp16
    assert work["vec.V.div"] == s0 * head  # the last update's divide
    assert work["gm.L2"] == sum(work[p] for p in ("cube.MTE2", "cube.FIX", "vec.MTE2", "vec.MTE3"))
    cycles = one_block["total_cycles"]
    assert res["cube.M"]["fraction_of_limit"] == pytest.approx(2 * s0 * s1 * head / (cycles * 4096), abs=1e-6)
    assert one_block["roofline"]["intensity"]["flop_per_gm_byte"] == pytest.approx(
        2 * work["cube.M"] / one_block["gm_bytes"], rel=1e-6)


def test_stages_add_up_and_extracts_are_pure_bandwidth(one_block: dict) -> None:
    """The stages' work adds up to the run's; MTE1's fraction is its busy share (a TEXTRACT costs exactly its
    bytes at the two path rates); the report names three resources."""
    table = one_block["roofline"]
    for name, row in table["resources"].items():
        if name != "gm.HBM":  # HBM's misses are the GM model's, not the stages'
            assert sum(rows.get(name, {"work": 0})["work"] for rows in table["stages"].values()) == row["work"]
    mte1 = table["resources"]["cube.MTE1"]
    assert mte1["fraction_of_limit"] == pytest.approx(mte1["busy_fraction"], abs=1e-5)
    assert len(table["nearest"]) == 3 and set(table["nearest"]) <= set(RANKED)
    assert format_nearest(one_block)[0].startswith("  nearest their limits: " + table["nearest"][0])


def _ceiling(summary: dict, where: str) -> None:
    """Every resource and stage at most its limit, and every pipe at most its busy share."""
    table = summary["roofline"]
    groups = [("run", table["resources"])] + list((table["stages"] or {}).items())
    for stage, rows in groups:
        for name, row in rows.items():
            fraction = row["fraction_of_limit"]
            assert fraction is None or fraction <= 1 + TOLERANCE, f"{where}: {stage} {name} at {fraction}"
            if "busy_fraction" in row and fraction is not None:
                assert fraction <= row["busy_fraction"] + TOLERANCE, f"{where}: {name} beyond its busy share"


def _sweep_points() -> list[tuple[str, dict]]:
    """Every preset × build × tiling × preload of a small full-chip case (12 heads of two row blocks: every core at
    once, sharing the L2)."""
    axes = itertools.product(preset_names(), ("manual", "jit", "dsl"), (256, 512), (64, 128), (2, 4))
    return [(hw, {"kernel.build": build, "tiling.tile_s1": tile, "tiling.cube_s1": cube, "schedule.qk_preload": pre,
                  "case.s0": 256, "case.s1": 2048, "case.heads": 12, "numerics.enabled": False})
            for hw, build, tile, cube, pre in axes]


def test_ceiling_over_a_sweep() -> None:
    """No point of the sweep exceeds a limit (the model can never be faster than its own hardware)."""
    legal = 0
    for hw, overrides in _sweep_points():
        try:
            config = tfa_sim.load_config(overrides=overrides, hw=hw)
        except InputError:  # an illegal point: its rule refuses it
            continue
        legal += 1
        _ceiling(runner.compute(config).summary, f"{hw} {overrides}")
    assert legal == len(_sweep_points())  # all 96 are legal today; a rule that refuses some still leaves the rest


@pytest.mark.parametrize("case", sorted(p.stem for p in (CONFIG_DIR / "cases").glob("*.toml")))
def test_ceiling_of_the_shipped_cases(case: str) -> None:
    """The shipped cases, timing only, with the event log: every stage's figures are there and under the roof."""
    config = tfa_sim.load_config(case=case, overrides={"numerics.enabled": False})
    summary = runner.compute(config).summary
    assert summary["roofline"]["stages"]
    _ceiling(summary, case)


def test_without_the_event_log_or_folded() -> None:
    """No event log: the L2's and HBM's figures, each pipe's busy share, and why the rest is missing."""
    config = tfa_sim.load_config(overrides={"numerics.enabled": False, "case.s0": 2048, "case.s1": 8192})
    for fold in (False, True):
        summary = runner.compute(config, event_log=False, fold=fold).summary
        table = summary["roofline"]
        assert table["stages"] is None and ("--fold" if fold else "--no-event-log") in table["missing"]
        assert table["resources"]["gm.L2"]["work"] == summary["gm_bytes"]
        assert table["resources"]["cube.M"]["fraction_of_limit"] is None
        assert table["resources"]["vec.V"]["busy_fraction"] == summary["pipe_busy_mean"]["vec.V"]
        assert set(table["nearest"]) <= {"gm.L2", "gm.HBM"}
        assert "busy share only" in format_nearest(summary)[0]
        _ceiling(summary, f"fold={fold}")
    masked = tfa_sim.load_config(overrides={"numerics.enabled": False, "case.s0": 1024, "case.s1": 1024,
                                            "case.causal": True})
    summary = runner.compute(masked, event_log=False, fold=True).summary  # a mask is never folded
    assert summary["folded"].startswith("not folded") and "ran in full without (--fold keeps none): rerun without " \
        "--fold" in summary["roofline"]["missing"]


def test_work_labels_round_trip_and_older_logs(timing_run: Path, tmp_path: Path) -> None:
    """events.npz keeps the work labels; a log written before them reads back with none."""
    log = read_log(timing_run / "events.npz")
    labels = log.work_labels()
    assert labels and all(parse(text) for text in labels.values())
    with np.load(timing_run / "events.npz") as npz:
        old = {k: npz[k] for k in npz.files if not k.startswith("work_") and k != "table_works"}
    np.savez(tmp_path / "old.npz", **old)
    assert load_log((tmp_path / "old.npz").read_bytes()).work_labels() == {}


def test_command_writes_svg_png_html(timing_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tfa-sim roofline: the SVG into the run (a copy), -o .png and .html, each run's fractions printed."""
    run = tmp_path / "run"
    shutil.copytree(timing_run, run)
    assert main(["roofline", str(run)]) == 0
    text = (run / "roofline.svg").read_text()
    assert text.startswith("<svg") and "cube peak" in text and "compute_qk" in text
    assert "run: " in capsys.readouterr().out
    for suffix in (".png", ".html"):
        assert main(["roofline", str(run), str(timing_run), "-o", str(tmp_path / f"r{suffix}")]) == 0
        assert (tmp_path / f"r{suffix}").stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.png", "run"]  # no partial file left


def test_bad_input_one_line_exit_2(timing_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory that is not a run, a summary without a roofline table, a bad suffix: one line, exit 2, nothing
    written."""
    old = tmp_path / "old"
    shutil.copytree(timing_run, old)
    summary = json.loads((old / "summary.json").read_text())
    del summary["roofline"]
    (old / "summary.json").write_text(json.dumps(summary))
    for args, words in (([str(tmp_path / "nowhere")], "not found"), ([str(old)], "no roofline table"),
                        ([str(timing_run), str(old), "-o", str(tmp_path / "x.svg")], "rerun tfa-sim run"),
                        ([str(timing_run), "-o", str(tmp_path / "x.pdf")], ".svg, .png or .html")):
        assert main(["roofline", *args]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "x.svg").exists() and not (old / "roofline.svg").exists()


def test_docs_figure_is_generated() -> None:
    """docs/img/roofline.svg is what the command draws today for the docs' runs (rewrite it with
    ``python tests/test_roofline.py``)."""
    assert DOCS_FIGURE.read_text(encoding="utf-8") == docs_figure()


def docs_figure() -> str:
    """The docs' figure: the built-in case (one block) and the same at 4096² on the full chip, timing only."""
    runs = []
    for name, overrides in DOCS_RUNS.items():
        config = tfa_sim.load_config(overrides={"numerics.enabled": False, **overrides})
        runs.append((name, runner.compute(config).summary["roofline"]))
    return svg(chart(runs))


if __name__ == "__main__":
    DOCS_FIGURE.write_text(docs_figure(), encoding="utf-8")
    print(f"wrote {DOCS_FIGURE}")


def test_profile_sets_the_board_beside_the_model(tmp_path: Path) -> None:
    """tfa-sim profile: the board's fractions are the model's work over the board's task and pipe times, and
    roofline.svg holds the model's run, its stages and the board's point."""
    result = tfa_sim.profile(ROOT / "tests/data/msprof/a2_op_single", overrides={
        "case.s0": 512, "case.s1": 2048, "schedule.cv_fifo_cons_sync_period": 1, "kernel.build": "jit"},
        out=tmp_path / "p")
    report = result.report
    board, task_us, model_us = report["roofline"], report["task_duration_us"], report["model_us"]
    for name in ("vec.V", "cube.MTE2", "cube.M"):
        row = board["resources"][name]
        assert row["board_fraction"] == pytest.approx(row["model_fraction"] * model_us / task_us, rel=1e-4)
        assert row["board_while_busy"] == pytest.approx(
            row["model_fraction"] * model_us / report["pipes"][name]["board_us"], rel=1e-4)
        assert row["model_while_busy"] <= 1 + TOLERANCE and row["board_while_busy"] <= 1 + TOLERANCE
    text = (tmp_path / "p" / "roofline.svg").read_text()
    assert "board: run (cube)" in text and "model: compute_qk" in text
