"""How many tiles of each buffer the TFA kernel holds per core (:class:`BufferPlan`), and the bytes they occupy.

The layout follows docs/kernel.md, "Pipes and buffers": L1 holds q/k/p/v tiles, L0A/L0B one K-panel per half,
L0C one accumulator per half, UB the vector tiles.  The counts come from ``[schedule]`` and from two design
choices registered here, beside the plan that reads them (:mod:`tfa_sim.spec.choices`): the ``l1_exp_max`` ring's
entries (``kernel.exp_ring``) and whether the softmax source and GU input tiles share UB (``kernel.ub_union``).
The legality check, the kernel plan and the sweep report read these figures.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tfa_sim.spec.choices import EXP_RING, UB_UNION, answer, whole
from tfa_sim.spec.config import Config, ScheduleConfig

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


# ---- kernel.exp_ring: the l1_exp_max ring's entries ----------------------------------------------------------
#: What an exp ring value does: the ring's entries for a schedule.
RingEntries = Callable[[ScheduleConfig], int]


def _ring_rule(entries: RingEntries, how: str) -> Callable[[Config], str | None]:
    """The one static rule of every ring: it has an entry.  Whether compute_p overwrites an entry before
    compute_gu reads it depends on how far the stage order lets P run ahead: the ring diagnoses it when it
    happens (:meth:`tfa_sim.buffers.fifo.Ring.write`, exit 3), for every value alike."""
    def rule(config: Config) -> str | None:
        return None if entries(config.schedule) >= 1 else (
            f"kernel.exp_ring = {how} gives the l1_exp_max ring no entry with schedule.qk_preload = "
            f"{config.schedule.qk_preload}; use qk_preload ≥ 1, or exp_ring = fifo or a number")
    return rule


def _fifo_entries(s: ScheduleConfig) -> int:
    return s.cv_fifo_size


def _preload_entries(s: ScheduleConfig) -> int:
    return s.qk_preload


def _entries(n: int) -> RingEntries:
    def entries(_: ScheduleConfig) -> int:
        return n
    return entries


EXP_RING.add("fifo", _fifo_entries, "CV_FIFO_SIZE entries (`l1_exp_max_ififo[CV_FIFO_SIZE]`)",
             "manual fa_performance_kernel.cpp", (_ring_rule(_fifo_entries, "fifo"),), __name__)
EXP_RING.add("preload", _preload_entries, "qk_preload entries (the port's `EXP_RING = QK_PRELOAD`)",
             "PTO-DSL fa_builder.py", (_ring_rule(_preload_entries, "preload"),), __name__)
EXP_RING.add_numbers(1, 64, _entries, "N entries, whatever the FIFO depth and preload",
                     "the port's `FA_EXP_RING` knob (fa_builder.py)", (), __name__)


# ---- kernel.ub_union: the softmax source and GU input tiles in one UB address ------------------------------------
@dataclass(frozen=True)
class UbLayout:
    """Whether compute_p's source tiles and compute_gu's input tiles share their UB addresses (``union``: one
    ping-pong, picked by one counter the two stages advance) or have tiles of their own."""

    union: bool


UB_UNION.add(True, UbLayout(True), "one ping-pong for both, `max(src, pv)` bytes a slot; P and GU take turns",
             "manual fa_performance_kernel.cpp `assign_tile_buffers_union`", (), __name__)
UB_UNION.add(False, UbLayout(False), "tiles of their own: `src + pv` bytes a slot, no turns taken",
             "PTO-DSL fa_builder.py (`qk_vec`, `pv_vec` allocated apart)", (), __name__)


@dataclass(frozen=True)
class BufferPlan:
    """Tiles of each buffer a core holds for the kernel: L1 q/k/p/v, L0A/L0B halves, L0C accumulators; per AIV
    the UB source tiles (``ub_src``; with the UB union also the GU input), GU input tiles of their own
    (``ub_pv``, 0 under the union), ``x_exp`` tiles and the ``l1_exp_max`` ring's entries (``exp_ring``)."""

    l1_q: int
    l1_k: int
    l1_p: int
    l1_v: int
    l0a: int
    l0b: int
    l0c: int
    ub_src: int
    ub_pv: int
    ub_x_exp: int
    exp_ring: int

    @property
    def union(self) -> bool:
        return self.ub_pv == 0


def buffer_plan(config: Config) -> BufferPlan:
    """The tile counts of ``config``: ``[schedule]``'s, the consumer-local ones (``ub_src``, ``l1_p``) from
    ``schedule.local_slot_num`` where not given, the ring's from ``kernel.exp_ring``."""
    s, k = config.schedule, config.kernel
    local = s.local_slot_num
    ub_src = s.ub_src if s.ub_src is not None else local
    union = UB_UNION.value(k.ub_union).does.union
    ring = answer("exp_ring", k.exp_ring, s, wants="a whole number of entries ≥ 1", check=whole(1))
    return BufferPlan(s.l1_q, s.l1_k, s.l1_p if s.l1_p is not None else local, s.l1_v, s.l0a, s.l0b, s.l0c,
                      ub_src, 0 if union else ub_src, s.ub_x_exp, ring)


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
    """Bytes per buffer for ``config`` (counts from :func:`buffer_plan`, tile sizes from ``tiling``)."""
    c, t = config.case, config.tiling
    n = buffer_plan(config)
    half_rows = t.cube_s0 // 2
    l1 = {
        "q": n.l1_q * t.cube_s0 * c.head * FP16,
        "k": n.l1_k * t.cube_s1 * c.head * FP16,
        "p": n.l1_p * t.cube_s0 * t.cube_s1 * FP16,
        "v": n.l1_v * t.cube_s1 * c.head * FP16,
    }
    row_vec = align(half_rows * FP32, ub_align)
    src, pv = align(t.vec_s0 * t.tile_s1 * FP32, ub_align), align(half_rows * c.head * FP32, ub_align)
    ub = {
        # the union: one tile holds either (assign_tile_buffers_union's stride); apart: each its own
        "src": n.ub_src * (max(src, pv) if n.union else src),
        "pv": n.ub_pv * pv,
        "x_exp": n.ub_x_exp * align(t.vec_s0 * t.tile_s1 * FP16, ub_align),
        "l1_exp_max": n.exp_ring * row_vec,  # l1_exp_max_ififo[entries]
        "e_fp32": align(t.vec_s0 * t.tile_s1 * FP32, ub_align),
        "reduce": 2 * t.vec_s0 * ub_align,
        "rows": 4 * row_vec,  # m2_global_max, l2_global_sum, tile max, tile sum
        "running_o": align(half_rows * c.head * FP32, ub_align),
    }
    l0c = max(t.cube_s0 * t.cube_s1, t.cube_s0 * c.head) * FP32
    return BufferUse(l1=l1, ub=ub, l0c_accumulator=l0c)
