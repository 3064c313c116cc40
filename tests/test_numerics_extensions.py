"""bf16, masks, logit softcap and the split-S1 combine, checked against independent code.

The expectations here are hand-computed values, ml_dtypes' own bf16 casts,
plain Python loops over fp32 scalars that follow docs/numerics.md line by
line, and float64 attention.  Bit identity between the two backends is in
tests/test_native_kernels.py.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_numerics import scalar_row_sum

from tfa_sim.backends.native_backend import NativeBackend
from tfa_sim.backends.numpy_backend import NumpyBackend
from tfa_sim.numerics import rounding as nx
from tfa_sim.numerics.compare import compare

F16, F32, BF16 = np.float16, np.float32, np.dtype(ml_dtypes.bfloat16)
BACKENDS = {"numpy": NumpyBackend, "native": NativeBackend}


def bits32(a) -> np.ndarray:
    return np.asarray(a, F32).view(np.uint32)


def f32_from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(F32)


# --------------------------------------------------------------------------- bf16 narrow / widen

def test_to_bf16_hand_values():
    """Ties to even, carry into the exponent, overflow, subnormals, signed zero."""
    x = np.array([1 + 2.0 ** -8,  # halfway between 1 and 1 + 2^-7: even is 1
                  1 + 3 * 2.0 ** -8,  # halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6
                  1 + 2.0 ** -8 + 2.0 ** -20,  # just above the tie: up
                  2 - 2.0 ** -9,  # rounds up into the next binade
                  -0.0, 2.0 ** -133, 3 * 2.0 ** -134], F32)
    got = nx.narrow(x, BF16).astype(np.float64).tolist()
    assert got == [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, 2.0, 0.0, 2.0 ** -133, 2.0 ** -132]
    assert nx.narrow(x, BF16).view(np.uint16)[4] == 0x8000, "-0 keeps its sign"
    big = f32_from_bits([0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF])  # below, at, above the overflow tie
    assert nx.narrow(big, BF16).view(np.uint16).tolist() == [0x7F7F, 0x7F80, 0x7F80, 0xFF80]


def test_to_bf16_nan_is_quiet_with_sign():
    x = f32_from_bits([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA12345, 0x7FFFFFFF])
    assert nx.narrow(x, BF16).view(np.uint16).tolist() == [0x7FC0, 0xFFC0, 0x7FC0, 0xFFC0, 0x7FC0]


def test_to_bf16_equals_ml_dtypes_cast_on_a_bit_sweep():
    """Every 4099th fp32 bit pattern (all signs, NaN and Inf included) against ml_dtypes' cast."""
    x = np.arange(0, 2 ** 32, 4099, dtype=np.uint64).astype(np.uint32).view(F32)
    with np.errstate(invalid="ignore"):
        want = x.astype(BF16)
    got = nx.narrow(x, BF16)
    assert got.dtype == BF16
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_narrow_fp16_is_to_fp16_and_other_dtypes_fail():
    x = np.array([1.0, 65520.0, 2.0 ** -25, -3.3], F32)
    assert np.array_equal(nx.narrow(x, F16).view(np.uint16), nx.to_fp16(x).view(np.uint16))
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        nx.narrow(x, F32)


def test_widen_bf16_is_exact_on_every_pattern():
    h = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(BF16)
    got = nx.widen(h)
    assert got.dtype == F32
    assert np.array_equal(got.view(np.uint32), np.arange(2 ** 16, dtype=np.uint32) << 16)


# --------------------------------------------------------------------------- bf16 matmul

def scalar_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sequential fp32 sum from +0 of rounded fp32 products, as plain Python loops over fp32 scalars."""
    a32, b32 = a.astype(F32), b.astype(F32)  # ml_dtypes' own exact widening
    out = np.zeros((a.shape[0], b.shape[1]), F32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                acc = F32(0)
                for k in range(a.shape[1]):
                    acc = F32(acc + F32(a32[i, k] * b32[k, j]))
                out[i, j] = acc
    return out


def test_matmul_bf16_is_sequential_fp32_with_rounded_products():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((5, 24)) * 10.0 ** rng.integers(-30, 30, (5, 24))).astype(BF16)
    b = (rng.standard_normal((24, 4)) * 10.0 ** rng.integers(-30, 30, (24, 4))).astype(BF16)
    a[0, :3] = np.array([1e30, 1e-30, -0.0], F32).astype(BF16)  # products overflow and underflow
    b[:3, 0] = np.array([1e10, 1e-15, 7.0], F32).astype(BF16)
    got = nx.matmul(a, b)
    assert np.array_equal(bits32(got), bits32(scalar_matmul(a, b)))
    assert np.isinf(got[0, 0]), "1e30·1e10 overflows fp32: the bf16 product is a rounded fp32 multiply"


def test_matmul_bf16_hand_value():
    """(1 + 2^-7)² = 1 + 2^-6 + 2^-14 is exact in fp32; three of them add up exactly."""
    a = np.full((1, 3), 1 + 2.0 ** -7, F32).astype(BF16)
    b = np.full((3, 1), 1 + 2.0 ** -7, F32).astype(BF16)
    assert nx.matmul(a, b)[0, 0] == F32(3 * (1 + 2.0 ** -6 + 2.0 ** -14))


@pytest.mark.parametrize("name", BACKENDS)
def test_mixed_bf16_and_fp16_operands_are_rejected(name):
    be = BACKENDS[name]()
    q = np.ones((2, 4), BF16)
    with pytest.raises(ValueError, match="bfloat16"):
        be.compute_qk(q, np.ones((3, 4), F16))
    with pytest.raises(ValueError, match="bfloat16"):
        be.compute_pv(np.ones((2, 3), F16), np.ones((3, 4), BF16))


# --------------------------------------------------------------------------- masks

def test_causal_and_window_masks_by_hand():
    causal = nx.causal_mask(1, 0, 2, 4)  # rows 1, 2; columns 0..3
    assert causal.tolist() == [[False, False, True, True], [False, False, False, True]]
    window = nx.window_mask(4, 2, 2, 4, 2)  # row 4 sees 3, 4; row 5 sees 4, 5; columns 2..5
    assert window.tolist() == [[True, False, False, True], [True, True, False, False]]
    assert np.array_equal(nx.window_mask(0, 0, 8, 8, 1), ~np.eye(8, dtype=bool)), "W = 1: only the diagonal"
    assert np.array_equal(nx.window_mask(3, 5, 16, 24, 64), nx.causal_mask(3, 5, 16, 24)), "W ≥ S: causal"
    with pytest.raises(ValueError, match="window"):
        nx.window_mask(0, 0, 2, 2, 0)


def test_apply_causal_mask_is_apply_mask_of_causal_mask():
    x = np.random.default_rng(6).standard_normal((16, 40)).astype(F32) * 100
    want = np.where(nx.causal_mask(8, 0, 16, 40), F32(x + nx.MASK_VALUE), x)
    assert np.array_equal(bits32(nx.apply_causal_mask(x, 8, 0)), bits32(want))
    assert np.array_equal(bits32(nx.apply_mask(x, nx.causal_mask(8, 0, 16, 40))), bits32(want))


@pytest.mark.parametrize("name", BACKENDS)
def test_compute_p_mask_equals_premasked_scores(name):
    """softcap = 0: the mask argument gives today's bits of apply_causal_mask + compute_p."""
    be = BACKENDS[name]()
    rng = np.random.default_rng(7)
    x = nx.matmul_f16((rng.standard_normal((32, 64)) * 2).astype(F16), rng.standard_normal((256, 64)).astype(F16).T)
    s = nx.softmax_scale(64)
    m_prev, l_prev = (nx.row_max(x) + 3).astype(F32), np.full(32, 9.0, F32)
    for args in ((None, None), (m_prev, l_prev)):
        want = be.compute_p(nx.apply_causal_mask(x, 200, 0), *args, s)
        got = be.compute_p(x, *args, s, mask=nx.causal_mask(200, 0, 32, 256))
        for field in want._fields:
            assert np.array_equal(getattr(got, field).view(np.uint8), getattr(want, field).view(np.uint8)), field


@pytest.mark.parametrize("name", BACKENDS)
def test_bad_mask_softcap_and_dtype_are_rejected(name):
    be = BACKENDS[name]()
    x = np.zeros((4, 8), F32)
    with pytest.raises(ValueError, match="shape"):
        be.compute_p(x, None, None, F32(1), mask=np.zeros((4, 9), bool))
    with pytest.raises(ValueError, match="boolean"):
        be.compute_p(x, None, None, F32(1), mask=np.zeros((4, 8), np.int32))
    with pytest.raises(ValueError, match="softcap"):
        be.compute_p(x, None, None, F32(1), softcap=-1.0)
    with pytest.raises(ValueError, match="out_dtype"):
        be.compute_p(x, None, None, F32(1), out_dtype=F32)
    with pytest.raises(ValueError, match="one value per row"):
        be.compute_p(x, np.zeros(3, F32), np.ones(4, F32), F32(1))


# --------------------------------------------------------------------------- max rules

def test_maximum_and_row_max_rules():
    """NaN propagates, +0 beats −0 in either order, otherwise the larger value."""
    a = np.array([0.0, -0.0, -0.0, 1.0, np.nan, 2.0], F32)
    b = np.array([-0.0, 0.0, -0.0, 3.0, 1.0, np.nan], F32)
    got = nx.maximum(a, b)
    assert bits32(got[:4]).tolist() == [0, 0, 0x80000000, bits32(F32(3.0))]
    assert np.isnan(got[4:]).all()
    rows = np.array([[-0.0, -1.0, 0.0, -0.0], [-0.0, -0.0, -5.0, -0.0], [-2.0, 1e-45, -0.0, 0.0]], F32)
    assert bits32(nx.row_max(rows)).tolist() == [0, 0x80000000, 1]


# --------------------------------------------------------------------------- softcap

def scalar_compute_p(x, m_prev, l_prev, s, mask, cap, out_dtype):
    """compute_p with softcap, written from docs/numerics.md with Python loops over fp32 scalars."""
    c, rows, cols = F32(cap), *x.shape
    x_exp = np.zeros((rows, cols), out_dtype)
    out = {"m": np.zeros(rows, F32), "l": np.zeros(rows, F32), "l1": np.ones(rows, F32)}
    for r in range(rows):
        y = []
        for j in range(cols):
            v = F32(F32(x[r, j] * s) / c)  # u = x·s, then v = u/c
            yj = F32(F32(nx.tanh_tfa(v)) * c)
            y.append(F32(yj + nx.MASK_VALUE) if mask[r, j] else yj)
        m = max(y) if m_prev is None else max(max(y), m_prev[r])
        e = [F32(nx.exp_tfa(F32(yj - m))) for yj in y]  # no scale after the cap
        x_exp[r] = np.array([out_dtype.type(v) for v in e])  # numpy's / ml_dtypes' own RNE casts
        tile_sum = scalar_row_sum(e)
        if m_prev is None:
            out["l"][r] = tile_sum
        else:
            out["l1"][r] = l1 = F32(nx.exp_tfa(F32(m_prev[r] - m)))
            out["l"][r] = F32(F32(l1 * l_prev[r]) + tile_sum)
        out["m"][r] = m
    return x_exp, out


@pytest.mark.parametrize("out_dtype", [np.dtype(F16), BF16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("tile", ["first", "later"])
@pytest.mark.parametrize("name", BACKENDS)
def test_compute_p_softcap_follows_the_documented_order(name, tile, out_dtype):
    rng = np.random.default_rng(8)
    rows, cols, cap, s = 6, 80, 20.0, F32(0.125)
    x = (rng.standard_normal((rows, cols)) * 200).astype(F32)  # x·s/c spans the tanh model's branches
    mask = rng.random((rows, cols)) < 0.3
    mask[0, :] = True  # a row masked in this whole tile
    m_prev = None if tile == "first" else rng.uniform(-30, 30, rows).astype(F32)
    l_prev = None if tile == "first" else rng.uniform(1, 50, rows).astype(F32)
    got = BACKENDS[name]().compute_p(x, m_prev, l_prev, s, mask=mask, softcap=cap, out_dtype=out_dtype)
    want_exp, want = scalar_compute_p(x, m_prev, l_prev, s, mask, cap, out_dtype)
    assert got.x_exp.dtype == out_dtype
    assert np.array_equal(got.x_exp.view(np.uint16), want_exp.view(np.uint16))
    for field, key in (("m2_global_max", "m"), ("l2_global_sum", "l"), ("l1_exp_max", "l1")):
        assert np.array_equal(bits32(getattr(got, field)), bits32(want[key])), field
    assert np.all(got.m2_global_max[1:] <= F32(cap)), "capped scores never exceed c"


def test_softcap_zero_is_todays_path_bit_for_bit():
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((8, 128)) * 40).astype(F32)
    be = NumpyBackend()
    a, b = be.compute_p(x, None, None, F32(0.1)), be.compute_p(x, None, None, F32(0.1), softcap=0.0)
    for field in a._fields:
        assert np.array_equal(getattr(a, field).view(np.uint8), getattr(b, field).view(np.uint8))


# --------------------------------------------------------------------------- combine

def scalar_combine(o_parts, m_parts, l_parts, scale):
    """The split-S1 combine as an explicit loop over fp32 numpy scalars (docs/numerics.md)."""
    rows, cols = o_parts[0].shape
    out = np.zeros((rows, cols), F32)
    for r in range(rows):
        big_m = m_parts[0][r]
        for m in m_parts[1:]:
            big_m = max(big_m, m[r])
        acc_o = [F32(0)] * cols
        acc_l = F32(0)
        for o, m, l in zip(o_parts, m_parts, l_parts):
            f = F32(nx.exp_tfa(F32(F32(m[r] - big_m) * scale)))
            acc_o = [F32(acc_o[c] + F32(f * o[r, c])) for c in range(cols)]
            acc_l = F32(acc_l + F32(f * l[r]))
        out[r] = [F32(acc_o[c] / acc_l) for c in range(cols)]
    return out


@pytest.mark.parametrize("name", BACKENDS)
def test_combine_follows_the_documented_order(name):
    rng = np.random.default_rng(10)
    n, rows, cols = 4, 5, 12
    o = [(rng.standard_normal((rows, cols)) * 50).astype(F32) for _ in range(n)]
    m = [rng.uniform(-20, 20, rows).astype(F32) for _ in range(n)]
    l = [rng.uniform(1, 300, rows).astype(F32) for _ in range(n)]
    m[2][0] = nx.MASK_VALUE  # a chunk in which row 0 saw only masked keys
    m[1][1] = m[3][1] = m[0][1]  # tied maxima
    for scale in (F32(0.088388), F32(1.0)):
        got = BACKENDS[name]().combine(o, m, l, scale)
        assert np.array_equal(bits32(got), bits32(scalar_combine(o, m, l, scale)))
    with pytest.raises(ValueError, match="parts"):
        BACKENDS[name]().combine([], [], [], F32(1))


def run_chunk(be, q, k, v, s, first_col, tile, mask_fn, cap):
    """Tiles over keys [first_col, first_col + len(k)) of one row block: unnormalised O, M, L."""
    m = l = o = None
    for c0 in range(0, k.shape[0], tile):
        x = be.compute_qk(q, k[c0:c0 + tile])
        mask = mask_fn(first_col + c0, x.shape[1])
        pr = be.compute_p(x, m, l, s, mask=mask, softcap=cap, out_dtype=q.dtype)
        o = be.compute_gu(o, be.compute_pv(pr.x_exp, v[c0:c0 + tile]), pr.l1_exp_max)
        m, l = pr.m2_global_max, pr.l2_global_sum
    return o, m, l


def attention64(q, k, v, s, mask, cap):
    """float64 softmax(cap(Q·Kᵀ·s))·V with masked scores −∞ (cap 0: no cap)."""
    x = q.astype(np.float64) @ k.astype(np.float64).T * float(s)
    if cap:
        x = cap * np.tanh(x / cap)
    x = np.where(mask, -np.inf, x)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


CASES = {"fp16_causal": (F16, "causal", 0.0), "bf16_window_softcap": (BF16, "window", 30.0),
         "fp16_softcap_nomask": (F16, None, 5.0), "bf16_causal": (BF16, "causal", 0.0)}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("name", BACKENDS)
def test_split_s1_combine_equals_unsplit_attention(name, case):
    """Chunks of S1 combined give the unsplit O within the kernel's 1e-3 rule, and float64 attention too."""
    dtype, kind, cap = case
    be, rng = BACKENDS[name](), np.random.default_rng(11)
    rows, s1, head, tile, row0 = 64, 1024, 64, 128, 960
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((rows, head), (s1, head), (s1, head)))
    s = nx.softmax_scale(head)
    masks = {None: lambda c0, n: None, "causal": lambda c0, n: nx.causal_mask(row0, c0, rows, n),
             "window": lambda c0, n: nx.window_mask(row0, c0, rows, n, 300)}
    o, m, l = run_chunk(be, q, k, v, s, 0, tile, masks[kind], cap)
    unsplit = be.normalize(o, l)
    parts = [run_chunk(be, q, k[c:c + 256], v[c:c + 256], s, c, tile, masks[kind], cap) for c in range(0, s1, 256)]
    split = be.combine(*zip(*parts), F32(1.0) if cap else s)
    assert compare(split, unsplit).passed  # x_exp is narrowed against other maxima: not bit-equal
    full_mask = masks[kind](0, s1) if kind else np.zeros((rows, s1), bool)
    assert compare(split, attention64(q, k, v, s, full_mask, cap)).passed
