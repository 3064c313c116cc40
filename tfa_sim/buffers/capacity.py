"""Bytes each buffer of the TFA kernel occupies, per core, for a config.

The layout follows docs/kernel.md, "Pipes and buffers": L1 holds q/k/p/v tiles,
L0A/L0B one K-panel per half, L0C one accumulator per half, UB the vector
tiles.  The legality check and the sweep report both read these figures.
"""
from __future__ import annotations

from dataclasses import dataclass

from tfa_sim.spec.config import Config

FP16 = 2
FP32 = 4
CUBE_K_CHOICES = (256, 128, 64, 32)


def align(nbytes: int, to: int) -> int:
    return -(-nbytes // to) * to


def cube_k(m: int, n: int, kdim: int, l0a_half: int, l0b_half: int) -> int | None:
    """The kernel's ``CubeK``: largest of 256/128/64/32 dividing ``kdim`` whose panels fit L0A/L0B halves."""
    for k in CUBE_K_CHOICES:
        if k <= kdim and kdim % k == 0 and m * k * FP16 <= l0a_half and k * n * FP16 <= l0b_half:
            return k
    return None


@dataclass(frozen=True)
class BufferUse:
    """Per-core bytes of each buffer, with the parts that make them up."""

    l1: dict[str, int]
    ub: dict[str, int]
    l0c_accumulator: int  # one accumulator (QK or PV, whichever is larger)

    @property
    def l1_bytes(self) -> int:
        return sum(self.l1.values())

    @property
    def ub_bytes(self) -> int:
        return sum(self.ub.values())


def buffer_use(config: Config, ub_align: int = 32) -> BufferUse:
    """Bytes per buffer for ``config`` (counts from ``schedule``, tile sizes from ``tiling``)."""
    c, t, s = config.case, config.tiling, config.schedule
    half_rows = t.cube_s0 // 2
    l1 = {
        "q": s.l1_q * t.cube_s0 * c.head * FP16,
        "k": s.l1_k * t.cube_s1 * c.head * FP16,
        "p": s.l1_p * t.cube_s0 * t.cube_s1 * FP16,
        "v": s.l1_v * t.cube_s1 * c.head * FP16,
    }
    row_vec = align(half_rows * FP32, ub_align)
    ub = {
        "src": s.ub_src * align(max(t.vec_s0 * t.tile_s1, half_rows * c.head) * FP32, ub_align),
        "x_exp": s.ub_x_exp * align(t.vec_s0 * t.tile_s1 * FP16, ub_align),
        "l1_exp_max": s.cv_fifo_size * row_vec,  # l1_exp_max_ififo[CV_FIFO_SIZE]
        "e_fp32": align(t.vec_s0 * t.tile_s1 * FP32, ub_align),
        "reduce": 2 * t.vec_s0 * ub_align,
        "rows": 4 * row_vec,  # m2_global_max, l2_global_sum, tile max, tile sum
        "running_o": align(half_rows * c.head * FP32, ub_align),
    }
    l0c = max(t.cube_s0 * t.cube_s1, t.cube_s0 * c.head) * FP32
    return BufferUse(l1=l1, ub=ub, l0c_accumulator=l0c)
