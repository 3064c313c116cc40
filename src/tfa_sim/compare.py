"""The kernel test's comparison rule (KERNEL.md §5) and error metrics.

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


def element_failures(got: np.ndarray, expected: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Boolean array: True where an element fails the rule."""
    g = np.asarray(got, np.float64)
    e = np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(g - e)
        rel = diff / np.abs(e)
        bad = (diff > eps) & (rel > eps)
    return bad | (np.isnan(g) != np.isnan(e))


def compare(got: np.ndarray, expected: np.ndarray, eps: float = EPS) -> Comparison:
    """Apply the rule to two same-shape tensors."""
    if got.shape != expected.shape:
        raise ValueError(f"shape mismatch: got {got.shape}, expected {expected.shape}")
    bad = element_failures(got, expected, eps)
    g = np.asarray(got, np.float64).ravel()
    e = np.asarray(expected, np.float64).ravel()
    n = g.size
    near_zero = int(np.sum((np.abs(g) < NEAR_ZERO) & (np.abs(e) >= NEAR_ZERO)))
    failures = int(bad.sum())
    allowed = int(np.floor(n * eps))
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(g - e)
        rel = np.where(e != 0, diff / np.abs(e), np.where(diff == 0, 0.0, np.inf))
    finite = np.isfinite(diff)
    return Comparison(
        passed=failures <= allowed and near_zero <= MAX_NEAR_ZERO,
        elements=n, failures=failures, allowed_failures=allowed, near_zero=near_zero,
        max_abs_err=float(diff[finite].max()) if finite.any() else 0.0,
        max_rel_err=float(rel[finite].max()) if finite.any() else 0.0,
        first_failure=int(np.flatnonzero(bad.ravel())[0]) if failures else None,
    )
