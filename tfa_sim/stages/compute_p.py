"""``compute_p`` on a vector core: online softmax of one Vec_S0×TILE_S1 row slice."""
from __future__ import annotations

import numpy as np

from tfa_sim.backends import Backend, PResult
from tfa_sim.blocks import Block
from tfa_sim.numerics import MASK_VALUE


def apply_causal_mask(x: np.ndarray, first_row: int, first_col: int) -> np.ndarray:
    """Add ``MASK_VALUE`` (−3.40282e38, fp32 add) where column > row, as the kernel's diagonal tile does."""
    rows = first_row + np.arange(x.shape[0])[:, None]
    cols = first_col + np.arange(x.shape[1])[None, :]
    return np.where(cols > rows, x + MASK_VALUE, x).astype(np.float32, copy=False)


def compute_p(backend: Backend, block: Block, x: np.ndarray, t: int, first_row: int,
              m_prev: np.ndarray | None, l_prev: np.ndarray | None, scale: np.float32) -> PResult:
    """Softmax step of tile ``t`` for the rows starting at global row ``first_row``.

    A tile fully above the diagonal needs no special case: the general step gives
    exactly the kernel's ``x_exp = 0``, ``exp_max = 1`` (exp(0) is exactly 1 and
    exp of the masked scores is exactly +0 in the exp model).
    """
    if block.needs_mask(t, first_row):
        x = apply_causal_mask(x, first_row, t * block.tile_s1)
    return backend.compute_p(x, m_prev, l_prev, scale)
