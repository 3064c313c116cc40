"""sweep-report on synthetic result sets: one panel per shape, labels readable on every cell colour,
speed-ups from the recorded reference rows (nothing is simulated)."""
from __future__ import annotations

import itertools
import json

import matplotlib
from hypothesis import example, given
from hypothesis import strategies as st
from test_sweep import run_main

from tfa_sim.explore.sweep import point_key, sweep_report
from tfa_sim.explore.sweep.plots import label_color
from tfa_sim.explore.sweep.schema import SCHEMA

AXES = ["tiling.tile_s1", "schedule.qk_preload", "case.s1"]


def ok_row(overrides: dict, time_us: float) -> dict:
    config = {s: dict(v) for s, v in SCHEMA.items()}
    for dotted, value in overrides.items():
        section, key = dotted.split(".")
        config[section][key] = value
    config["numerics"]["enabled"] = False
    return {"key": point_key(config), "overrides": overrides, "status": "ok",
            "config": config, "time_us": time_us, "total_cycles": time_us * 1800, "tflops": 1 / time_us,
            "normalized_tflops": 1 / time_us, "bound_pipe": "cube.M", "l1_bytes": 1000, "ub_bytes": 2000}


def sweep_dir(path, rows, references=(), axes=AXES):
    path.mkdir()
    (path / "sweep.json").write_text(json.dumps({"metric": "time_us", "axes": axes}))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "references.jsonl").write_text("".join(json.dumps(r) + "\n" for r in references))
    return path


#: tile_s1 128 wins at S1 1024, tile_s1 256 at S1 2048; preload 3 costs one µs everywhere
SWAP = {(128, 1024): 10.0, (256, 1024): 20.0, (128, 2048): 40.0, (256, 2048): 30.0}


def swap_rows():
    return [ok_row({"tiling.tile_s1": t, "schedule.qk_preload": p, "case.s1": s1}, SWAP[t, s1] + (p == 3))
            for (t, s1), p in itertools.product(SWAP, (2, 3))]


def test_a_tiling_that_wins_at_one_s1_only_is_best_in_its_own_panel_only(tmp_path):
    report = sweep_report(sweep_dir(tmp_path / "swap", swap_rows()))
    plots = {p["file"].rsplit("/", 1)[1]: p["panels"] for p in report["plots"]}
    assert set(plots) == {"heatmap.png", "plot_preload.png"}
    for panels in plots.values():
        assert [p["title"] for p in panels] == ["s1 = 1024", "s1 = 2048"]
        assert [p["best"]["overrides"]["tiling.tile_s1"] for p in panels] == [128, 256]
        assert [p["best"]["overrides"]["schedule.qk_preload"] for p in panels] == [2, 2]
        assert [p["best"]["value"] for p in panels] == [10.0, 30.0]
    for name in plots:
        assert (tmp_path / "swap" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "swap").glob("*.partial"))


def test_every_varied_shape_axis_gets_its_own_panels(tmp_path):
    rows = [ok_row({"hardware.preset": chip, "case.s1": s1, "tiling.tile_s1": t, "schedule.qk_preload": p},
                   10.0 * (1 + (chip == "910b4")) * s1 / 1024 / t)
            for chip, s1, t, p in itertools.product(("910b1", "910b4"), (1024, 2048), (128, 256), (2, 3))]
    report = sweep_report(sweep_dir(tmp_path / "chips", rows, axes=["hardware.preset", "case.s1",
                                                                      "tiling.tile_s1", "schedule.qk_preload"]))
    for plot in report["plots"]:
        assert [p["title"] for p in plot["panels"]] == [f"preset = {c}, s1 = {s}" for c in ("910b1", "910b4")
                                                        for s in (1024, 2048)]


def test_speedups_come_from_the_recorded_reference_rows(tmp_path):
    refs = [ok_row({"case.s1": 1024}, 50.0), ok_row({"case.s1": 2048}, 60.0)]
    out = sweep_dir(tmp_path / "refs", swap_rows(), refs)
    code, stdout, err = run_main("sweep-report", out, "--no-plots")
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert [(s["default_metric"], s["speedup"]) for s in report["shapes"]] == [(50.0, 5.0), (60.0, 2.0)]
    assert "5.00× vs the kernel defaults (50)" in stdout and "2.00× vs the kernel defaults (60)" in stdout
    assert report["plots"] == []


def test_without_a_reference_row_the_report_says_so(tmp_path):
    code, stdout, err = run_main("sweep-report", sweep_dir(tmp_path / "none", swap_rows()), "--no-plots")
    assert code == 0 and stdout.count("no default to compare (no reference point recorded") == 2, stdout


def _contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def _luminance(rgb) -> float:
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


@given(st.tuples(*[st.floats(0, 1)] * 3))
@example((0.3232596549731391, 0.42083324568653524, 0.8876651778750289))  # luminance 0.17905: white, by a hair
def test_cell_labels_take_the_text_colour_of_higher_contrast(rgb):
    """For every cell colour, the label colour contrasts at least as much as the other choice (WCAG)."""
    cell = _luminance(rgb)
    black, white = _contrast(cell, 0.0), _contrast(cell, 1.0)
    chosen = label_color((*rgb, 1.0))
    assert chosen == ("black" if black > white else "white") or abs(black - white) < 1e-9


def test_viridis_ends_get_readable_labels():
    viridis = matplotlib.colormaps["viridis"]
    assert label_color(viridis(1.0)) == "black"  # yellow: white text was unreadable
    assert label_color(viridis(0.0)) == "white"  # dark purple


def test_ties_rank_in_the_sweeps_own_order_whatever_order_the_rows_arrived_in(tmp_path):
    """Two tilings of equal time: the one the file lists first ranks first, with the rows written in either order
    (parallel workers append them as they finish)."""
    rows = [ok_row({"tiling.tile_s1": t, "schedule.qk_preload": 2}, 10.0) for t in (512, 128)]
    axes = [["tiling.tile_s1", [512, 128]], ["schedule.qk_preload", [2]]]
    reports = []
    for name, order in (("as_listed", rows), ("reversed", rows[::-1])):
        path = sweep_dir(tmp_path / name, order, axes=[a for a, _ in axes])
        meta = json.loads((path / "sweep.json").read_text())
        (path / "sweep.json").write_text(json.dumps({**meta, "definition": {"axes": axes}}))
        reports.append(sweep_report(path, plots=False))
    ranked = [[r["overrides"]["tiling.tile_s1"] for r in rep["shapes"][0]["ranked"]] for rep in reports]
    assert ranked == [[512, 128], [512, 128]]
    assert reports[0]["shapes"] == reports[1]["shapes"]
