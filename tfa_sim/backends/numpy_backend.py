"""The stage kernels in numpy, composed from the rounding points of ``numerics``."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tfa_sim.backends.interface import PResult, check_models, combine_parts, p_options
from tfa_sim.numerics import rounding as nx

F32 = np.float32


class NumpyBackend:
    """Reference implementation; the native backend must match it bit for bit."""

    name = "numpy"

    def __init__(self, exp_model: str = "tfa", reference: str = "npu") -> None:
        self.exp_model, self.reference = check_models(exp_model, reference)
        cpu_sim = reference == "cpu_sim"
        self.exp = nx.EXP_MODELS["cpu_sim" if cpu_sim else exp_model]
        self._row_max = nx.row_max_first if cpu_sim else nx.row_max
        self._max = nx.maximum_first if cpu_sim else nx.maximum
        self._acc = nx.matmul_add if cpu_sim else nx.matmul

    def _matmul(self, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None) -> np.ndarray:
        """TMATMUL (``acc`` None), else TMATMUL_ACC as the reference defines it."""
        return nx.matmul(a, b) if acc is None else self._acc(a, b, acc)

    def compute_qk(self, q: np.ndarray, k: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
        return self._matmul(q, np.asarray(k).T, acc)

    def compute_p(self, x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None,
                  scale: np.float32, mask: np.ndarray | None = None, softcap: float = 0.0,
                  out_dtype: Any = np.float16) -> PResult:
        """The online-softmax step (docs/numerics.md, steps 3–10, "Masks", "Logit softcap").

        Without softcap the mask goes on the raw scores and the scale comes after
        the max subtraction, ``exp((x − m)·s)``; with softcap the scores are capped
        and scaled first, the mask goes on the capped scores and ``exp(y − m)``
        takes no further scale.
        """
        opt = p_options(x, m_prev, l_prev, mask, softcap, out_dtype)
        s = F32(scale)
        capped = bool(opt.softcap > 0)
        y = nx.softcap_scores(x, s, opt.softcap) if capped else np.asarray(x, dtype=F32)
        y = nx.apply_mask(y, opt.mask)
        tile_max = self._row_max(y)
        if m_prev is None:
            m = tile_max
            l1_exp_max = np.ones_like(m)
        else:
            m_prev = np.asarray(m_prev, dtype=F32)
            m = self._max(tile_max, m_prev)
            l1_exp_max = self._exp_shifted(m_prev, m, s, capped)
        e = self._exp_shifted(y, m[:, None], s, capped)  # subtract the max first, then scale
        tile_sum = nx.row_sum(e)  # the sum uses the unrounded fp32 E
        l = tile_sum if l_prev is None else l1_exp_max * np.asarray(l_prev, dtype=F32) + tile_sum
        return PResult(nx.narrow(e, opt.out_dtype), l1_exp_max, m, l)

    def _exp_shifted(self, y: np.ndarray, m: np.ndarray, s: np.float32, capped: bool) -> np.ndarray:
        """``exp(y − m)`` with softcap, else ``exp((y − m)·s)``: subtract, round; scale, round; exp."""
        with np.errstate(over="ignore", invalid="ignore"):  # −inf or NaN scores: same IEEE results as C
            d = y - m
            return self.exp(d if capped else d * s)

    def compute_pv(self, p: np.ndarray, v: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
        return self._matmul(p, v, acc)

    def compute_gu(self, o: np.ndarray | None, pv: np.ndarray, l1_exp_max: np.ndarray) -> np.ndarray:
        if o is None:
            return pv.astype(F32, copy=True)
        return l1_exp_max[:, None] * o + pv

    def normalize(self, o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
        return o / l2_global_sum[:, None]

    def combine(self, o_parts: Sequence[np.ndarray], m_parts: Sequence[np.ndarray],
                l_parts: Sequence[np.ndarray], scale: np.float32) -> np.ndarray:
        """The split-S1 combine (docs/numerics.md, "Split-S1 combine"), chunk by chunk in order."""
        o, m, l = combine_parts(o_parts, m_parts, l_parts)
        s = F32(scale)
        big_m = m[0]
        for m_n in m[1:]:
            big_m = nx.maximum(big_m, m_n)
        acc_o = np.zeros(o.shape[1:], F32)
        acc_l = np.zeros(o.shape[1], F32)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for o_n, m_n, l_n in zip(o, m, l):
                f = self.exp((m_n - big_m) * s)
                acc_o = acc_o + f[:, None] * o_n
                acc_l = acc_l + f * l_n
            return acc_o / acc_l[:, None]
