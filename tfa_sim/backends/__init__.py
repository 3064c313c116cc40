"""Stage-kernel backends: the same four tile kernels in numpy and in native C.

A backend turns one tile into the next with the kernel's rounding points
(``tfa_sim.numerics``).  Both backends are bit-identical for the ``tfa`` exp
model; ``get_backend`` is the one place that chooses between them.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from tfa_sim.errors import InputError


class PResult(NamedTuple):
    """What ``compute_p`` produces for one row slice of one logical tile."""

    x_exp: np.ndarray  # fp16 rows×tile_s1, goes to p_tile_fifo
    l1_exp_max: np.ndarray  # fp32 rows, exp((M_prev − m)·s); ones on the first tile
    m2_global_max: np.ndarray  # fp32 rows, running max M
    l2_global_sum: np.ndarray  # fp32 rows, running sum L


class Backend(Protocol):
    """The four stage kernels plus the final normalisation, over tiles."""

    name: str

    def compute_qk(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """fp16 q (M×HEAD) · fp16 k (N×HEAD)ᵀ → fp32 M×N."""

    def compute_p(self, x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None,
                  scale: np.float32) -> PResult:
        """Online softmax of a fp32 rows×tile_s1 slice; ``m_prev is None`` on the first tile."""

    def compute_pv(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        """fp16 p (M×T) · fp16 v (T×HEAD) → fp32 M×HEAD, one accumulation over T."""

    def compute_gu(self, o: np.ndarray | None, pv: np.ndarray, l1_exp_max: np.ndarray) -> np.ndarray:
        """``running_o`` update: pv on the first tile, else l1_exp_max ⊙row o + pv."""

    def normalize(self, o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
        """Final O = running_o ⊘row L."""


BACKENDS = ("numpy", "native")


def get_backend(name: str, exp_model: str = "tfa") -> Backend:
    """Return the backend called ``name`` using exp model ``exp_model``."""
    if name == "numpy":
        from tfa_sim.backends.numpy_backend import NumpyBackend

        return NumpyBackend(exp_model)
    if name == "native":
        from tfa_sim.backends.native_backend import NativeBackend

        return NativeBackend(exp_model)
    raise InputError(f"numerics.backend={name!r} is not a backend; use one of {', '.join(BACKENDS)}")
