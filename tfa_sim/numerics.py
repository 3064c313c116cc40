"""Every rounding point of the TFA kernel, as small numpy functions.

This module is the numerics contract (docs/numerics.md): the native C kernels
in ``native/tfa_native.c`` execute the same fp32 operations in the same order,
so both backends are bit-identical.  Orders that IEEE leaves open are fixed
here once:

* matmul: fp16×fp16 products are exact in fp32; they are accumulated in fp32
  sequentially over the reduction index k = 0, 1, …, K−1, starting from +0.
* row sum: each row is cut into 64-element chunks (one 256-byte vector repeat
  of fp32; the last chunk is padded with +0); inside a chunk a halving tree
  (``v[:32] + v[32:]``, then ``[:16] + [16:]`` … down to one value); chunk
  results are then added in order, left to right.
* exp: :func:`exp_tfa`, a fully specified fp32 algorithm (below); ``libm``
  is kept for comparison only and is not bit-identical across backends.
* fp32 → fp16: round to nearest even (the kernel's ``CAST_ROUND``).
"""
from __future__ import annotations

import numpy as np

F16 = np.float16
F32 = np.float32

#: Value the kernel adds above the causal diagonal before the row max.
MASK_VALUE = F32(-3.40282e38)

#: Elements per vector repeat for fp32 (256 bytes); the row-sum chunk.
REPEAT_F32 = 64

# exp_tfa constants (Cephes expf): Cody–Waite split of ln 2 and a degree-5
# minimax polynomial for (exp(r) − 1 − r)/r² on |r| ≤ ln2/2.
EXP_LOG2E = F32(1.44269504088896341)
EXP_LN2_HI = F32(0.693359375)  # 9 significant bits: n·LN2_HI is exact
EXP_LN2_LO = F32(-2.12194440e-4)
EXP_POLY = tuple(F32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                  4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))
EXP_X_MIN = F32(-104.0)  # exp(-104) rounds to +0 in fp32
EXP_X_MAX = F32(89.0)  # exp(89) overflows to +inf in fp32
EXP_MAX_ULP = 1  # measured bound vs correctly rounded exp, see tests/test_exp_model.py


def softmax_scale(head: int) -> np.float32:
    """s = 1/sqrt(HEAD), computed in float64 and rounded once to fp32."""
    return F32(1.0 / np.sqrt(head))


def apply_mask(x: np.ndarray, masked: np.ndarray) -> np.ndarray:
    """Add ``MASK_VALUE`` (an fp32 add) where ``masked``, as the kernel's masked tiles do."""
    return np.where(masked, x + MASK_VALUE, x).astype(F32, copy=False)


def to_fp16(x: np.ndarray) -> np.ndarray:
    """fp32 → fp16, round to nearest even (the only narrowing cast: ``x_exp``)."""
    with np.errstate(over="ignore"):  # |x| ≥ 65520 rounds to ±inf, as the hardware cast does
        return np.asarray(x, dtype=F32).astype(F16)


def exp_tfa(x: np.ndarray) -> np.ndarray:
    """The tfa-sim exp model: fp32 in, fp32 out, every operation rounded to fp32.

    1. clamp x to [-104, 89] (NaN passes through untouched);
    2. n = rint(x · LOG2E)  (round half to even);
    3. r = (x − n·LN2_HI) − n·LN2_LO;
    4. p = ((((P0·r + P1)·r + P2)·r + P3)·r + P4)·r + P5;  p = p·(r·r);  p = p + r;  p = p + 1;
    5. result = (p · 2^(n>>1)) · 2^(n − (n>>1))   — the first product is exact, the
       second rounds once, so subnormal results are correctly rounded from p.
    """
    x = np.asarray(x, dtype=F32)
    nan = np.isnan(x)
    xc = np.where(x < EXP_X_MIN, EXP_X_MIN, np.where(x > EXP_X_MAX, EXP_X_MAX, x))
    xc = np.where(nan, F32(0), xc).astype(F32, copy=False)
    n = np.rint(xc * EXP_LOG2E)
    r = (xc - n * EXP_LN2_HI) - n * EXP_LN2_LO
    p = np.full_like(r, EXP_POLY[0])
    for c in EXP_POLY[1:]:
        p = p * r + c
    p = p * (r * r)
    p = p + r
    p = p + F32(1)
    ni = n.astype(np.int32)
    n1 = ni >> 1
    scale1 = ((n1 + 127) << 23).astype(np.int32).view(F32)
    scale2 = ((ni - n1 + 127) << 23).astype(np.int32).view(F32)
    with np.errstate(over="ignore"):
        out = (p * scale1) * scale2
    return np.where(nan, x, out).astype(F32, copy=False)


def exp_libm(x: np.ndarray) -> np.ndarray:
    """numpy's float32 exp, for comparison with :func:`exp_tfa` (backend-specific bits)."""
    return np.exp(np.asarray(x, dtype=F32))


EXP_MODELS = {"tfa": exp_tfa, "libm": exp_libm}


def row_max(x: np.ndarray) -> np.ndarray:
    """Row-wise max of a 2-D fp32 tile (order-free: max is exact)."""
    return np.max(x, axis=1).astype(F32, copy=False)


def row_sum(x: np.ndarray) -> np.ndarray:
    """Row-wise fp32 sum in the vector unit's order (module docstring)."""
    x = np.asarray(x, dtype=F32)
    rows, cols = x.shape
    chunks = -(-cols // REPEAT_F32)
    if chunks * REPEAT_F32 != cols:
        x = np.concatenate([x, np.zeros((rows, chunks * REPEAT_F32 - cols), F32)], axis=1)
    v = x.reshape(rows, chunks, REPEAT_F32)
    half = REPEAT_F32 // 2
    while half:
        v = v[:, :, :half] + v[:, :, half:]
        half //= 2
    v = v[:, :, 0]
    acc = v[:, 0].copy()
    for c in range(1, chunks):
        acc += v[:, c]
    return acc


def matmul_f16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for fp16 a (M×K) and b (K×N): exact products, sequential fp32 sum over k."""
    a32 = np.asarray(a, dtype=F16).astype(F32)
    b32 = np.asarray(b, dtype=F16).astype(F32)
    m, k = a32.shape
    acc = np.zeros((m, b32.shape[1]), F32)
    prod = np.empty_like(acc)
    for i in range(k):
        np.multiply(a32[:, i, None], b32[None, i, :], out=prod)
        np.add(acc, prod, out=acc)
    return acc
