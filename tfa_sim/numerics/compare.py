"""The kernel test's comparison rule (docs/kernel.md, "Comparison rule") and error metrics.

An element fails when both |got − exp| > eps and |got − exp|/|exp| > eps, or
when exactly one of the two is NaN.  A tensor fails when failures exceed
floor(N·eps) or when more than 1000 elements are (near) zero — |got| < 1e-12 —
where the golden is not.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

EPS = 1e-3
EPS_EXP_MAX = 1e-2
#: The rule's eps for bf16 runs: fp16's 1e-3 is about twice its unit roundoff (2⁻¹¹); bf16's unit roundoff is
#: 2⁻⁸, so the same rule there is 2·2⁻⁸ ≈ 8e-3 (docs/numerics.md, "bf16").
EPS_BF16 = 8e-3


def rule_eps(dtype: str) -> float:
    """The comparison rule's eps for outputs of a run with ``case.dtype`` = ``dtype``."""
    return EPS_BF16 if dtype == "bf16" else EPS
NEAR_ZERO = 1e-12
MAX_NEAR_ZERO = 1000


@dataclass(frozen=True)
class Comparison:
    passed: bool
    elements: int
    failures: int
    allowed_failures: int
    near_zero: int
    max_abs_err: float
    max_rel_err: float
    first_failure: int | None  # flat index of the first failing element

    def to_dict(self) -> dict:
        return asdict(self)


def element_failures(got: np.ndarray, expected: np.ndarray, eps: float = EPS, atol: float | None = None,
                     rtol: float | None = None) -> np.ndarray:
    """Boolean array: True where an element fails the rule (``atol``/``rtol`` default to ``eps``)."""
    g = np.asarray(got, np.float64)
    e = np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(g - e)
        rel = diff / np.abs(e)
        bad = (diff > (eps if atol is None else atol)) & (rel > (eps if rtol is None else rtol))
    return bad | (np.isnan(g) != np.isnan(e))


#: Elements :func:`compare` takes at once: its float64 temporaries (about 64 bytes an element) stay a few tens of
#: MiB however large the output (S0 = 65536 rows of HEAD 128 are 8 M elements).
COMPARE_CHUNK = 1 << 18


def compare(got: np.ndarray, expected: np.ndarray, eps: float = EPS, atol: float | None = None,
            rtol: float | None = None) -> Comparison:
    """Apply the rule to two same-shape tensors (the failure budget is floor(N·eps)), in chunks of
    :data:`COMPARE_CHUNK` elements: counts, maxima and the first failure combine exactly across chunks."""
    if got.shape != expected.shape:
        raise ValueError(f"shape mismatch: got {got.shape}, expected {expected.shape}")
    g_all, e_all = np.ravel(got), np.ravel(expected)
    n = g_all.size
    failures = near_zero = 0
    first: int | None = None
    max_abs = max_rel = None
    for lo in range(0, n, COMPARE_CHUNK):
        g = np.asarray(g_all[lo:lo + COMPARE_CHUNK], np.float64)
        e = np.asarray(e_all[lo:lo + COMPARE_CHUNK], np.float64)
        bad = element_failures(g, e, eps, atol, rtol)
        near_zero += int(np.sum((np.abs(g) < NEAR_ZERO) & (np.abs(e) >= NEAR_ZERO)))
        count = int(bad.sum())
        if count and first is None:
            first = lo + int(np.flatnonzero(bad)[0])
        failures += count
        with np.errstate(invalid="ignore", divide="ignore"):
            diff = np.abs(g - e)
            rel = np.where(e != 0, diff / np.abs(e), np.where(diff == 0, 0.0, np.inf))
        finite = np.isfinite(diff)
        if finite.any():
            chunk_abs, chunk_rel = float(diff[finite].max()), float(rel[finite].max())
            max_abs = chunk_abs if max_abs is None else max(max_abs, chunk_abs)
            max_rel = chunk_rel if max_rel is None else max(max_rel, chunk_rel)
    allowed = int(np.floor(n * eps))
    return Comparison(
        passed=failures <= allowed and near_zero <= MAX_NEAR_ZERO,
        elements=n, failures=failures, allowed_failures=allowed, near_zero=near_zero,
        max_abs_err=max_abs or 0.0, max_rel_err=max_rel or 0.0, first_failure=first,
    )


def ulp_distance(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Units in the last place between same-dtype fp16/bf16/fp32 arrays (0 = bit-identical; NaNs count as 0
    when both are NaN)."""
    bits = np.int16 if got.dtype.itemsize == 2 else np.int32

    def ordered(a: np.ndarray) -> np.ndarray:
        i = a.view(bits).astype(np.int64)
        return np.where(i < 0, np.iinfo(bits).min - i, i)  # monotone in the float value, ±0 adjacent
    d = np.abs(ordered(got) - ordered(expected.astype(got.dtype, copy=False)))
    nan = np.isnan(got.astype(np.float32)) & np.isnan(expected.astype(np.float32))
    return np.where(nan, 0, d)


ULP_BINS = ((0, 0), (1, 1), (2, 3), (4, 15), (16, 255), (256, None))


def ulp_histogram(ulps: np.ndarray) -> dict[str, int]:
    """Counts of elements per ULP-distance bin: 0, 1, 2-3, 4-15, 16-255, ≥256."""
    out = {}
    for lo, hi in ULP_BINS:
        label = str(lo) if lo == hi else (f"{lo}-{hi}" if hi else f">={lo}")
        out[label] = int(np.count_nonzero((ulps >= lo) & (ulps <= hi))) if hi is not None else int(
            np.count_nonzero(ulps >= lo))
    return out
