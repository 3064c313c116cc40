"""Every rounding point of the TFA kernel, as small numpy functions.

This module is the numerics contract (docs/numerics.md): the native C kernels
in ``native/tfa_native.c`` execute the same fp32 operations in the same order,
so both backends are bit-identical.  Two references fix the orders IEEE leaves
open (``numerics.reference``): ``"npu"``, the NPU contract (the PTO ISA's
executable specification, pto-spec, where it defines an order), and
``"cpu_sim"``, the kernel's own CPU simulation built with g++ (CPU_SIM).

* matmul (:func:`matmul`): fp16×fp16 products are exact in fp32; one TMATMUL
  accumulates them in fp32 sequentially over its k = 0, 1, …, K−1, from +0.
  A TMATMUL_ACC continues that chain from the accumulator (npu, pto-spec's
  ``TMATMUL_ACC``); CPU_SIM runs a fresh chain and adds it to the accumulator
  once (:func:`matmul_add`).  The kernel issues one call per K panel
  (:func:`kernel_cube_k`) and, for PV, per CUBE_S1 sub-tile.
* row sum (:func:`row_sum`): left to right from +0 over the row's columns
  (pto-spec's ``TROWSUM`` column order; CPU_SIM's ``TROWSUM`` loop).
* exp: :func:`exp_tfa`, a fully specified fp32 algorithm (below), for npu;
  :func:`exp_cpu_sim`, ``(float)exp((double)x)``, for cpu_sim; ``libm`` is
  kept for comparison only and is not bit-identical across backends.
* fp32 → fp16 or bf16 (:func:`narrow`): round to nearest even (the kernel's
  ``CAST_ROUND``).
* bf16 operands: products of two bf16 values are one rounded fp32 multiply
  (exact unless they overflow or fall below 2^-126), then the same sequential
  fp32 sum.
* masks: ``MASK_VALUE`` is added (one fp32 add) to the masked scores; without
  softcap to the raw scores, with softcap after the cap (:func:`softcap_scores`).
* tanh: :func:`tanh_tfa`, a fully specified fp32 algorithm built on :func:`exp_tfa`.
* max: npu — NaN propagates, and +0 counts above −0 (:func:`maximum`,
  :func:`row_max`), so every max is order-free; cpu_sim — ``std::max``, the
  first of two equal values (:func:`maximum_first`, :func:`row_max_first`).
* the softmax scale (:func:`softmax_scale`): the kernel's compile-time
  ``constexpr_inv_sqrt(HEAD)``, in both references.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

F16 = np.float16
F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)
U32 = np.uint32

#: The narrow element types of Q, K, V and ``x_exp``.
INPUT_DTYPES = (np.dtype(F16), BF16)

#: ``numerics.reference``: whose orders the rounding points follow (module docstring).
REFERENCES = ("npu", "cpu_sim")


def input_dtype(name: str) -> np.dtype:
    """``case.dtype`` ("fp16" or "bf16") as a numpy dtype."""
    return {"fp16": np.dtype(F16), "bf16": BF16}[name]


def bf16_from_npy(a: np.ndarray) -> np.ndarray:
    """``numpy.save`` writes an ml_dtypes bfloat16 array as 2-byte void elements: read those back as bf16."""
    return a.view(BF16) if a.dtype == np.dtype("V2") else a


#: Value the kernel adds to masked scores (above the causal diagonal) before the row max.
MASK_VALUE = F32(-3.40282e38)

#: The kernel's L0A/L0B ping-pong buffer: ``MEM_BUFFER_SIZE_BYTES`` of pto_macro_matmul (64 KiB / 2).
KERNEL_L0_BUFFER_BYTES = 32 * 1024
#: ``calculateFittingCubeK``'s candidates, largest first, and its fallback.
KERNEL_CUBE_KS = (256, 128, 64)
KERNEL_CUBE_K_SMALLEST = 32

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

# tanh_tfa constants (Cephes tanhf): odd polynomial x + x·z·P(z), z = x², on |x| < 0.625;
# 1 − 2/(exp(2|x|) + 1) from 0.625 on; ±1 from TANH_X_SAT on (tanh rounds to 1 above 9.011).
TANH_POLY = tuple(F32(c) for c in (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                   1.33314422036e-1, -3.33332819422e-1))
TANH_X_SMALL = F32(0.625)
TANH_X_SAT = F32(10.0)
TANH_MAX_ULP = 1  # measured bound vs correctly rounded tanh, see tests/test_tanh_model.py


def softmax_scale(head: int) -> np.float32:
    """s, the kernel's ``constexpr_inv_sqrt(HEAD)``: eight fp32 Newton steps ``g = 0.5·(g + x/g)`` from
    g = x = HEAD, then ``1/g``, every operation rounded to fp32.

    The kernel evaluates it at compile time, so it is the same constant on the NPU and in CPU_SIM.  It
    equals ``fp32(1/sqrt(HEAD))`` for most HEADs, not all (HEAD 112: one ULP below; from HEAD 272 on
    eight steps no longer converge for some HEADs).
    """
    x = F32(head)
    g = x
    for _ in range(8):
        g = F32(F32(0.5) * F32(g + F32(x / g)))
    return F32(F32(1.0) / g)


def kernel_cube_k(m: int, n: int, tile_k: int) -> int:
    """The K panel of one ``pto_macro_matmul<m, tile_k, n>`` call: ``calculateFittingCubeK(m, n)`` — the
    largest of 256/128/64 whose m×K and K×n fp16 panels fit a 32 KiB L0A/L0B buffer, else 32 — and at
    most ``tile_k``.

    A compile-time constant of the kernel: it does not depend on tfa-sim's buffer-count knobs, so the
    numerics do not either (the timing model's ``cube_k`` follows the knobs).
    """
    fit = next((k for k in KERNEL_CUBE_KS if m * k * 2 <= KERNEL_L0_BUFFER_BYTES
                and k * n * 2 <= KERNEL_L0_BUFFER_BYTES), KERNEL_CUBE_K_SMALLEST)
    return min(fit, tile_k)


def panels(k: int, panel: int) -> list[slice]:
    """The K panels ``[0, panel), [panel, 2·panel), …`` of a reduction over ``k`` (the last may be short)."""
    step = max(1, panel)
    return [slice(k0, min(k0 + step, k)) for k0 in range(0, k, step)] or [slice(0, 0)]


# --------------------------------------------------------------------------- masks

def causal_mask(first_row: int, first_col: int, rows: int, cols: int) -> np.ndarray:
    """Boolean rows×cols, True (masked) where the global column j > the global row i.

    The tile starts at global row ``first_row`` and column ``first_col``; the
    mask is top-left aligned, as the kernel's (docs/numerics.md, "Masks").
    """
    i = first_row + np.arange(rows, dtype=np.int64)[:, None]
    j = first_col + np.arange(cols, dtype=np.int64)[None, :]
    return j > i


def window_mask(first_row: int, first_col: int, rows: int, cols: int, window: int) -> np.ndarray:
    """Boolean rows×cols of a causal local window: key j is visible to query i when i − W < j ≤ i.

    True means masked (not visible).  ``window`` W ≥ 1 keys per query, the
    query's own position included; W ≥ the sequence length is the causal mask.
    """
    if window < 1:
        raise ValueError(f"window_mask: window must be at least 1 key, got {window}")
    i = first_row + np.arange(rows, dtype=np.int64)[:, None]
    j = first_col + np.arange(cols, dtype=np.int64)[None, :]
    return (j > i) | (j <= i - window)


def check_mask(mask: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """``mask`` as a boolean array of ``shape`` (True = masked), or None; ValueError on a wrong shape.

    Both backends validate with this one function, so they accept the same masks.
    """
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise ValueError(f"mask must be a boolean array (True = masked), got dtype {m.dtype}")
    if m.shape != tuple(shape):
        raise ValueError(f"mask has shape {m.shape}, the scores have {tuple(shape)}")
    return m


def apply_mask(x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``x + MASK_VALUE`` (one fp32 add) where ``mask`` is True, ``x`` unchanged elsewhere."""
    x = np.asarray(x, dtype=F32)
    m = check_mask(mask, x.shape)
    if m is None:
        return x
    with np.errstate(over="ignore"):  # x below about −3.5e32: the add rounds to −inf, as in C
        return np.where(m, x + MASK_VALUE, x).astype(F32, copy=False)


def apply_causal_mask(x: np.ndarray, first_row: int, first_col: int) -> np.ndarray:
    """Add ``MASK_VALUE`` (fp32 add) where column > row, as the kernel's diagonal tile does."""
    x = np.asarray(x, dtype=F32)
    return apply_mask(x, causal_mask(first_row, first_col, x.shape[0], x.shape[1]))


# --------------------------------------------------------------------------- fp16 / bf16

def to_fp16(x: np.ndarray) -> np.ndarray:
    """fp32 → fp16, round to nearest even (the only narrowing cast: ``x_exp``)."""
    with np.errstate(over="ignore"):  # |x| ≥ 65520 rounds to ±inf, as the hardware cast does
        return np.asarray(x, dtype=F32).astype(F16)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """fp32 → bf16, round to nearest even by integer arithmetic on the bits.

    ``(bits + 0x7fff + bit16) >> 16`` rounds the 16 dropped bits to nearest
    even; a carry into the exponent gives the next binade or ±inf, subnormals
    round on the same uniform grid.  NaN becomes ``sign | 0x7fc0`` (quiet, the
    payload dropped), as ml_dtypes' own cast does.  Same rule as C ``f32_to_bf16``.
    """
    b = np.asarray(x, dtype=F32).view(U32)
    rounded = (b + U32(0x7FFF) + ((b >> U32(16)) & U32(1))) >> U32(16)
    nan = ((b >> U32(16)) & U32(0x8000)) | U32(0x7FC0)
    out = np.where((b & U32(0x7FFFFFFF)) > U32(0x7F800000), nan, rounded)
    return out.astype(np.uint16).view(BF16)


def narrow(x: np.ndarray, dtype: Any = F16) -> np.ndarray:
    """fp32 → ``dtype`` (fp16 or bf16), round to nearest even: the cast of ``x_exp``."""
    dt = np.dtype(dtype)
    if dt == np.dtype(F16):
        return to_fp16(x)
    if dt == BF16:
        return to_bf16(x)
    raise ValueError(f"narrow: dtype must be float16 or bfloat16, got {dt}")


def widen(x: np.ndarray) -> np.ndarray:
    """fp16 or bf16 → fp32, exact (bf16: the 16 bits shifted up, as C ``bf16_to_f32``)."""
    a = np.asarray(x)
    if a.dtype == BF16:
        return (a.view(np.uint16).astype(U32) << U32(16)).view(F32)
    if a.dtype == np.dtype(F16):
        return a.astype(F32)
    raise ValueError(f"widen: dtype must be float16 or bfloat16, got {a.dtype}")


def operand_dtype(a: Any, b: Any) -> np.dtype:
    """Element type of a matmul: bf16 when both operands are bf16, else fp16 (others are cast to fp16).

    One bf16 operand with a non-bf16 one is a ValueError: both operands share the input dtype.
    """
    bf = (np.asarray(a).dtype == BF16, np.asarray(b).dtype == BF16)
    if bf[0] != bf[1]:
        raise ValueError("matmul operands must both be bfloat16 or neither; got "
                         f"{np.asarray(a).dtype} and {np.asarray(b).dtype}")
    return BF16 if bf[0] else np.dtype(F16)


def check_out_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a numpy dtype if it is fp16 or bf16 (the types ``x_exp`` may have), else ValueError."""
    dt = np.dtype(dtype)
    if dt not in INPUT_DTYPES:
        raise ValueError(f"out_dtype must be float16 or bfloat16, got {dt}")
    return dt


# --------------------------------------------------------------------------- exp, tanh, softcap

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


def exp_cpu_sim(x: np.ndarray) -> np.ndarray:
    """CPU_SIM's TEXP: ``(float)exp((double)x)`` — the float64 exp, rounded once to fp32.

    numpy's float64 exp stands for the C library's ``exp``; the two gave the same fp32 on every fp32 in
    [−104, 89] (all 2.24e9, glibc 2.36 and numpy 2.4, measured once).  glibc's ``expf`` does not
    (170,648 of them differ).  NaN passes through; overflow gives +inf, underflow +0.
    """
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(np.asarray(x, dtype=F32).astype(np.float64)).astype(F32)


#: The exp of each ``numerics.exp_model`` (npu) and of the cpu_sim reference.
EXP_MODELS = {"tfa": exp_tfa, "libm": exp_libm, "cpu_sim": exp_cpu_sim}


def tanh_tfa(x: np.ndarray) -> np.ndarray:
    """The tfa-sim tanh model: fp32 in, fp32 out, every operation rounded to fp32 (Cephes ``tanhf``).

    1. a = |x| (the sign bit cleared; NaN passes through untouched at the end);
    2. a < 0.625:  z = a·a;  p = ((((T0·z + T1)·z + T2)·z + T3)·z + T4);  r = ((p·z)·a) + a;
    3. 0.625 ≤ a < 10:  e = exp_tfa(a + a);  r = 1 − 2/(e + 1);
    4. a ≥ 10:  r = 1  (tanh(a) rounds to 1 from a ≈ 9.011 on);
    5. result = r with the sign bit of x (so tanh(−0) = −0).

    Accuracy against float64 tanh rounded once to fp32: at most 1 ULP (``TANH_MAX_ULP``)
    on every fp32 value in [−20, 20] (all 2.2e9, measured once), exactly rounded for
    99.661 % of them (84.4 % on [0.625, 2), the exp branch); ±1 beyond, correctly
    rounded.  tests/test_tanh_model.py asserts the bound on every 61st bit pattern in
    [−20, 20] (99.66 % exact) and every 23rd in [−1, 1] (99.72 % exact).
    """
    x = np.asarray(x, dtype=F32)
    bits = x.view(U32)
    a = (bits & U32(0x7FFFFFFF)).view(F32)
    with np.errstate(over="ignore", invalid="ignore"):  # both branches run on every a; one is kept
        z = a * a
        p = np.full_like(z, TANH_POLY[0])
        for c in TANH_POLY[1:]:
            p = p * z + c
        small = (p * z) * a + a
        e = exp_tfa(a + a)
        large = F32(1) - F32(2) / (e + F32(1))
    r = np.where(a < TANH_X_SMALL, small, np.where(a < TANH_X_SAT, large, F32(1))).astype(F32, copy=False)
    out = (r.view(U32) | (bits & U32(0x80000000))).view(F32)
    return np.where(np.isnan(x), x, out).astype(F32, copy=False)


def softcap_scores(x: np.ndarray, scale: np.float32, cap: np.float32) -> np.ndarray:
    """Capped scaled scores ``c·tanh(x·s / c)`` in the contract's fp32 order.

    u = x·s (multiply, round);  v = u / c (division, correctly rounded);
    w = tanh_tfa(v);  y = w·c (multiply, round).
    """
    s, c = F32(scale), F32(cap)
    with np.errstate(over="ignore", under="ignore"):  # v = ±inf for a tiny c: tanh gives ±1
        v = (np.asarray(x, dtype=F32) * s) / c
    return tanh_tfa(v) * c


# --------------------------------------------------------------------------- reductions

def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise fp32 max that is order-free: NaN propagates (a's before b's) and +0 beats −0.

    Equal values give the bitwise AND of the two patterns: the value itself, or
    +0 for a ±0 pair.  Same rule as C ``max_f32``.
    """
    a = np.asarray(a, dtype=F32)
    b = np.asarray(b, dtype=F32)
    tie = (a.view(U32) & b.view(U32)).view(F32)
    out = np.where(a > b, a, np.where(b > a, b, tie))
    out = np.where(np.isnan(b), b, out)
    return np.where(np.isnan(a), a, out).astype(F32, copy=False)


def row_max(x: np.ndarray) -> np.ndarray:
    """Row-wise max of a 2-D fp32 tile; exact and order-free (a row whose max is 0 gets +0 if it holds a +0)."""
    x = np.asarray(x, dtype=F32)
    m = np.max(x, axis=1).astype(F32, copy=False)
    zero = m == 0
    if zero.any():  # ±0 compare equal: pick the sign by the rule, not by numpy's lane order
        has_pos_zero = np.any(x.view(U32) == 0, axis=1)
        m = np.where(zero, np.where(has_pos_zero, F32(0.0), F32(-0.0)), m).astype(F32, copy=False)
    return m


def maximum_first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``std::max(a, b)`` element-wise, CPU_SIM's TMAX: ``a < b ? b : a`` — the first argument on ties
    (so of ±0 the first's sign) and whenever either is NaN."""
    a = np.asarray(a, dtype=F32)
    b = np.asarray(b, dtype=F32)
    return np.where(a < b, b, a).astype(F32, copy=False)


def row_max_first(x: np.ndarray) -> np.ndarray:
    """CPU_SIM's TROWMAX: ``m = x[0]; m = std::max(m, x[j])`` for j = 1 … in order.

    The value is the exact max of the row; of equal values the first is kept (a zero max takes the sign
    of the row's first zero), a NaN in column 0 is the result and any later NaN is skipped.
    """
    x = np.asarray(x, dtype=F32)
    if x.shape[1] == 0:
        return np.full(x.shape[0], -np.inf, F32)
    with np.errstate(invalid="ignore"):
        m = np.fmax.reduce(x, axis=1).astype(F32, copy=False)  # NaN only where the whole row is NaN
    zero = m == 0
    if zero.any():
        first = np.argmax(x == 0, axis=1)
        m = np.where(zero, x[np.arange(x.shape[0]), first], m).astype(F32, copy=False)
    return np.where(np.isnan(x[:, 0]), x[:, 0], m).astype(F32, copy=False)


def row_sum(x: np.ndarray) -> np.ndarray:
    """Row-wise fp32 sum left to right from +0: ``acc = +0; acc = acc + x[j]`` for j = 0, 1, … in order.

    The order of pto-spec's ``TROWSUM`` (column order from the sum's identity +0) and of CPU_SIM's.
    ``np.add.accumulate`` adds strictly in order (each prefix is an output), starting from x[0] instead
    of +0 + x[0]; the two differ only when every prefix is a zero, and then only by a −0 that the final
    ``+ 0`` turns into the +0 the contract gives.
    """
    x = np.asarray(x, dtype=F32)
    rows, cols = x.shape
    if cols == 0:
        return np.zeros(rows, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.add.accumulate(x, axis=1, dtype=F32)[:, -1] + F32(0)


def matmul(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
    """``acc + a @ b`` as one chain, for fp16 or bf16 a (M×K) and b (K×N): TMATMUL (``acc`` None: from +0)
    or pto-spec's TMATMUL_ACC (the chain starts from ``acc``).

    Both operands bf16: bf16 arithmetic; otherwise both are cast to fp16.  Each
    product is one rounded fp32 multiply (exact for fp16; exact for bf16 unless
    it overflows or falls below 2^-126), added to the running fp32 value in order k = 0 … K−1.
    """
    dt = operand_dtype(a, b)
    a32 = widen(np.asarray(a, dtype=dt))
    b32 = widen(np.asarray(b, dtype=dt))
    m, k = a32.shape
    if acc is None:
        out = np.zeros((m, b32.shape[1]), F32)
    else:
        out = np.array(acc, dtype=F32, copy=True)
        if out.shape != (m, b32.shape[1]):
            raise ValueError(f"matmul: the accumulator is {out.shape}, the product {(m, b32.shape[1])}")
    prod = np.empty_like(out)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # bf16 extremes: inf, inf − inf
        for i in range(k):
            np.multiply(a32[:, i, None], b32[None, i, :], out=prod)
            np.add(out, prod, out=out)
    return out


def matmul_add(a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """CPU_SIM's TMATMUL_ACC: a fresh chain ``a @ b`` from +0 (:func:`matmul`), then one fp32 add to ``acc``."""
    chain = matmul(a, b)
    acc32 = np.asarray(acc, dtype=F32)
    if acc32.shape != chain.shape:
        raise ValueError(f"matmul: the accumulator is {acc32.shape}, the product {chain.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        return acc32 + chain


def matmul_f16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` with both operands cast to fp16: exact products, sequential fp32 sum over k."""
    return matmul(np.asarray(a, dtype=F16), np.asarray(b, dtype=F16))
