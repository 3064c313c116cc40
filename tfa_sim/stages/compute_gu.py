"""``compute_gu`` on a vector core: update ``running_o`` (64 rows × HEAD) with one PV tile."""
from __future__ import annotations

import numpy as np

from tfa_sim.backends import Backend


def compute_gu(backend: Backend, running_o: np.ndarray | None, pv_half: np.ndarray,
               l1_exp_max: np.ndarray) -> np.ndarray:
    """O = PV_0 on the first tile, else l1_exp_max ⊙row O + PV_t (fp32)."""
    return backend.compute_gu(running_o, pv_half, l1_exp_max)


def finalize(backend: Backend, running_o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
    """After the last tile: O = running_o ⊘row L (always, unlike the reference kernel's
    single-tile shortcut; see README "Numerics")."""
    return backend.normalize(running_o, l2_global_sum)
