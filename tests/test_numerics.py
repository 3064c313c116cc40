"""The numerics contract: defined orders and rounding, checked against independent scalar code."""
from __future__ import annotations

import numpy as np
import pytest

from tfa_sim.numerics import rounding as nx

F32 = np.float32


def scalar_row_sum(row):
    """The documented order written with Python loops over fp32 scalars: from +0, left to right (pto-spec's
    TROWSUM column order)."""
    acc = F32(0)
    for v in row:
        acc = F32(acc + F32(v))
    return acc


@pytest.mark.parametrize("cols", [1, 64, 96, 256, 320])
def test_row_sum_order(cols):
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((3, cols)) * 10 ** rng.uniform(-3, 3, (3, cols))).astype(F32)
    x[2, :] = -0.0  # a row of −0: the sum from +0 is +0
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


# --------------------------------------------------------------------------- the two references' rules

def scalar_chain(a, b, start):
    """One matmul chain written with Python loops over fp32 scalars: acc = start[i, j], then + a·b over k."""
    out = np.array(start, F32, copy=True)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = out[i, j]
            for k in range(a.shape[1]):
                acc = F32(acc + F32(a[i, k]) * F32(b[k, j]))
            out[i, j] = acc
    return out


def test_tmatmul_acc_continues_the_chain_for_npu_and_adds_a_fresh_one_for_cpu_sim():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 24)) * 30).astype(np.float16)
    b = (rng.standard_normal((24, 4)) * 30).astype(np.float16)
    acc = (rng.standard_normal((3, 4)) * 1e4).astype(F32)
    npu = nx.matmul(a, b, acc)
    assert np.array_equal(npu.view(np.uint32), scalar_chain(a, b, acc).view(np.uint32))
    fresh = scalar_chain(a, b, np.zeros((3, 4), F32))
    assert np.array_equal(nx.matmul_add(a, b, acc).view(np.uint32), (acc + fresh).view(np.uint32))
    # pto-spec's continuation over two sub-tiles is one chain over both; CPU_SIM's two chains are not
    p = rng.random((3, 256)).astype(np.float16)
    v = (rng.standard_normal((256, 4)) * 3).astype(np.float16)
    whole = nx.matmul(p, v)
    per_sub = nx.matmul(p[:, 128:], v[128:], nx.matmul(p[:, :128], v[:128]))
    assert np.array_equal(per_sub.view(np.uint32), whole.view(np.uint32))
    two_chains = nx.matmul_add(p[:, 128:], v[128:], nx.matmul(p[:, :128], v[:128]))
    assert not np.array_equal(two_chains.view(np.uint32), whole.view(np.uint32)), "the data must tell them apart"


def scalar_std_max_row(row):
    """CPU_SIM's TROWMAX: m = row[0]; m = std::max(m, x) = (m < x) ? x : m."""
    m = F32(row[0])
    for x in row[1:]:
        m = F32(x) if m < x else m
    return m


def test_cpu_sim_max_rules_keep_the_first():
    nan = F32(np.nan)
    rows = np.array([[-0.0, 0.0, -1.0], [0.0, -0.0, -3.0], [nan, 5.0, 1.0], [1.0, nan, 7.0], [-2.0, 3.0, 3.0],
                     [-5.0, -0.0, 0.0]], F32)
    got = nx.row_max_first(rows)
    want = np.array([scalar_std_max_row(r) for r in rows], F32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (got, want)
    assert got.view(np.uint32)[0] == 0x80000000 and got[3] == 7.0 and np.isnan(got[2])
    a, b = np.array([-0.0, 0.0, nan, 1.0, 2.0], F32), np.array([0.0, -0.0, 1.0, nan, 3.0], F32)
    assert np.array_equal(nx.maximum_first(a, b).view(np.uint32),
                          np.array([-0.0, 0.0, nan, 1.0, 3.0], F32).view(np.uint32))


def test_cpu_sim_exp_is_the_double_exp_rounded_once():
    import math

    from tfa_sim.backends.native_backend import native_exp

    rng = np.random.default_rng(6)
    x = np.concatenate([rng.uniform(-104, 89, 2000), rng.uniform(-1, 0, 2000)]).astype(F32)
    want = np.array([F32(math.exp(float(v))) for v in x], F32)
    got = nx.exp_cpu_sim(x)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    sweep = np.arange(0x80000000, 0xC2D00001, 4099, dtype=np.uint64).astype(np.uint32).view(F32)  # [−104, −0]
    sweep = np.concatenate([sweep, np.array([0.0, 89.0, 100.0, -200.0, np.inf, -np.inf, np.nan], F32)])
    assert np.array_equal(native_exp(sweep, "cpu_sim").view(np.uint32), nx.exp_cpu_sim(sweep).view(np.uint32))


def test_softmax_scale_is_the_kernels_constexpr_inv_sqrt():
    for head in (16, 64, 96, 112, 128, 256):
        g = F32(head)
        for _ in range(8):
            g = F32(F32(0.5) * F32(g + F32(F32(head) / g)))
        assert nx.softmax_scale(head) == F32(F32(1) / g)
    assert nx.softmax_scale(128) == F32(1 / np.sqrt(128)) and nx.softmax_scale(64) == F32(0.125)
    assert nx.softmax_scale(112) == np.nextafter(F32(1 / np.sqrt(112)), F32(0))  # one ULP below at HEAD 112


def test_kernel_cube_k_is_calculate_fitting_cube_k():
    assert nx.kernel_cube_k(128, 128, 128) == 128 and nx.kernel_cube_k(128, 128, 64) == 64  # QK, HEAD 64
    assert nx.kernel_cube_k(128, 64, 128) == 128 and nx.kernel_cube_k(128, 128, 96) == 96
    assert nx.kernel_cube_k(128, 256, 128) == 64 and nx.kernel_cube_k(64, 256, 128) == 64
    assert nx.kernel_cube_k(64, 64, 512) == 256 and nx.kernel_cube_k(512, 512, 512) == 32
    assert nx.panels(256, 128) == [slice(0, 128), slice(128, 256)] and nx.panels(96, 128) == [slice(0, 96)]
