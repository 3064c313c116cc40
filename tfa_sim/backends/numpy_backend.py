"""The stage kernels in numpy, composed from the rounding points of ``numerics``."""
from __future__ import annotations

import numpy as np

from tfa_sim import numerics as nx
from tfa_sim.backends import PResult

F32 = np.float32


class NumpyBackend:
    """Reference implementation; the native backend must match it bit for bit."""

    name = "numpy"

    def __init__(self, exp_model: str = "tfa") -> None:
        self.exp = nx.EXP_MODELS[exp_model]

    def compute_qk(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        return nx.matmul_f16(q, k.T)

    def compute_p(self, x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None,
                  scale: np.float32) -> PResult:
        s = F32(scale)
        tile_max = nx.row_max(x)
        if m_prev is None:
            m = tile_max
            l1_exp_max = np.ones_like(m)
        else:
            m = np.maximum(tile_max, m_prev)
            l1_exp_max = self.exp((m_prev - m) * s)
        e = self.exp((x - m[:, None]) * s)  # subtract the max first, then scale
        tile_sum = nx.row_sum(e)  # the sum uses the unrounded fp32 E
        l = tile_sum if l_prev is None else l1_exp_max * l_prev + tile_sum
        return PResult(nx.to_fp16(e), l1_exp_max, m, l)

    def compute_pv(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        return nx.matmul_f16(p, v)

    def compute_gu(self, o: np.ndarray | None, pv: np.ndarray, l1_exp_max: np.ndarray) -> np.ndarray:
        if o is None:
            return pv.astype(F32, copy=True)
        return l1_exp_max[:, None] * o + pv

    def normalize(self, o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
        return o / l2_global_sum[:, None]
