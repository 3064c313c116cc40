"""``compute_pv`` on the cube core: P tile · V tile → fp32 CUBE_S0×HEAD, one L0C accumulation."""
from __future__ import annotations

import numpy as np

from tfa_sim.backends import Backend
from tfa_sim.blocks import Block


def compute_pv(backend: Backend, block: Block, p_tile: np.ndarray, v_tile: np.ndarray, t: int) -> np.ndarray:
    """The kTileFactor sub-products accumulate in L0C, so this is one sum over the tile's columns.

    Sub-tiles above the causal diagonal are skipped (their P is +0, so the skip
    does not change a bit).
    """
    cols = block.active_cols(t)
    return backend.compute_pv(p_tile[:, :cols], v_tile[:cols])
