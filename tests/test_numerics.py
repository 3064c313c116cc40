"""The numerics contract: defined orders and rounding, checked against independent scalar code."""
from __future__ import annotations

import numpy as np
import pytest

from tfa_sim.numerics import rounding as nx

F32 = np.float32


def scalar_row_sum(row):
    """The documented order written with Python loops over fp32 scalars."""
    vals = [F32(v) for v in row]
    chunks = []
    for c0 in range(0, len(vals), 64):
        chunk = vals[c0:c0 + 64] + [F32(0)] * (64 - len(vals[c0:c0 + 64]))
        while len(chunk) > 1:
            h = len(chunk) // 2
            chunk = [F32(chunk[i] + chunk[i + h]) for i in range(h)]
        chunks.append(chunk[0])
    acc = chunks[0]
    for c in chunks[1:]:
        acc = F32(acc + c)
    return acc


@pytest.mark.parametrize("cols", [64, 96, 256, 320])
def test_row_sum_order(cols):
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((3, cols)) * 10 ** rng.uniform(-3, 3, (3, cols))).astype(F32)
    got = nx.row_sum(x)
    want = np.array([scalar_row_sum(r) for r in x], F32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (got, want)


def test_matmul_is_sequential_fp32():
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((4, 40)) * 30).astype(np.float16)
    b = (rng.standard_normal((40, 3)) * 30).astype(np.float16)
    want = np.zeros((4, 3), F32)
    for i in range(4):
        for j in range(3):
            acc = F32(0)
            for k in range(40):
                acc = F32(acc + F32(a[i, k]) * F32(b[k, j]))
            want[i, j] = acc
    got = nx.matmul_f16(a, b)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_fp16_cast_rounds_to_nearest_even():
    one_ulp = F32(2.0 ** -10)  # fp16 ulp at 1.0
    x = np.array([1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 65519.0, 65520.0, 2.0 ** -25, 3 * 2.0 ** -26], F32)
    got = nx.to_fp16(x).astype(np.float64)
    assert got.tolist() == [1.0, 1 + 2 * 2.0 ** -10, 65504.0, np.inf, 0.0, 2.0 ** -24]


def test_exp_special_values():
    x = np.array([0.0, -0.0, -104.5, -1e30, -np.inf, 89.0, np.inf, np.nan, np.log(2.0)], F32)
    got = nx.exp_tfa(x)
    assert got[:2].tolist() == [1.0, 1.0]
    assert got[2:5].tolist() == [0.0, 0.0, 0.0]
    assert np.isinf(got[5]) and np.isinf(got[6]) and np.isnan(got[7])
    assert got[8] == F32(2.0)
