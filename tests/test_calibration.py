"""The shipped presets against the measured kernel times and the library's stage costs (docs/calibration.md)."""
from __future__ import annotations

import numpy as np
import pytest

from tfa_sim.calibrate import LIBRARY_STAGE_COSTS, load_points, predict, stage_costs
from tfa_sim.config import build_config
from tfa_sim.hardware import load_hardware, preset_names


def presets():
    return {n: load_hardware(build_config({"hardware": {"preset": n}}).hardware) for n in preset_names()}


def test_shipped_presets_predict_measured_times():
    points = load_points()
    assert len(points) == 11
    measured = np.array([p.time_us for p in points])
    error = (np.array(predict(points, presets())) - measured) / measured
    table = "\n".join(f"{p.preset} cores={p.cores} s0={p.s0} s1={p.s1}: {e:+.1%}" for p, e in zip(points, error))
    assert np.mean(np.abs(error)) <= 0.15, f"MAPE {np.mean(np.abs(error)):.1%}\n{table}"
    assert np.max(np.abs(error)) <= 0.30, f"max error {np.max(np.abs(error)):.1%}\n{table}"


@pytest.mark.parametrize("stage", ["compute_qk", "compute_p"])
def test_fitted_stage_costs_match_the_library_model(stage):
    costs = stage_costs(presets()["910b2"])
    assert costs[stage] == pytest.approx(LIBRARY_STAGE_COSTS[stage], rel=0.15), costs


def test_stage_costs_follow_the_cost_formulas():
    """compute_qk per logical tile = 2 × (K load + extract + matmul + store), from the preset's numbers."""
    hw = presets()["910b2"]
    move, lat = hw.move, hw.gm.latency
    k_bytes, out_bytes = 128 * 128 * 2, 128 * 128 * 4
    per_sub = (k_bytes / move.gm_to_l1 + lat + 128 * 128 * 2 / move.l1_to_l0a
               + k_bytes / move.l1_to_l0b + 8 * 8 * 8 + hw.cube.matmul_overhead
               + out_bytes / move.l0c_to_gm + lat)
    q_load = (128 * 128 * 2 / move.gm_to_l1 + lat) / 16  # once per block of 16 tiles
    assert stage_costs(hw)["compute_qk"] == pytest.approx(2 * per_sub + q_load, rel=1e-9)
