"""``compute_qk`` on the cube core: one CUBE_S0×CUBE_S1 fp32 sub-tile of Q·Kᵀ."""
from __future__ import annotations

import numpy as np

from tfa_sim.backends import Backend
from tfa_sim.blocks import Block


def compute_qk(backend: Backend, block: Block, q_block: np.ndarray, k_sub: np.ndarray,
               t: int, sub: int) -> np.ndarray:
    """fp32 scores of sub-tile ``sub`` of logical tile ``t``.

    A sub-tile entirely above the causal diagonal skips load and matmul; its
    FIFO slot is then defined as +0 (the vector side masks all of it anyway).
    """
    if not block.sub_tile_active(t, sub):
        return np.zeros((q_block.shape[0], k_sub.shape[0]), np.float32)
    return backend.compute_qk(q_block, k_sub)
