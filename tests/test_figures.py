"""Figures that cannot crash on their data (issue 49): tfa_sim/views/figures.py on hostile numbers (NaN, ±inf, None,
negative spreads, empty), and every figure of every command fed such numbers through it — the profile's bar chart,
the timelines (PNG, SVG, HTML), the sweep's heatmap and preload plot, the tune's landscape — drawn without an
exception, the absent values left out and no whisker negative."""
from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest
from conftest import TIMING_SMALL

from tfa_sim.explore.sweep.plots import draw
from tfa_sim.explore.tune.report import landscape_png
from tfa_sim.rundir.outputs import read_summary
from tfa_sim.views import figures
from tfa_sim.views.gantt import Bar, RunView
from tfa_sim.views.profile import figure as profile_figure
from tfa_sim.views.svg_timeline import svg_text
from tfa_sim.views.timeline import figure as timeline_figure
from tfa_sim.views.timeline import render

NAN, INF = math.nan, math.inf
#: Values a derived number can come out as, none of them drawable.
HOSTILE = [None, NAN, INF, -INF, "12", True, object(), 10 ** 400, np.float64(NAN)]


def png(fig) -> bytes:
    """The figure drawn to PNG bytes (drawing is where matplotlib checks what it was given)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    return buf.getvalue()


# --- the helper itself ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", HOSTILE)
def test_anything_but_a_finite_number_is_absent(value):
    assert figures.finite(value) is None
    assert figures.label(value) == figures.ABSENT


@pytest.mark.parametrize("value, want", [(3, 3.0), (-2.5, -2.5), (np.float32(1.5), 1.5), (0, 0.0), (1e308, 1e308)])
def test_finite_numbers_are_kept_as_floats(value, want):
    assert figures.finite(value) == want and isinstance(figures.finite(value), float)


def test_a_whisker_is_never_negative():
    """The profile's crash: 20 equal cores whose mean came out a rounding above (or below) its min and max."""
    core = 15.199299114933792
    mean = math.fsum([core] * 20) / 20
    assert mean < core  # the rounding the model's figures have: mean − min < 0
    assert figures.whisker(mean, core, core) == (0.0, core - mean)
    assert figures.whisker(5.0, 7.0, 3.0) == (0.0, 0.0)  # min above the mean, max below it: no whisker at all
    assert figures.whisker(5.0, 4.0, 8.0) == (1.0, 3.0)
    for low, high in [(NAN, 8.0), (None, INF), (-INF, NAN)]:
        below, above = figures.whisker(5.0, low, high)
        assert below == 0.0 and above == (3.0 if high == 8.0 else 0.0)
    assert figures.whisker(NAN, 1.0, 2.0) == figures.whisker(None, 1.0, 2.0) == (0.0, 0.0)


def test_bars_leave_out_what_cannot_be_drawn():
    items = [(0, 2.0, 1.0, 3.0), (1, NAN, 1.0, 2.0), (2, INF, 0, 1), (NAN, 1.0, 0, 2), (4, None, None, None),
             (5, 1.0, 1.5, 0.5), (6, 0.0, -INF, INF)]
    positions, lengths, errors = figures.bars(items)
    assert positions == [0.0, 5.0, 6.0] and lengths == [2.0, 1.0, 0.0]
    assert errors == [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    assert figures.bars([]) == ([], [], [[], []])


def test_points_spans_grids_and_limits():
    assert figures.points([(1, 2.0), (2, NAN), ("a", 3), (None, 1.0), (NAN, 1.0), (3, INF)]) == ([1, "a"], [2.0, 3.0])
    assert figures.span(1.0, 3.5) == (1.0, 2.5)
    assert [figures.span(a, b) for a, b in [(2, 2), (3, 1), (NAN, 1), (0, INF), (-1e308, 1e308)]] == [None] * 5
    cells = figures.grid([[1, NAN, None], [INF], []])
    assert cells.shape == (3, 3) and cells[0, 0] == 1.0 and np.isnan(cells[0, 1:]).all()
    assert np.isnan(cells[1:]).all() and figures.grid([]).shape == (0, 0)
    assert figures.limits(None, NAN) == (0.0, 1.0)
    assert figures.limits(3.0, 1.0) == (1.0, 3.0)
    low, high = figures.limits(5.0, 5.0)
    assert low < 5.0 < high and math.isfinite(low) and math.isfinite(high)
    assert figures.limits(INF, 2.0)[0] < 2.0 < figures.limits(INF, 2.0)[1]


# --- every figure of every command ---------------------------------------------------------------------------------

def hostile_report() -> dict:
    """profile.json as compare() makes it, with every figure hostile somewhere: equal cores a rounding off their
    mean, NaN and infinite values, a missing board, a ratio that is not a number."""
    core = 15.199299114933792
    mean = math.fsum([core] * 20) / 20
    pipes = {
        "cube.M": {"board_us": 9.5, "board_min_us": 9.7, "board_max_us": 9.4, "model_us": mean,
                   "model_min_us": core, "model_max_us": core, "ratio": 9.5 / mean, "note": ""},
        "cube.MTE1": {"board_us": NAN, "board_min_us": None, "board_max_us": None, "model_us": 2.0,
                      "model_min_us": NAN, "model_max_us": INF, "ratio": NAN, "note": ""},
        "cube.MTE2": {"board_us": INF, "board_min_us": 1.0, "board_max_us": 2.0, "model_us": None,
                      "model_min_us": None, "model_max_us": None, "ratio": INF, "note": "the model never uses it"},
        "vec.V": {"board_us": None, "board_min_us": None, "board_max_us": None, "model_us": 3.0,
                  "model_min_us": 3.0 + 1e-15, "model_max_us": 3.0 - 1e-15, "ratio": None,
                  "note": "not in the profile"},
    }
    return {"pipes": pipes, "op_name": "op", "case": "case", "hardware": "910b2", "task_duration_us": NAN,
            "model_us": None}


def test_the_profile_chart_draws_hostile_figures(monkeypatch):
    drawn: list[dict] = []
    original = figures.bars

    def recording(items):
        out = original(items)
        drawn.append({"lengths": out[1], "errors": out[2]})
        return out

    monkeypatch.setattr("tfa_sim.views.profile.bars", recording)
    fig = profile_figure(hostile_report())
    assert png(fig).startswith(b"\x89PNG")
    board, model = drawn
    assert board["lengths"] == [9.5] and model["lengths"] == pytest.approx([15.199299114933792, 2.0, 3.0])
    assert all(e >= 0 for side in (board, model) for errs in side["errors"] for e in errs)
    bars = [p for p in fig.axes[0].patches if p.get_width() > 0 or p.get_height() > 0]
    assert len(bars) == 4  # 1 board bar and 3 model bars: the NaN, infinite and missing values are not drawn


@pytest.fixture(scope="module")
def run_summary(tmp_path_factory):
    """A real run's summary.json (the timeline's titles read its config)."""
    from tfa_sim import cli

    out = tmp_path_factory.mktemp("figures") / "run"
    assert cli.main(["run", *TIMING_SMALL, "--no-event-log", "--out", str(out)]) == 0
    return read_summary(out)


def hostile_view(summary: dict, total_cycles: float) -> RunView:
    bars = [Bar("core0.cubecore0 M", 10.0, 50.0, "compute_qk", 0, "ok"),
            Bar("core0.cubecore0 M", 60.0, NAN, "compute_qk", 1, "NaN end"),
            Bar("core0.cubecore0 M", -INF, 70.0, "compute_pv", 2, "no start"),
            Bar("core0.veccore0 V", 80.0, 80.0, "compute_p", 0, "no length"),
            Bar("core0.veccore0 V", 90.0, 40.0, "compute_p", 1, "backwards"),
            Bar("core0.veccore0 V", 100.0, INF, "compute_gu", 0, "endless"),
            Bar("core0.veccore0 V", 55.0, 95.0, "compute_gu", 1, "ok")]
    arrows = [("core0.cubecore0 M", 50.0, "core0.veccore0 V", 55.0), ("core0.cubecore0 M", NAN,
                                                                         "core0.veccore0 V", 55.0)]
    return RunView("hostile", {**summary, "total_cycles": total_cycles}, ["core0.cubecore0 M", "core0.veccore0 V"],
                   bars, arrows)


@pytest.mark.parametrize("total", [NAN, INF, 120.0], ids=["NaN makespan", "infinite makespan", "makespan"])
def test_the_timelines_draw_hostile_bars(run_summary, tmp_path, total):
    view = hostile_view(run_summary, total)
    assert [b.text for b in view.bars] == ["ok", "ok"] and len(view.arrows) == 1
    assert png(timeline_figure([view], arrows=True)).startswith(b"\x89PNG")
    svg = svg_text([view], arrows=True)
    assert len(re.findall(r'<rect class="bar"', svg)) == 2 and "nan" not in svg.lower() and "inf" not in svg
    render([view], tmp_path / "t.html")
    assert (tmp_path / "t.html").stat().st_size > 0
    empty = RunView("empty", {**run_summary, "total_cycles": total}, ["core0.cubecore0 M"],
                    [Bar("core0.cubecore0 M", NAN, NAN, "compute_qk", 0, "")], [])
    assert png(timeline_figure([empty])).startswith(b"\x89PNG") and "<svg" in svg_text([empty])


def sweep_rows(values: list) -> list[dict]:
    """Sweep results over preload × tile_s1 × s1 whose metric is ``values`` in turn (NaN, inf… among them)."""
    rows = []
    cells = [(p, t, s) for s in (1024, 2048) for t in (128, 256) for p in (2, 4)]
    for (preload, tile, s1), value in zip(cells, values):
        rows.append({"status": "ok", "overrides": {"schedule.qk_preload": preload, "tiling.tile_s1": tile,
                                                   "case.s1": s1}, "time_us": value})
    return rows


@pytest.mark.parametrize("values", [[NAN, 3.0, INF, 2.0, 5.0, -INF, 1.0, 4.0], [NAN] * 8, [INF] * 8,
                                    [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]],
                         ids=["mixed", "all NaN", "all infinite", "flat"])
def test_the_sweep_plots_draw_hostile_metrics(tmp_path, values):
    records = draw(tmp_path, sweep_rows(values), ["schedule.qk_preload", "tiling.tile_s1", "case.s1"], "time_us")
    assert [r["file"] for r in records] == [str(tmp_path / "heatmap.png"), str(tmp_path / "plot_preload.png")]
    for record in records:
        assert (tmp_path / record["file"]).read_bytes().startswith(b"\x89PNG")


def tune_summary(estimates: list, best: float, default: float) -> dict:
    """tune.json's fields the landscape reads, the estimates and metrics hostile where asked."""
    values = [2, 3, 4]
    candidates = [{"overrides": {"schedule.qk_preload": v}, "estimate": e, "status": "ok", "time_us": e}
                  for v, e in zip(values * 2, estimates)]
    return {"best": {"overrides": {"schedule.qk_preload": 3}, "metric": best}, "metric": "time_us",
            "defaults": {"status": "ok", "config": {"schedule": {"qk_preload": 4}}, "metric": default},
            "axes": {"schedule.qk_preload": values}, "candidates": candidates, "case": "c", "hardware": "910b2"}


@pytest.mark.parametrize("estimates, best, default", [([NAN, 1.0, INF, None, -INF, 2.0], 1.0, NAN),
                                                      ([NAN] * 6, INF, None), ([1.0] * 6, 1.0, 1.0)],
                         ids=["mixed", "nothing finite", "flat"])
def test_the_tune_landscape_draws_hostile_values(estimates, best, default):
    assert landscape_png(tune_summary(estimates, best, default)).startswith(b"\x89PNG")
