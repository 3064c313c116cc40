"""Measured ULP error of the exp model against correctly rounded exp over the softmax range."""
from __future__ import annotations

import numpy as np

from tfa_sim.numerics.rounding import EXP_MAX_ULP, exp_tfa


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between non-negative fp32 arrays."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_exp_model_ulp_bound_over_softmax_range():
    # Softmax feeds exp with (x − max)·s ≤ 0; every 61st fp32 bit pattern in [-104, 0]
    # (≈ 18 M values) plus every 11th value in [-1, 0].
    neg = np.arange(0x80000000, 0xC2D00001, 61, dtype=np.uint64).astype(np.uint32).view(np.float32)
    small = np.arange(0x80000000, 0xBF800001, 11, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for x in (neg[neg >= -104], small):
        # float64 exp rounded once to fp32 is the correctly rounded result except in
        # astronomically rare double-rounding cases.
        ref = np.exp(x.astype(np.float64)).astype(np.float32)
        d = ulp_distance(exp_tfa(x), ref)
        assert d.max() <= EXP_MAX_ULP, f"max ULP {d.max()} at x={x[np.argmax(d)]!r}, bound {EXP_MAX_ULP}"
    assert d.mean() < 0.05, f"mean ULP {d.mean()} — the model should be correctly rounded almost everywhere"
