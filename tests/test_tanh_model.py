"""The tanh model: measured ULP error against correctly rounded tanh, and the native copy's bits.

The reference is float64 ``np.tanh`` rounded once to fp32 (correctly rounded
except in vanishingly rare double-rounding cases).  The dense samples run on
the native copy (``native_tanh``, ~50× faster than numpy); that copy equals
``numerics.tanh_tfa`` bit for bit, which this file asserts on a subset of the
same samples and on sweeps across every branch boundary.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_native_kernels import assert_bits_equal, bits_range, f32_bits_of, f32_from_bits

from tfa_sim.backends.native_backend import native_tanh
from tfa_sim.numerics import rounding as nx

F32 = np.float32
CHUNK = 1 << 22


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between fp32 arrays (monotone keys: ±0 are 1 apart)."""
    def key(v: np.ndarray) -> np.ndarray:
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF) - 1, i)
    return np.abs(key(a) - key(b))


def both_signs(lo_bits: int, hi_bits: int, step: int) -> np.ndarray:
    """Every ``step``-th bit pattern from ``lo_bits`` to ``hi_bits``, positive and negative."""
    pos = np.arange(lo_bits, hi_bits + 1, step, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([pos, pos | np.uint32(0x80000000)]).view(F32)


SAMPLES = {  # the fp32 range that matters for softcap: v = x·s/c is rarely beyond ±20
    "every_61st_pattern_in_[-20,20]": (0, f32_bits_of(20.0), 61, 0.995),
    "every_23rd_pattern_in_[-1,1]": (0, f32_bits_of(1.0), 23, 0.995),
}


@pytest.mark.parametrize("sample", SAMPLES.values(), ids=SAMPLES.keys())
def test_tanh_model_ulp_bound(sample):
    lo, hi, step, min_exact = sample
    x = both_signs(lo, hi, step)
    worst, exact = 0, 0
    for i in range(0, x.size, CHUNK):
        xs = x[i:i + CHUNK]
        got = native_tanh(xs)
        if i % (8 * CHUNK) == 0:  # the fast copy is the model: check on every 8th chunk
            assert_bits_equal(got[::31], nx.tanh_tfa(xs[::31]), "native_tanh vs numerics.tanh_tfa")
        d = ulp_distance(got, np.tanh(xs.astype(np.float64)).astype(F32))
        assert d.max() <= nx.TANH_MAX_ULP, f"{d.max()} ULP at x={xs[np.argmax(d)]!r}, bound {nx.TANH_MAX_ULP}"
        worst, exact = max(worst, int(d.max())), exact + int(np.count_nonzero(d == 0))
    assert exact / x.size >= min_exact, f"exactly rounded for only {exact / x.size:.4%} of {x.size} values"


def test_tanh_hand_values():
    x = f32_from_bits([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x7F800000, 0xFF800000,
                       0x7FA12345, 0xFFC00000]).copy()
    got = nx.tanh_tfa(x)
    assert got.view(np.uint32)[:4].tolist() == [0, 0x80000000, 1, 0x80000001], "±0 and subnormals are tanh(x) = x"
    assert got[4:6].tolist() == [1.0, -1.0]
    assert got.view(np.uint32)[6:].tolist() == [0x7FA12345, 0xFFC00000], "NaN passes through untouched"
    assert nx.tanh_tfa(np.array([0.5, -0.5, 1.0, 9.5, 20.0], F32)).tolist() == [
        F32(0.46211715726000974), F32(-0.46211715726000974), F32(0.7615941559557649), 1.0, 1.0]
    assert nx.tanh_tfa(np.array([9.0], F32))[0] == F32(1 - 2.0 ** -24), "tanh(9) is still below 1 in fp32"


def test_tanh_is_odd_bit_for_bit():
    x = bits_range(0.0, 30.0, 7919)
    assert np.array_equal(nx.tanh_tfa(-x).view(np.uint32), nx.tanh_tfa(x).view(np.uint32) ^ np.uint32(0x80000000))


TANH_SWEEPS = {
    "dense_-30_to_30_stride_409": (-30.0, 30.0, 409),
    "every_bit_near_branch_0.625": (0.62, 0.63, 1),
    "every_bit_near_-0.625": (-0.63, -0.62, 1),
    "every_bit_near_saturation_9.01": (9.0, 9.02, 1),
    "every_bit_near_cutoff_10": (9.99, 10.01, 1),
    "tiny_-2e-10_to_2e-10_stride_4099": (-2.0 ** -10, 2.0 ** -10, 4099),
}


@pytest.mark.parametrize("sweep", TANH_SWEEPS.values(), ids=TANH_SWEEPS.keys())
def test_tanh_native_sweep_bits(sweep):
    x = bits_range(*sweep)
    assert 1000 < x.size < 10_000_000
    assert_bits_equal(native_tanh(x), nx.tanh_tfa(x), f"tanh_tfa on {x.size} values in [{sweep[0]}, {sweep[1]}]")


def test_tanh_native_special_values():
    x = f32_from_bits([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                       0x7FA12345, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, f32_bits_of(nx.MASK_VALUE),
                       f32_bits_of(44.5), f32_bits_of(-1e30), f32_bits_of(0.625), f32_bits_of(10.0)])
    assert_bits_equal(native_tanh(x), nx.tanh_tfa(x), "tanh_tfa specials")
