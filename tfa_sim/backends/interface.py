"""What every stage-kernel backend offers (:class:`Backend`), and the results and argument checks both share."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from tfa_sim.numerics import rounding as nx
from tfa_sim.spec.errors import InputError

F32 = np.float32


class PResult(NamedTuple):
    """What ``compute_p`` produces for one row slice of one logical tile."""

    x_exp: np.ndarray  # out_dtype (fp16 or bf16) rows×tile_s1, goes to p_tile_fifo
    l1_exp_max: np.ndarray  # fp32 rows, exp((M_prev − m)·s) (exp(M_prev − m) with softcap); ones on the first tile
    m2_global_max: np.ndarray  # fp32 rows, running max M (raw-score units; capped units with softcap)
    l2_global_sum: np.ndarray  # fp32 rows, running sum L


class POptions(NamedTuple):
    """The validated options of one ``compute_p`` call (:func:`p_options`)."""

    mask: np.ndarray | None  # boolean rows×cols, True = masked
    softcap: np.float32  # c > 0, or 0 = off
    out_dtype: np.dtype  # float16 or bfloat16


#: ``numerics.exp_model`` choices (the npu reference's exp; cpu_sim has CPU_SIM's own).
EXP_MODELS = ("tfa", "libm")


def check_models(exp_model: str, reference: str) -> tuple[str, str]:
    """``(exp_model, reference)`` if both are known, else InputError naming the bad one (both backends)."""
    if exp_model not in EXP_MODELS:
        raise InputError(f"numerics.exp_model={exp_model!r} is not an exp model; use one of {', '.join(EXP_MODELS)}")
    if reference not in nx.REFERENCES:
        raise InputError(f"numerics.reference={reference!r} is not a reference; use one of "
                         f"{', '.join(nx.REFERENCES)}")
    return exp_model, reference


def p_options(x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None, mask: Any,
              softcap: float, out_dtype: Any) -> POptions:
    """Check the arguments both backends' ``compute_p`` share; ValueError names the bad one.

    Validation lives here once so that the two backends accept and reject the same calls.
    """
    if (m_prev is None) != (l_prev is None):
        raise ValueError("compute_p: m_prev and l_prev are both None (first tile) or both given")
    shape = np.shape(x)
    if len(shape) != 2:
        raise ValueError(f"compute_p: x must be a rows×cols tile, got shape {shape}")
    for name, v in (("m_prev", m_prev), ("l_prev", l_prev)):
        if v is not None and np.shape(v) != shape[:1]:
            raise ValueError(f"compute_p: {name} must hold one value per row ({shape[0]}), got shape {np.shape(v)}")
    cap = F32(softcap)
    if not (math.isfinite(cap) and cap >= 0):  # math: numpy's isfinite on one scalar takes 1 µs of 4 here
        raise ValueError(f"compute_p: softcap must be a finite number ≥ 0 (0 = off), got {softcap!r}")
    return POptions(nx.check_mask(mask, shape), cap, nx.check_out_dtype(out_dtype))


class Backend(Protocol):
    """The four stage kernels, the final normalisation and the split-S1 combine, over tiles.

    Every method returns fresh arrays and leaves its inputs untouched; both
    backends give bit-identical results for the ``tfa`` exp model and for the
    cpu_sim reference (docs/numerics.md).  ``reference`` ("npu" or "cpu_sim")
    says whose orders the kernels follow.
    """

    name: str
    reference: str

    def compute_qk(self, q: np.ndarray, k: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
        """One TMATMUL of q (M×K) · k (N×K)ᵀ → fp32 M×N, a sequential fp32 sum over K from +0; with ``acc``
        (fp32 M×N) one TMATMUL_ACC: npu continues the sum from ``acc``, cpu_sim adds the fresh sum to it.

        q and k are both bf16, or both anything else, which is cast to fp16.
        """

    def compute_p(self, x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None,
                  scale: np.float32, mask: np.ndarray | None = None, softcap: float = 0.0,
                  out_dtype: Any = np.float16) -> PResult:
        """Online softmax of a fp32 rows×tile_s1 slice; ``m_prev is None`` on the first tile.

        ``mask`` (boolean rows×cols, True = masked) adds ``MASK_VALUE`` to those
        scores: to the raw scores when ``softcap == 0``, after the cap otherwise.
        ``softcap = c > 0`` replaces the scores by ``c·tanh(x·s/c)`` and the
        recurrence then runs in capped units without a further scale.
        ``x_exp`` is narrowed to ``out_dtype`` (fp16 or bf16, the input dtype).
        With the defaults this is the kernel's step bit for bit.
        """

    def compute_pv(self, p: np.ndarray, v: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
        """One TMATMUL of p (M×T) · v (T×HEAD) → fp32 M×HEAD, or with ``acc`` one TMATMUL_ACC (as
        ``compute_qk``); both bf16 or both fp16."""

    def compute_gu(self, o: np.ndarray | None, pv: np.ndarray, l1_exp_max: np.ndarray) -> np.ndarray:
        """``running_o`` update: pv on the first tile, else l1_exp_max ⊙row o + pv."""

    def normalize(self, o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
        """Final O = running_o ⊘row L."""

    def combine(self, o_parts: Sequence[np.ndarray], m_parts: Sequence[np.ndarray],
                l_parts: Sequence[np.ndarray], scale: np.float32) -> np.ndarray:
        """Final O of rows split over S1 (flash-decoding) from the N chunks' unnormalised results.

        ``o_parts[n]`` is chunk n's running O (fp32 rows×HEAD, before the
        division), ``m_parts[n]``/``l_parts[n]`` its running max and sum (fp32
        rows).  ``scale`` is s, or 1.0 when the chunks ran with softcap.  Order:
        M = max over n; f = exp((m_n − M)·scale); acc_o += f ⊙row o_n;
        acc_l += f·l_n (n = 0 … N−1, from +0); O = acc_o ⊘row acc_l.
        """


def combine_parts(o_parts: Sequence[np.ndarray], m_parts: Sequence[np.ndarray],
                  l_parts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The N chunks stacked as fresh C-contiguous fp32 (N×rows×HEAD, N×rows, N×rows).

    ValueError on no parts or mismatched shapes, for both backends alike.
    """
    n = len(o_parts)
    if n == 0 or len(m_parts) != n or len(l_parts) != n:
        raise ValueError(f"combine: need N ≥ 1 parts of each kind, got {n} o, {len(m_parts)} m, {len(l_parts)} l")
    o = np.ascontiguousarray(np.stack([np.asarray(v, dtype=F32) for v in o_parts]))
    m = np.ascontiguousarray(np.stack([np.asarray(v, dtype=F32) for v in m_parts]))
    l = np.ascontiguousarray(np.stack([np.asarray(v, dtype=F32) for v in l_parts]))
    if o.ndim != 3 or m.shape != o.shape[:2] or l.shape != o.shape[:2]:
        raise ValueError(f"combine: o parts must be rows×HEAD and m, l parts rows long; got o {o.shape[1:]}, "
                         f"m {m.shape[1:]}, l {l.shape[1:]}")
    return o, m, l
