"""``runTFA``: the kernel's programs, per unit, as its design choices order them (docs/kernel.md, "Builds").

A unit's program (:func:`aic_unit`, :func:`aiv_unit`): the AIC loads Q and runs the QK prologue (``qk_preload``
tiles), each AIV the P prologue; then the steady loop of ``kernel.stage_order`` (the module its registry value
names: the manual kernel's :mod:`~tfa_sim.stages.order_qk_pv`, the port's :mod:`~tfa_sim.stages.order_pv_qk`, or a
plugin's).  What surrounds the units is the launch grid's (``kernel.launch_grid``, :mod:`tfa_sim.spec.geometry`):

* ``blocks`` — one unit per dispatched block, then the block's epilogue: the AIC waits for the credits of the QK
  and PV FIFOs nobody waited for and for both AIVs' block end (``CV_BLOCK_END``), then frees Q; each AIV drains
  the P FIFO's credits and signals block end after its output store;
* ``persistent`` — a core's units in one program, the FIFOs, flags and L1/L0/UB tiles declared once per core, so
  the FIFOs count tiles across the units (:meth:`BlockKernel.unit_view`) and one unit's work runs into the
  next's; after each unit the AIC frees its Q tile, and after the last unit each core drains the credits nobody
  waited for (the pipes' destructors, ``TPipe::~TPipe``): the port has no block-end handshake.

The buffers the kernel indexes by its own counters are indexed the same way here (docs/kernel.md, "Protocol
details that change timing"): the L0C accumulators as ``kernel.accumulators`` assigns them
(:mod:`~tfa_sim.stages.accumulators`); each AIV's UB source tile and ``x_exp`` tile by one counter that advances
once per ``compute_p`` call and, under the UB union (``kernel.ub_union``), once per ``compute_gu`` call
(``p_gu_src_pingpong_id``), across a persistent core's units.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator

import simpy

from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.core import Core
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Instr, Stats
from tfa_sim.spec.blocks import Block, prefetch_signature
from tfa_sim.spec.config import Config
from tfa_sim.spec.geometry import CoreUnits, Dispatch
from tfa_sim.spec.units import LANES
from tfa_sim.stages import STAGES
from tfa_sim.stages.block_kernel import BlockKernel, Numerics
from tfa_sim.stages.compute_p import compute_p
from tfa_sim.stages.compute_qk import compute_qk
from tfa_sim.stages.epilogue import epilogue
from tfa_sim.stages.plan import KernelPlan


def aic_unit(k: BlockKernel) -> Program:
    """The AIC's issue stream for one unit: the QK prologue (its first call loads Q), the steady loop; returns Q's
    L1 slot."""
    tiles, preload, kf = k.block.tiles, k.plan.shape.qk_preload, k.plan.shape.k_tile_factor
    q_l1 = k.buf.l1_q.slot()
    acc = k.plan.accumulators(k.buf.l0c)
    for t in range(min(preload, tiles)):  # prologue
        for s in range(kf):
            yield from compute_qk(k, t, s, q_l1, acc.qk())
    yield from k.plan.stage_order.aic_steady(k, q_l1, acc)
    return q_l1


def aiv_unit(k: BlockKernel, lane: int, src: int) -> Program:
    """AIV ``lane``'s issue stream for one unit from ping-pong counter ``src``: the P prologue, the steady loop;
    returns (the counter after it, the unit's last ``TSTORE O``)."""
    tiles, preload, kf = k.block.tiles, k.plan.shape.qk_preload, k.plan.shape.k_tile_factor
    for t in range(min(preload, tiles)):  # prologue
        for r in range(kf):
            yield from compute_p(k, lane, t, r, src)
            src += 1
    return (yield from k.plan.stage_order.aiv_steady(k, lane, src))


# ---- the hardware-dispatched grid: a block per dispatch -----------------------------------------------------
def aic_block(k: BlockKernel) -> Program:
    """The AIC's issue stream for one block: its unit, then its epilogue."""
    q_l1 = yield from aic_unit(k)
    yield from epilogue(k, "aic", "unit", k.block.tiles, q_l1=q_l1)


def aiv_block(k: BlockKernel, lane: int) -> Program:
    """AIV ``lane``'s issue stream for one block: its unit, then its epilogue."""
    _, store = yield from aiv_unit(k, lane, 0)
    assert isinstance(store, Instr), "a unit has at least one tile"
    yield from epilogue(k, "aiv", "unit", k.block.tiles, lane)


# ---- the persistent grid: a core's units in one program --------------------------------------------------
def unit_views(k: BlockKernel, units: tuple[Block, ...]) -> Iterator[BlockKernel]:
    """``k`` as each unit of the core sees it: the FIFOs count on from the tiles of the units before."""
    base = 0
    for block in units:
        yield k if block is k.block else k.unit_view(block, base)
        base += block.tiles


def aic_core(k: BlockKernel, units: tuple[Block, ...]) -> Program:
    """The AIC's issue stream over the core's units, each followed by its epilogue, then the core's."""
    for view in unit_views(k, units):
        q_l1: Slot = yield from aic_unit(view)
        yield from epilogue(view, "aic", "unit", view.block.tiles, q_l1=q_l1)
    yield from epilogue(k, "aic", "core", sum(b.tiles for b in units))


def aiv_core(k: BlockKernel, units: tuple[Block, ...], lane: int) -> Program:
    """AIV ``lane``'s issue stream over the core's units, then the core's epilogue."""
    src = 0  # the UB source/x_exp ping-pong counter runs on across the units
    for view in unit_views(k, units):
        src, _ = yield from aiv_unit(view, lane, src)
    yield from epilogue(k, "aiv", "core", sum(b.tiles for b in units), lane)


class TfaKernel:
    """The TFA kernel for the chip engine: a run's :class:`~tfa_sim.stages.plan.KernelPlan` (its launch geometry
    among it), and each dispatched item's programs on a core."""

    name = "tfa"
    stages = STAGES

    def __init__(self, plan: KernelPlan, numerics: Numerics | None = None) -> None:
        self.plan, self.numerics = plan, numerics

    @property
    def config(self) -> Config:
        return self.plan.config

    @property
    def dispatch(self) -> Dispatch:
        return self.plan.geometry.main

    def template_key(self, block: Block | CoreUnits) -> Hashable | None:
        """Timing only: the block's own key (equal for blocks that issue the same program and read the same
        K/V lines); blocks some of whose inputs the host prefetched share a template with the blocks that find
        the same of theirs in the L2 (:func:`~tfa_sim.spec.blocks.prefetch_signature`); with numerics every
        block moves its own data, and a persistent core's units run into each other, so neither is replayed."""
        if self.numerics is not None or not isinstance(block, Block):
            return None
        signature = prefetch_signature(block, self.plan.config)
        return block.key if block.key is None or signature == (False, 0) else (block.key, signature)

    def start(self, env: simpy.Environment, core: Core, block: Block | CoreUnits, stats: Stats) -> BlockKernel:
        """The dispatched item's buffers on ``core`` and its programs: the AIC's, then each AIV's (a persistent
        core's :class:`~tfa_sim.spec.geometry.CoreUnits`: the programs loop over its units)."""
        units = block.units
        persistent = isinstance(block, CoreUnits)
        k = BlockKernel(env, core, units[0], self.plan, self.numerics, stats, named_lines=persistent)
        if persistent:
            k.programs = [(core.cube, aic_core(k, units)),
                          *((core.vec[a], aiv_core(k, units, a)) for a in range(LANES))]
        else:
            k.programs = [(core.cube, aic_block(k)), *((core.vec[a], aiv_block(k, a)) for a in range(LANES))]
        return k
