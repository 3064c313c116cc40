"""Goldens: a float64 reference attention and the reference generator's kernel-ordered golden.

The kernel-ordered golden follows KERNEL.md §5 the way the reference data
generator computes it (float64 scale and exp rounded to fp32, BLAS fp32
matmuls, fp16 P), so it is close to — not bit-equal with — tfa-sim's model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tfa_sim.config import Config
from tfa_sim.inputs import Inputs
from tfa_sim.numerics import MASK_VALUE

F32 = np.float32


def _expand_kv(a: np.ndarray, heads: int) -> np.ndarray:
    """K/V per query head: query head h reads kv head h // (heads // kv_heads)."""
    return np.repeat(a, heads // a.shape[1], axis=1)


def _causal_above(s0: int, s1: int, col0: int = 0) -> np.ndarray:
    """Boolean mask of elements strictly above the diagonal (column > row)."""
    return (col0 + np.arange(s1))[None, :] > np.arange(s0)[:, None]


def reference_attention(inputs: Inputs, config: Config) -> np.ndarray:
    """softmax(Q·Kᵀ/sqrt(HEAD))·V in float64, [batch, heads, S0, HEAD]."""
    c = config.case
    q = inputs.q.astype(np.float64)
    k = _expand_kv(inputs.k, c.heads).astype(np.float64)
    v = _expand_kv(inputs.v, c.heads).astype(np.float64)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(c.head)
    if c.causal:
        s = np.where(_causal_above(c.s0, c.s1), -np.inf, s)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v


@dataclass(frozen=True)
class KernelGolden:
    """The generator's golden files, each with leading [batch, heads] axes; per-tile lists by t."""

    qk: np.ndarray
    p: np.ndarray
    p_fp32: np.ndarray
    pv_tile_fifo: list[np.ndarray]
    exp_max_part: list[np.ndarray]
    global_max_part: list[np.ndarray]
    global_sum_part: list[np.ndarray]
    o_part: list[np.ndarray]
    o: np.ndarray

    def write(self, directory: Path) -> None:
        """Raw little-endian files named as the reference generator names them."""
        singles = {"qk": self.qk, "p": self.p, "p_fp32": self.p_fp32, "o": self.o,
                   "pv": sum(self.pv_tile_fifo[1:], self.pv_tile_fifo[0].copy())}
        for name, a in singles.items():
            np.ascontiguousarray(a).tofile(directory / f"{name}.bin")
        for prefix, parts in (("pv_tile_fifo", self.pv_tile_fifo), ("exp_max_part", self.exp_max_part),
                              ("global_max_part", self.global_max_part), ("global_sum_part", self.global_sum_part),
                              ("o_part", self.o_part)):
            for t, a in enumerate(parts):
                np.ascontiguousarray(a).tofile(directory / f"{prefix}{t}.bin")


def kernel_golden(inputs: Inputs, config: Config) -> KernelGolden:
    """Tile-wise recurrence over all S1/TILE_S1 tiles, full S0 at once, as the generator does it."""
    c, tile = config.case, config.tiling.tile_s1
    scale = 1 / np.sqrt(c.head)  # float64 scalar: (x − max)·scale and exp run in float64
    q32 = inputs.q.astype(F32)
    k32 = _expand_kv(inputs.k, c.heads).astype(F32)
    v32 = _expand_kv(inputs.v, c.heads).astype(F32)
    qk = np.matmul(q32, np.swapaxes(k32, -1, -2))
    p = np.empty(qk.shape, np.float16)
    p_fp32 = np.empty_like(qk)
    pv_parts, em_parts, max_parts, sum_parts, o_parts = [], [], [], [], []
    m = l = o = None
    for t in range(c.s1 // tile):
        cols = slice(t * tile, (t + 1) * tile)
        x = qk[..., cols]
        if c.causal:
            x = np.where(_causal_above(c.s0, tile, t * tile), x + MASK_VALUE, x)
        tile_max = x.max(axis=-1)
        if m is None:
            m_new, em = tile_max, np.ones_like(tile_max)
        else:
            m_new = np.maximum(tile_max, m)
            em = np.exp((m - m_new) * scale).astype(F32)
        e = np.exp((x - m_new[..., None]) * scale).astype(F32)
        tile_sum = e.sum(axis=-1, dtype=F32)
        l = tile_sum if l is None else em * l + tile_sum
        m = m_new
        p_fp32[..., cols] = e
        p[..., cols] = e.astype(np.float16)
        pv = np.matmul(p[..., cols].astype(F32), v32[..., cols, :])
        o = pv if o is None else em[..., None] * o + pv
        pv_parts.append(pv)
        em_parts.append(em)
        max_parts.append(m)
        sum_parts.append(l)
        o_parts.append(o)
    o_final = (o / l[..., None]).astype(F32)
    o_parts[-1] = o_final
    return KernelGolden(qk, p, p_fp32, pv_parts, em_parts, max_parts, sum_parts, o_parts, o_final)
