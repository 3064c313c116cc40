"""The native C kernels are bit-identical to NumpyBackend / numerics on every tensor.

Every comparison is on bit patterns (uint16/uint32 views), so signed zeros,
subnormals and NaN payloads count.  The ``libm`` exp model is the one documented
exception: it is compared within a small ULP tolerance only.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfa_sim.backends import get_backend
from tfa_sim.backends.native_backend import (
    NativeBackend,
    native_exp,
    native_narrow,
    native_row_sum,
    native_to_fp16,
)
from tfa_sim.backends.numpy_backend import NumpyBackend
from tfa_sim.numerics import rounding as nx
from tfa_sim.spec.errors import InputError

F16 = np.float16
F32 = np.float32
UINT = {2: np.uint16, 4: np.uint32}


def assert_bits_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """``got`` has the dtype, shape and bit pattern of ``want``; else say where it differs."""
    assert got.dtype == want.dtype, f"{what}: expected dtype {want.dtype}, got {got.dtype}"
    assert got.shape == want.shape, f"{what}: expected shape {want.shape}, got {got.shape}"
    g = np.ascontiguousarray(got).view(UINT[got.itemsize]).ravel()
    w = np.ascontiguousarray(want).view(UINT[want.itemsize]).ravel()
    bad = np.flatnonzero(g != w)
    if bad.size:
        i = bad[0]
        idx = np.unravel_index(i, want.shape) if want.ndim else ()
        raise AssertionError(
            f"{what}: {bad.size} of {w.size} values differ; first at index {tuple(int(v) for v in idx)}: "
            f"expected {want.ravel()[i]!r} (0x{int(w[i]):0{2 * want.itemsize}x}), "
            f"got {got.ravel()[i]!r} (0x{int(g[i]):0{2 * got.itemsize}x})")


def assert_presult_equal(got, want, what: str) -> None:
    for field in want._fields:
        assert_bits_equal(getattr(got, field), getattr(want, field), f"{what}.{field}")


@pytest.fixture(scope="module", params=nx.REFERENCES)
def reference(request) -> str:
    """Every kernel test runs for both references (numerics.reference): numpy and C agree in each."""
    return request.param


@pytest.fixture(scope="module")
def numpy_backend(reference) -> NumpyBackend:
    return NumpyBackend("tfa", reference)


@pytest.fixture(scope="module")
def native_backend(reference) -> NativeBackend:
    return NativeBackend("tfa", reference)


def randn16(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(F16)


# --------------------------------------------------------------------------- matmuls

QK_SHAPES = {  # (M, N, HEAD): q M×HEAD, k N×HEAD
    "ref_q_128x128_k_128x128": (128, 128, 128),
    "head_64": (128, 128, 64),
    "cube_s0_256_cube_s1_64_head_64": (256, 64, 64),
    "odd_m_37_n_96_head_32": (37, 96, 32),
    "odd_m_5_n_33_head_7": (5, 33, 7),
    "single_1x1_head_1": (1, 1, 1),
    "m_130_n_130_head_129": (130, 130, 129),
}


@pytest.mark.parametrize("shape", QK_SHAPES.values(), ids=QK_SHAPES.keys())
def test_compute_qk_bits(shape, numpy_backend, native_backend):
    m, n, head = shape
    rng = np.random.default_rng(m * 1000 + n + head)
    q, k = randn16(rng, (m, head)), randn16(rng, (n, head))
    assert_bits_equal(native_backend.compute_qk(q, k), numpy_backend.compute_qk(q, k), "compute_qk")


PV_SHAPES = {  # (M, T, HEAD): p M×T, v T×HEAD
    "ref_p_128x256_v_256x128": (128, 256, 128),
    "head_64": (128, 256, 64),
    "tile_s1_2048_head_64": (256, 2048, 64),
    "odd_m_3_t_96_head_40": (3, 96, 40),
    "odd_m_66_t_7_head_17": (66, 7, 17),
}


@pytest.mark.parametrize("shape", PV_SHAPES.values(), ids=PV_SHAPES.keys())
def test_compute_pv_bits(shape, numpy_backend, native_backend):
    m, t, head = shape
    rng = np.random.default_rng(m + 7 * t + head)
    p = rng.random((m, t)).astype(F16)  # x_exp values live in [0, 1]
    v = randn16(rng, (t, head))
    assert_bits_equal(native_backend.compute_pv(p, v), numpy_backend.compute_pv(p, v), "compute_pv")


def fp16_edge_values() -> np.ndarray:
    """fp16 zeros of both signs, subnormals, the largest finite values, ordinary values."""
    bits = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x7bff, 0xfbff,
                     0x3c00, 0xbc00, 0x3555, 0x1234, 0x9234], np.uint16)
    return bits.view(F16)


@pytest.mark.parametrize("kernel", ["compute_qk", "compute_pv"])
def test_matmul_edge_values(kernel, numpy_backend, native_backend):
    """Subnormal, ±0 and ±65504 operands: products stay exact, zeros keep the +0 start."""
    rng = np.random.default_rng(3)
    edge = fp16_edge_values()
    a = rng.choice(edge, (48, 72))
    b = rng.choice(edge, (72, 40) if kernel == "compute_pv" else (40, 72))
    a[0] = np.float16(-0.0)  # with b's first column all positive: only -0 products,
    if kernel == "compute_pv":  # and the sum that starts from +0 stays +0
        b[:, 0] = np.float16(1.5)
    else:
        b[0, :] = np.float16(1.5)
    got, want = getattr(native_backend, kernel)(a, b), getattr(numpy_backend, kernel)(a, b)
    assert_bits_equal(got, want, kernel)
    assert got[0, 0].view(np.uint32) == 0, f"a sum of -0 products must be +0, got {got[0, 0]!r}"


def test_matmul_views_and_fp32_inputs(numpy_backend, native_backend):
    """Non-contiguous views and fp32 inputs are cast to fp16 C order the same way."""
    rng = np.random.default_rng(4)
    big_q, big_k = randn16(rng, (256, 256)), randn16(rng, (256, 256))
    q, k = big_q[::2, 64:192], big_k.T[:96, 10:138]  # strided and transposed views
    assert_bits_equal(native_backend.compute_qk(q, k), numpy_backend.compute_qk(q, k), "compute_qk(views)")
    q32 = rng.standard_normal((32, 64)).astype(F32)  # rounded to fp16 on the way in
    k32 = rng.standard_normal((48, 64)).astype(F32)
    assert_bits_equal(native_backend.compute_qk(q32, k32), numpy_backend.compute_qk(q32, k32),
                      "compute_qk(fp32 in)")
    p, v = rng.random((128, 512)).astype(F16)[:, ::2], randn16(rng, (128, 256)).T[:, :64]
    assert_bits_equal(native_backend.compute_pv(p, v), numpy_backend.compute_pv(p, v), "compute_pv(views)")


# --------------------------------------------------------------------------- compute_p

def scores(rng, rows, cols, head=128, causal_offset=None) -> np.ndarray:
    """fp32 QK scores as compute_qk makes them, optionally with the causal mask value."""
    x = nx.matmul_f16(randn16(rng, (rows, head)), randn16(rng, (cols, head)).T)
    if causal_offset is not None:  # mask above the diagonal of this slice
        i, j = np.indices((rows, cols))
        x = np.where(j > i + causal_offset, nx.MASK_VALUE, x).astype(F32)
    return x


P_CASES = {  # (rows, cols, head, causal_offset)
    "ref_slice_32x256_head_128": (32, 256, 128, None),
    "slice_64x256_head_64": (64, 256, 64, None),
    "slice_4x2048_head_64": (4, 2048, 64, None),
    "odd_cols_96": (16, 96, 128, None),
    "odd_cols_32": (16, 32, 128, None),
    "odd_cols_200": (7, 200, 128, None),
    "causal_diag_32x256": (32, 256, 128, 0),
    "causal_diag_offset_100": (32, 256, 128, 100),
    "causal_fully_masked_rows": (32, 256, 128, -40),
}


@pytest.mark.parametrize("case", P_CASES.values(), ids=P_CASES.keys())
@pytest.mark.parametrize("tile", ["first_tile", "later_tile"])
def test_compute_p_bits(case, tile, numpy_backend, native_backend):
    rows, cols, head, causal_offset = case
    rng = np.random.default_rng(rows * cols + head)
    x = scores(rng, rows, cols, head, causal_offset)
    s = F32(1.0 / np.sqrt(head))
    if tile == "first_tile":
        m_prev = l_prev = None
    else:  # M_prev above some rows' tile max and below others'
        m_prev = (nx.row_max(x) + rng.uniform(-20, 20, rows)).astype(F32)
        m_prev[0] = nx.MASK_VALUE  # a row whose earlier tiles were fully masked
        l_prev = rng.uniform(1, 500, rows).astype(F32)
    want = numpy_backend.compute_p(x, m_prev, l_prev, s)
    got = native_backend.compute_p(x, m_prev, l_prev, s)
    assert_presult_equal(got, want, f"compute_p[{tile}]")
    if m_prev is not None:  # inputs are not modified
        assert_bits_equal(native_backend.compute_p(x, m_prev, l_prev, s).m2_global_max, want.m2_global_max,
                          "compute_p rerun")


@pytest.mark.parametrize("tile", ["first_tile", "later_tile"])
def test_compute_p_fp16_subnormals_and_zeros(tile, numpy_backend, native_backend):
    """E values below 2^-14 and below 2^-25: x_exp holds fp16 subnormals and zeros."""
    rng = np.random.default_rng(11)
    rows, cols = 32, 256
    s = F32(1 / np.sqrt(128))
    m = rng.uniform(-50, 50, rows).astype(F32)
    x = (m[:, None] - rng.uniform(0, 30, (rows, cols)) / s).astype(F32)  # (x - m)·s in [-30, 0]
    x[:, 0] = m  # the max itself: E = 1
    m_prev = None if tile == "first_tile" else (m + 3).astype(F32)
    l_prev = None if tile == "first_tile" else np.full(rows, 2.5, F32)
    want = numpy_backend.compute_p(x, m_prev, l_prev, s)
    e16 = want.x_exp.view(np.uint16) & 0x7fff
    assert np.any((e16 > 0) & (e16 < 0x0400)) and np.any(e16 == 0), "test data must hit subnormals and zeros"
    assert_presult_equal(native_backend.compute_p(x, m_prev, l_prev, s), want, f"compute_p[{tile}]")


def test_compute_p_non_contiguous_input(numpy_backend, native_backend):
    rng = np.random.default_rng(12)
    full = scores(rng, 64, 512)
    x = full[1::2, ::2]  # a strided 32×256 view
    m_prev, l_prev = full[::2, 0].copy(), np.linspace(1, 9, 32, dtype=F32)
    for args in ((None, None), (m_prev, l_prev)):
        assert_presult_equal(native_backend.compute_p(x, *args, F32(0.088)),
                             numpy_backend.compute_p(x, *args, F32(0.088)), "compute_p(view)")


def test_compute_p_libm_model_is_close():
    """libm exp: same max and shapes; other values within a few fp32 ULPs (not bit-identical)."""
    rng = np.random.default_rng(13)
    x = scores(rng, 32, 256)
    s = F32(1 / np.sqrt(128))
    m_prev, l_prev = (nx.row_max(x) + 5).astype(F32), np.full(32, 7.0, F32)
    want = get_backend("numpy", "libm").compute_p(x, m_prev, l_prev, s)
    got = get_backend("native", "libm").compute_p(x, m_prev, l_prev, s)
    assert_bits_equal(got.m2_global_max, want.m2_global_max, "compute_p[libm].m2_global_max")
    for field in ("l1_exp_max", "l2_global_sum"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-6, err_msg=field)
    np.testing.assert_allclose(got.x_exp.astype(F32), want.x_exp.astype(F32), rtol=1e-3, atol=6e-8)


# --------------------------------------------------------------------------- compute_gu, normalize

GU_SHAPES = {"ref_64x128": (64, 128), "head_64": (64, 64), "odd_5x33": (5, 33)}


@pytest.mark.parametrize("shape", GU_SHAPES.values(), ids=GU_SHAPES.keys())
@pytest.mark.parametrize("tile", ["first_tile", "later_tile"])
def test_compute_gu_bits(shape, tile, numpy_backend, native_backend):
    rng = np.random.default_rng(shape[0] * shape[1])
    pv = (rng.standard_normal(shape) * 40).astype(F32)
    o = None if tile == "first_tile" else (rng.standard_normal(shape) * 300).astype(F32)
    l1 = rng.uniform(0, 1, shape[0]).astype(F32)
    o_before = None if o is None else o.copy()
    got, want = native_backend.compute_gu(o, pv, l1), numpy_backend.compute_gu(o, pv, l1)
    assert_bits_equal(got, want, f"compute_gu[{tile}]")
    assert got is not pv and got is not o, "compute_gu must return a fresh array"
    if o is not None:
        assert_bits_equal(o, o_before, "compute_gu must not modify its input o")


@pytest.mark.parametrize("shape", GU_SHAPES.values(), ids=GU_SHAPES.keys())
def test_normalize_bits(shape, numpy_backend, native_backend):
    rng = np.random.default_rng(shape[0] + shape[1])
    o = (rng.standard_normal(shape) * 1e3).astype(F32)
    l = rng.uniform(1, 4000, shape[0]).astype(F32)
    o_before = o.copy()
    assert_bits_equal(native_backend.normalize(o, l), numpy_backend.normalize(o, l), "normalize")
    assert_bits_equal(o, o_before, "normalize must not modify its input")
    assert_bits_equal(native_backend.normalize(o.T.copy().T, l), numpy_backend.normalize(o, l),
                      "normalize(F-order view)")


# --------------------------------------------------------------------------- exp, row sum, fp16 cast

def f32_from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(F32)


def bits_range(lo: float, hi: float, step: int) -> np.ndarray:
    """Every ``step``-th fp32 value from ``lo`` up to ``hi``, walking the bit patterns in order."""
    def key(v):  # fp32 → integer, monotone in the value: -0 → -1, +0 → 0
        b = int(np.array(v, F32).view(np.uint32))
        return b if b < 0x80000000 else 0x7fffffff - b
    keys = np.arange(key(lo), key(hi) + 1, step, dtype=np.int64)
    bits = np.where(keys >= 0, keys, 0x7fffffff - keys)
    return f32_from_bits(bits.astype(np.uint32))


def f32_bits_of(v: float) -> int:
    return int(np.array(v, F32).view(np.uint32))


EXP_SPECIALS = {  # id → fp32 bit pattern (bits, so NaN payloads survive parametrisation)
    "+0": 0x00000000, "-0": 0x80000000, "+inf": 0x7f800000, "-inf": 0xff800000,
    "quiet_nan": 0x7fc00000, "negative_nan": 0xffc00000, "signalling_nan": 0x7f800001,
    "nan_payload": 0x7fa12345, "min_subnormal": 0x00000001, "-min_subnormal": 0x80000001,
    "max_subnormal": 0x007fffff, "flt_min": 0x00800000, "-flt_min": 0x80800000,
    "flt_max": 0x7f7fffff, "-flt_max": 0xff7fffff, "mask_value": f32_bits_of(nx.MASK_VALUE),
    **{f"{v:g}": f32_bits_of(v) for v in (-1e30, -1e10, -104.0, -103.97, -103.28, -87.34, -87.33,
                                          88.72, 88.73, 89.0, 89.5, 200.0, 0.5, -0.5)},
}

EXP_SWEEPS = {
    "dense_sweep_-104_to_89_stride_409": (-104.0, 89.0, 409),
    "every_bit_near_-104": (-104.0, -103.9, 1),
    "every_bit_near_subnormal_edge_-87.33": (-87.4, -87.3, 1),
    "every_bit_near_overflow_edge_88.72": (88.68, 88.76, 1),
    "tiny_-2e-20_to_2e-20_stride_4099": (-2.0 ** -20, 2.0 ** -20, 4099),
    "every_bit_near_n_flip_-ln2/2": (-0.35, -0.34, 1),
    "every_bit_near_n_flip_+ln2/2": (0.34, 0.35, 1),
}


@pytest.mark.parametrize("sweep", EXP_SWEEPS.values(), ids=EXP_SWEEPS.keys())
def test_exp_tfa_sweep_bits(sweep):
    x = bits_range(*sweep)
    assert 1000 < x.size < 10_000_000
    assert_bits_equal(native_exp(x, "tfa"), nx.exp_tfa(x), f"exp_tfa on {x.size} values in [{sweep[0]}, {sweep[1]}]")


def test_exp_tfa_rint_ties():
    """x·LOG2E near k + 1/2 for every k: n = rint(...) must round half to even the same way."""
    k = np.arange(-151, 130, dtype=np.float64)
    centre = ((k + 0.5) / float(nx.EXP_LOG2E)).astype(F32).view(np.int32)
    x = (centre[:, None] + np.arange(-300, 301, dtype=np.int32)).ravel().view(F32)
    x = x[np.isfinite(x)]
    assert_bits_equal(native_exp(x, "tfa"), nx.exp_tfa(x), "exp_tfa near rint ties")


@pytest.mark.parametrize("bits", EXP_SPECIALS.values(), ids=EXP_SPECIALS.keys())
def test_exp_tfa_special_values(bits):
    x = f32_from_bits([bits])
    assert_bits_equal(native_exp(x, "tfa"), nx.exp_tfa(x), f"exp_tfa({x[0]!r}, bits 0x{bits:08x})")


def test_exp_libm_within_a_few_ulp():
    x = bits_range(-87.0, 88.0, 2003)
    got, want = native_exp(x, "libm"), nx.exp_libm(x)
    ulp = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert ulp.max() <= 4, f"libm exp differs from numpy's by {ulp.max()} ULP at x={x[np.argmax(ulp)]!r}"


ROW_SUM_SHAPES = {"cols_1": (3, 1), "cols_63": (4, 63), "cols_64": (4, 64), "cols_65": (4, 65),
                  "cols_96": (8, 96), "ref_32x256": (32, 256), "cols_300": (5, 300), "cols_2048": (4, 2048)}


@pytest.mark.parametrize("shape", ROW_SUM_SHAPES.values(), ids=ROW_SUM_SHAPES.keys())
def test_row_sum_bits(shape):
    rng = np.random.default_rng(shape[1])
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-4, 4, shape)).astype(F32)
    x[0] = -0.0  # all -0: the sum from +0 is +0
    assert_bits_equal(native_row_sum(x), nx.row_sum(x), "row_sum")


def test_row_sum_order_is_sequential():
    """The data tells a left-to-right sum from a halving tree of 64-element chunks (the test has teeth)."""
    x = np.zeros((1, 128), F32)
    x[0, 0], x[0, 1], x[0, 32] = 1e8, 1.0, -1e8
    want = nx.row_sum(x)
    assert want[0] == np.float32(np.float32(np.float32(1e8) + np.float32(1)) - np.float32(1e8)) == 0  # tree: 1
    assert_bits_equal(native_row_sum(x), want, "row_sum")


def fp16_rounding_probes() -> np.ndarray:
    """Every finite fp16 value as fp32, the exact midpoints to its neighbour, and ±1 ULP around them."""
    h = np.arange(0, 0x7c00, dtype=np.uint16).view(F16).astype(F32)  # 0 .. 65504
    nxt = np.append(h[1:], F32(65536.0))  # the overflow threshold midpoint is 65520
    mid = ((h.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(F32)  # exact in fp32
    probes = np.concatenate([h, mid, np.nextafter(mid, F32(0)), np.nextafter(mid, F32(np.inf)),
                             np.nextafter(h, F32(np.inf))])
    return np.concatenate([probes, -probes])


TO_FP16_INPUTS = {
    "every_fp16_value_and_tie": fp16_rounding_probes,
    "all_fp32_bits_stride_257": lambda: np.arange(0, 2**32, 257, dtype=np.uint64).astype(np.uint32).view(F32),
    "specials_and_nan_payloads": lambda: f32_from_bits([
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
        0x7fa00000, 0x7fffffff, 0x7f802000, 0x7f801fff, 0x00000001, 0x33000000, 0x33000001, 0x387fc000,
        0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0x7f7fffff]),
}


@pytest.mark.parametrize("make", TO_FP16_INPUTS.values(), ids=TO_FP16_INPUTS.keys())
def test_to_fp16_bits(make):
    x = make()
    assert_bits_equal(native_to_fp16(x), nx.to_fp16(x), f"to_fp16 on {x.size} values")


# --------------------------------------------------------------------------- the whole tile pipeline

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), head=st.integers(1, 136), tile_s1=st.integers(1, 300), tiles=st.integers(1, 3),
       magnitude=st.sampled_from([1e-3, 1.0, 8.0, 60.0]), causal=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_tile_pipeline_property(m, head, tile_s1, tiles, magnitude, causal, seed):
    """For any shape and fp16 data, QK → P → PV → GU → normalise is bit-identical on every tensor."""
    rng = np.random.default_rng(seed)
    ref, nat = NumpyBackend(), NativeBackend()
    q = randn16(rng, (m, head), magnitude)
    s = F32(1 / np.sqrt(head))
    state = {"numpy": (None, None, None), "native": (None, None, None)}  # (M, L, running_o)
    for t in range(tiles):
        k, v = randn16(rng, (tile_s1, head), magnitude), randn16(rng, (tile_s1, head), magnitude)
        x = ref.compute_qk(q, k)
        assert_bits_equal(nat.compute_qk(q, k), x, f"tile {t} compute_qk")
        if causal:
            i, j = np.indices(x.shape)
            x = np.where(j + t * tile_s1 > i, nx.MASK_VALUE, x).astype(F32)
        outs = {}
        for name, be in (("numpy", ref), ("native", nat)):
            mm, ll, o = state[name]
            pr = be.compute_p(x, mm, ll, s)
            pv = be.compute_pv(pr.x_exp, v)
            o = be.compute_gu(o, pv, pr.l1_exp_max)
            state[name] = (pr.m2_global_max, pr.l2_global_sum, o)
            outs[name] = (pr, pv, o)
        assert_presult_equal(outs["native"][0], outs["numpy"][0], f"tile {t} compute_p")
        assert_bits_equal(outs["native"][1], outs["numpy"][1], f"tile {t} compute_pv")
        assert_bits_equal(outs["native"][2], outs["numpy"][2], f"tile {t} compute_gu")
    final = {name: be.normalize(state[name][2], state[name][1]) for name, be in (("numpy", ref), ("native", nat))}
    assert_bits_equal(final["native"], final["numpy"], "normalize")


# --------------------------------------------------------------------------- plumbing

def test_backend_factory_and_name():
    be = get_backend("native")
    assert isinstance(be, NativeBackend) and be.name == "native"


def test_unknown_exp_model_is_an_input_error():
    with pytest.raises(InputError, match="exp_model"):
        NativeBackend("exp2")


def test_missing_extension_is_an_input_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tfa_sim.backends._native", None)  # makes the import fail
    with pytest.raises(InputError, match="native backend not built"):
        NativeBackend()


# =========================================================================== bf16, masks, softcap, combine

BF16 = nx.BF16
OUT_DTYPES = {"fp16": np.dtype(F16), "bf16": BF16}


def randn_bf16(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(F32).astype(BF16)


def bf16_edge_values() -> np.ndarray:
    """bf16 ±0, subnormals, tiny and huge normals (products under- and overflow fp32), ordinary values."""
    bits = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x0D00, 0x8D00, 0x7F7F, 0xFF7F,
                     0x7000, 0xF000, 0x3F80, 0xBF80, 0x3EAB, 0x4049, 0xC0F0], np.uint16)
    return bits.view(BF16)


BF16_QK_SHAPES = {"ref_q_128x128_k_128x128": (128, 128, 128), "odd_m_37_n_96_head_32": (37, 96, 32),
                  "odd_m_5_n_33_head_7": (5, 33, 7), "m_130_n_130_head_129": (130, 130, 129)}


@pytest.mark.parametrize("shape", BF16_QK_SHAPES.values(), ids=BF16_QK_SHAPES.keys())
def test_compute_qk_and_pv_bf16_bits(shape, numpy_backend, native_backend):
    m, n, head = shape
    rng = np.random.default_rng(m * 1000 + n + head + 1)
    q, k = randn_bf16(rng, (m, head), 4.0), randn_bf16(rng, (n, head), 4.0)
    assert_bits_equal(native_backend.compute_qk(q, k), numpy_backend.compute_qk(q, k), "compute_qk[bf16]")
    p, v = rng.random((m, n)).astype(F32).astype(BF16), randn_bf16(rng, (n, head))
    assert_bits_equal(native_backend.compute_pv(p, v), numpy_backend.compute_pv(p, v), "compute_pv[bf16]")


@pytest.mark.parametrize("kernel", ["compute_qk", "compute_pv"])
def test_matmul_bf16_edge_values(kernel, numpy_backend, native_backend):
    """Products that overflow to inf (sums reach inf − inf = NaN) or fall below 2^-126: no FMA on bf16."""
    rng = np.random.default_rng(21)
    edge, small = bf16_edge_values(), bf16_edge_values()[:9]  # small: ±0, subnormals, tiny normals
    a = np.concatenate([rng.choice(small, (20, 64)), rng.choice(edge, (20, 64))])  # rows: small, then any
    b = np.concatenate([rng.choice(small, (12, 64)), rng.choice(edge, (12, 64))])  # rows of K / columns of V
    if kernel == "compute_pv":
        b = np.ascontiguousarray(b.T)
    got, want = getattr(native_backend, kernel)(a, b), getattr(numpy_backend, kernel)(a, b)
    assert_bits_equal(got, want, f"{kernel}[bf16 edges]")
    assert np.isinf(want).any() and np.isnan(want).any(), "the data must overflow"
    tiny = np.abs(want[np.isfinite(want)])
    assert np.any((tiny > 0) & (tiny < 2.0 ** -126)), "the data must reach fp32 subnormals"


def test_matmul_bf16_fma_would_differ():
    """A case where fma(a, b, acc) and the contract's rounded product + add differ: the test has teeth."""
    a = np.array([[2.0 ** -75, 2.0 ** -75]], F32).astype(BF16)
    b = np.array([[2.0 ** -75], [1.5 * 2.0 ** -75]], F32).astype(BF16)  # products 2^-150 and 1.5·2^-150
    want = np.float32(np.float32(0) + np.float32(2.0 ** -150)) + np.float32(np.float32(1.5 * 2.0 ** -150))
    assert want == np.float32(2.0 ** -149), "0 + 2^-149 (the 1.5·2^-150 product rounds up to 2^-149)"
    for be in (NumpyBackend(), NativeBackend()):
        assert be.compute_pv(a, b)[0, 0] == want


def fp32_rounding_probes_bf16() -> np.ndarray:
    """Every finite positive bf16 value as fp32, the midpoints to the next one, ±1 ULP around them; both signs."""
    h = (np.arange(0, 0x7F80, dtype=np.uint32) << 16).view(F32)
    mid = (h.view(np.uint32) + np.uint32(0x8000)).view(F32)
    probes = np.concatenate([h, mid, np.nextafter(mid, F32(0)), np.nextafter(mid, F32(np.inf))])
    return np.concatenate([probes, -probes])


NARROW_INPUTS = {  # id → (inputs, dtype); the fp16 cast of TO_FP16_INPUTS is test_to_fp16_bits
    **{f"{name}-bf16": (make, BF16) for name, make in TO_FP16_INPUTS.items()},
    "every_bf16_value_and_tie-bf16": (fp32_rounding_probes_bf16, BF16),
    "every_bf16_value_and_tie-fp16": (fp32_rounding_probes_bf16, np.dtype(F16)),
}


@pytest.mark.parametrize(("make", "dtype"), NARROW_INPUTS.values(), ids=NARROW_INPUTS.keys())
def test_narrow_bits(make, dtype):
    x = make()
    assert_bits_equal(native_narrow(x, dtype), nx.narrow(x, dtype), f"narrow[{dtype}] on {x.size} values")


def p_mask(kind: str, rng, rows: int, cols: int) -> np.ndarray | None:
    """The masks compute_p is tested with; every kind but none has at least one fully masked row."""
    if kind == "none":
        return None
    if kind == "causal":  # rows 0..rows-1 at global rows 100.., columns from 120: the first rows see nothing
        return nx.causal_mask(100, 120, rows, cols)
    if kind == "window":  # rows below the tile: the last rows' windows start beyond it
        return nx.window_mask(cols + 220 - rows // 2, 0, rows, cols, 220)
    mask = rng.random((rows, cols)) < 0.5
    mask[rows // 2] = True
    return mask


SOFTCAPS = {"off": 0.0, "gemma_30": 30.0, "strong_0.5": 0.5, "tiny_1e-40": 1e-40}


@pytest.mark.parametrize("out_dtype", OUT_DTYPES.values(), ids=OUT_DTYPES.keys())
@pytest.mark.parametrize("softcap", SOFTCAPS.values(), ids=SOFTCAPS.keys())
@pytest.mark.parametrize("mask_kind", ["none", "causal", "window", "random"])
@pytest.mark.parametrize("tile", ["first_tile", "later_tile"])
def test_compute_p_mask_softcap_bits(tile, mask_kind, softcap, out_dtype, numpy_backend, native_backend):
    rng = np.random.default_rng(len(mask_kind) * 100 + int(softcap) + (tile == "later_tile"))
    rows, cols = 32, 200
    x = scores(rng, rows, cols, 64)
    mask = p_mask(mask_kind, rng, rows, cols)
    if mask is not None:
        assert mask.all(axis=1).any(), "a row entirely masked in this tile"
    s = F32(1 / np.sqrt(64))
    m_prev = l_prev = None
    if tile == "later_tile":
        m_prev = (nx.row_max(x) * F32(0.5 if softcap == 0 else 0.01) + rng.uniform(-5, 5, rows)).astype(F32)
        m_prev[0], m_prev[1] = nx.MASK_VALUE, -0.0  # earlier tiles fully masked; a -0 running max
        l_prev = rng.uniform(1, 500, rows).astype(F32)
    args = (x, m_prev, l_prev, s, mask, softcap, out_dtype)
    want = numpy_backend.compute_p(*args)
    assert want.x_exp.dtype == out_dtype
    assert_presult_equal(native_backend.compute_p(*args), want, f"compute_p[{tile}, {mask_kind}, {softcap}]")


def edge_scores(rng, rows: int, cols: int) -> np.ndarray:
    """Scores with ±0, subnormals, huge magnitudes near ±FLT_MAX, and rows of zeros of both signs."""
    pool = f32_from_bits([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF,
                          0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0xFF000000, f32_bits_of(1e30), f32_bits_of(-1e30),
                          f32_bits_of(3.5), f32_bits_of(-7.25), f32_bits_of(1e-30), f32_bits_of(nx.MASK_VALUE)])
    x = rng.choice(pool, (rows, cols))
    x[0] = rng.choice(pool[:2], cols)  # max is a zero of both signs
    x[1] = rng.choice(pool[:6], cols)  # zeros and subnormals only
    x[2] = -0.0
    return x


@pytest.mark.parametrize("out_dtype", OUT_DTYPES.values(), ids=OUT_DTYPES.keys())
@pytest.mark.parametrize("softcap", [0.0, 30.0, 1e-40], ids=["off", "30", "tiny"])
@pytest.mark.parametrize("tile", ["first_tile", "later_tile"])
def test_compute_p_edge_scores_bits(tile, softcap, out_dtype, numpy_backend, native_backend):
    """±0, subnormal and huge scores (masking may round them to −inf: NaN rows), masked entries."""
    rng = np.random.default_rng(31)
    rows, cols = 16, 136
    x = edge_scores(rng, rows, cols)
    mask = rng.random((rows, cols)) < 0.25
    mask[3] = True  # entirely masked
    m_prev = l_prev = None
    if tile == "later_tile":
        m_prev = rng.choice(f32_from_bits([0, 0x80000000, f32_bits_of(nx.MASK_VALUE), f32_bits_of(2.0)]), rows)
        l_prev = rng.uniform(0, 100, rows).astype(F32)
    for mk in (None, mask):
        args = (x, m_prev, l_prev, F32(0.125), mk, softcap, out_dtype)
        assert_presult_equal(native_backend.compute_p(*args), numpy_backend.compute_p(*args),
                             f"compute_p[edges, {tile}, softcap {softcap}, mask {mk is not None}]")


def combine_inputs(rng, n: int, rows: int, cols: int):
    o = [(rng.standard_normal((rows, cols)) * 10.0 ** rng.uniform(-3, 3, (rows, 1))).astype(F32) for _ in range(n)]
    m = [rng.uniform(-30, 30, rows).astype(F32) for _ in range(n)]
    l = [rng.uniform(0.5, 3000, rows).astype(F32) for _ in range(n)]
    return o, m, l


@pytest.mark.parametrize("n_parts", [1, 2, 5, 16])
@pytest.mark.parametrize("scale", [F32(1 / np.sqrt(128)), F32(1.0)], ids=["scale_s", "scale_1_softcap"])
def test_combine_bits(n_parts, scale, numpy_backend, native_backend):
    rng = np.random.default_rng(n_parts)
    o, m, l = combine_inputs(rng, n_parts, 24, 72)
    m[0][0] = nx.MASK_VALUE  # chunk 0 saw only masked keys in row 0
    m[-1][1], m[0][1] = -0.0, 0.0  # zero maxima of both signs
    m[-1][2] = m[0][2]  # a tie
    o[0][3] = -0.0
    o_before = [v.copy() for v in o]
    got = native_backend.combine(o, m, l, scale)
    assert_bits_equal(got, numpy_backend.combine(o, m, l, scale), f"combine[{n_parts} parts]")
    for before, after in zip(o_before, o):
        assert_bits_equal(after, before, "combine must not modify its inputs")


def test_combine_edge_rows(numpy_backend, native_backend):
    """All chunks of a row masked (M = MASK_VALUE), l = 0 (0/0 = NaN), views as parts."""
    rng = np.random.default_rng(41)
    o, m, l = combine_inputs(rng, 3, 8, 16)
    for part in m:
        part[0] = nx.MASK_VALUE
    for part in l:
        part[1] = 0.0
    o = [np.asfortranarray(v) for v in o]
    assert_bits_equal(native_backend.combine(o, m, l, F32(0.1)), numpy_backend.combine(o, m, l, F32(0.1)),
                      "combine[edges]")


def test_combine_libm_model_is_close():
    rng = np.random.default_rng(42)
    o, m, l = combine_inputs(rng, 4, 16, 32)
    want = get_backend("numpy", "libm").combine(o, m, l, F32(0.09))
    np.testing.assert_allclose(get_backend("native", "libm").combine(o, m, l, F32(0.09)), want, rtol=1e-5)


def run_tiles(be, q, k, v, s, mask_fn, softcap, tile_s1, first_col):
    """QK → P → PV → GU over the keys of one chunk; every intermediate, and the final (O, M, L)."""
    state, seen = (None, None, None), []
    for c0 in range(0, k.shape[0], tile_s1):
        x = be.compute_qk(q, k[c0:c0 + tile_s1])
        mm, ll, o = state
        pr = be.compute_p(x, mm, ll, s, mask_fn(first_col + c0, x.shape[1]), softcap, q.dtype)
        pv = be.compute_pv(pr.x_exp, v[c0:c0 + tile_s1])
        o = be.compute_gu(o, pv, pr.l1_exp_max)
        state = (pr.m2_global_max, pr.l2_global_sum, o)
        seen += [x, *pr, pv, o]
    return seen, state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), head=st.integers(1, 136), tile_s1=st.integers(1, 200), tiles=st.integers(1, 4),
       chunks=st.integers(1, 3), bf16=st.booleans(), mask_kind=st.sampled_from(["none", "causal", "window"]),
       softcap=st.sampled_from([0.0, 0.0, 50.0, 5.0, 0.3]), magnitude=st.sampled_from([1e-3, 1.0, 8.0, 60.0]),
       seed=st.integers(0, 2**32 - 1))
def test_pipeline_with_bf16_masks_softcap_and_combine_property(m, head, tile_s1, tiles, chunks, bf16, mask_kind,
                                                                softcap, magnitude, seed):
    """Any shape, dtype, mask and cap: every intermediate of every chunk, the combine and O are bit-identical."""
    rng = np.random.default_rng(seed)
    make = randn_bf16 if bf16 else randn16
    row0 = int(rng.integers(0, chunks * tiles * tile_s1 + 1))
    window = int(rng.integers(1, chunks * tiles * tile_s1 + 2))
    masks = {"none": lambda c0, n: None, "causal": lambda c0, n: nx.causal_mask(row0, c0, m, n),
             "window": lambda c0, n: nx.window_mask(row0, c0, m, n, window)}
    q, s = make(rng, (m, head), magnitude), F32(1 / np.sqrt(head))
    span = tiles * tile_s1
    k, v = make(rng, (chunks * span, head), magnitude), make(rng, (chunks * span, head), magnitude)
    parts = {}
    for be in (NumpyBackend(), NativeBackend()):
        parts[be.name] = [run_tiles(be, q, k[c:c + span], v[c:c + span], s, masks[mask_kind], softcap, tile_s1, c)
                          for c in range(0, chunks * span, span)]
        mm, ll, o = zip(*(state for _, state in parts[be.name]))
        parts[be.name].append(([be.combine(o, mm, ll, F32(1) if softcap else s), be.normalize(o[0], ll[0])], None))
    for n, ((got, _), (want, _)) in enumerate(zip(parts["native"], parts["numpy"])):
        for i, (g, w) in enumerate(zip(got, want)):
            assert_bits_equal(g, w, f"chunk {n} tensor {i}")
