"""``runTFA``: the kernel's program of one block, per unit, as the kernel orders its stage calls.

The AIC loads Q, runs the QK prologue (``qk_preload`` tiles), then per logical
tile t and sub-tile s ``compute_qk(t + qk_preload, s)`` (if that tile exists)
followed by ``compute_pv(t, s)``; each AIV runs the P prologue, then per tile
the row slices of ``compute_p(t + qk_preload)`` before ``compute_gu(t)``.  The
kernel itself calls its stages per sub-tile or row slice from this loop, so
the loops live here and each stage file holds one call (docs/kernel.md,
"Orchestration").  Epilogues drain the credits nobody waited for; the AIVs
signal block end, which the AIC waits for.

The buffers the kernel indexes by its own counters are indexed the same way
here (docs/kernel.md, "Protocol details that change timing"):

* L0C accumulators: one running index (``assign_running_acc_tile``) — each
  prologue QK sub-tile takes the next accumulator; in the steady loop the QK
  accumulator (if a next tile exists) and the PV accumulator are assigned once
  per iteration; in the tail PV alone takes the next one;
* each AIV's UB source tile and ``x_exp`` tile: one counter that advances once
  per ``compute_p`` call and once per ``compute_gu`` call
  (``p_gu_src_pingpong_id``).

``qk_preload = 0`` is tfa-sim's no-preload schedule (QK(t), then PV(t)).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence

import simpy

from tfa_sim.buffers.capacity import cube_k
from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.core import Core
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Instr, Stats
from tfa_sim.numerics.rounding import input_dtype, softmax_scale
from tfa_sim.spec.blocks import Block, make_blocks, order_blocks, persistent_order, prefetch_signature
from tfa_sim.spec.config import Config
from tfa_sim.spec.costs import Costs
from tfa_sim.spec.hardware import Hardware
from tfa_sim.spec.masks import Mask
from tfa_sim.spec.units import LANES
from tfa_sim.stages import EPILOGUE, STAGES
from tfa_sim.stages.block_kernel import BlockKernel, Numerics, Shape, matmul_panels
from tfa_sim.stages.compute_gu import compute_gu
from tfa_sim.stages.compute_p import compute_p
from tfa_sim.stages.compute_pv import compute_pv
from tfa_sim.stages.compute_qk import compute_qk, load_q
from tfa_sim.stages.run_dsl import dsl_aic_program, dsl_aiv_program


def aic_program(k: BlockKernel) -> Program:
    """The AIC's issue stream for one block."""
    tiles, preload, kf = k.block.tiles, k.shape.qk_preload, k.shape.k_tile_factor
    q_load, q_l1 = yield from load_q(k)
    acc = 0  # the kernel's running accumulator index
    if preload == 0:  # tfa-sim's no-preload schedule: QK(t) then PV(t)
        for t in range(tiles):
            for s in range(kf):
                yield from compute_qk(k, t, s, q_load, q_l1, acc)
                acc += 1
            pv_acc = k.l0c.slot(acc)
            acc += 1
            for s in range(kf):
                yield from compute_pv(k, t, s, pv_acc)
    for t in range(min(preload, tiles)):  # prologue: a fresh accumulator per QK sub-tile
        for s in range(kf):
            yield from compute_qk(k, t, s, q_load, q_l1, acc)
            acc += 1
    for t in range(tiles if preload else 0):  # steady loop and tail
        nxt = t + preload
        qk_acc = acc
        acc += nxt < tiles
        pv_acc = k.l0c.slot(acc)
        acc += 1
        for s in range(kf):
            if nxt < tiles:
                yield from compute_qk(k, nxt, s, q_load, q_l1, qk_acc)
            yield from compute_pv(k, t, s, pv_acc)
    yield from aic_epilogue(k, q_l1)


def aiv_program(k: BlockKernel, lane: int) -> Program:
    """AIV ``lane``'s issue stream for one block."""
    tiles, preload, kf = k.block.tiles, k.shape.qk_preload, k.shape.k_tile_factor
    src = 0  # the kernel's shared source/x_exp ping-pong counter
    for t in range(min(preload, tiles)):  # prologue
        for r in range(kf):
            yield from compute_p(k, lane, t, r, src)
            src += 1
    store = None
    for t in range(tiles):
        nxt = t + preload  # with preload 0: P(t) right before GU(t)
        if nxt < tiles:
            for r in range(kf):
                yield from compute_p(k, lane, nxt, r, src)
                src += 1
        store = yield from compute_gu(k, lane, t, src)
        src += 1
    assert store is not None
    yield from aiv_epilogue(k, lane, store)


def aic_epilogue(k: BlockKernel, q_l1: Slot) -> Program:
    """Wait for the credits of the QK and PV FIFOs nobody waited for and for both AIVs' block end."""
    tiles = k.block.tiles
    drain = [fifo.consumed[a] for fifo in (k.fifos.qk, k.fifos.pv) for a in range(LANES)
             for _ in range(fifo.undrained_credits(tiles))]
    yield k.wait(EPILOGUE, [*drain, *k.block_end])
    yield k.instr(k.aic.FIX, EPILOGUE, tiles, 0, "block end", 0.0, then=(q_l1.release,))


def aiv_epilogue(k: BlockKernel, lane: int, store: Instr) -> Program:
    """After the output store: drain the P FIFO's undrained credits, then signal block end."""
    drain = [k.fifos.p.consumed[lane]] * k.fifos.p.undrained_credits(k.block.tiles)
    if drain:
        yield k.wait(EPILOGUE, drain)
    yield k.instr(k.aiv[lane].MTE3, EPILOGUE, k.block.tiles, 0, "signal block end", 0.0, waits=(store,),
                  then=(k.block_end[lane].set,))


class TfaKernel:
    """The TFA kernel for the chip engine: its blocks, and each block's programs on a core."""

    name = "tfa"
    stages = STAGES

    def __init__(self, config: Config, hw: Hardware, numerics: Numerics | None = None,
                 mask: Mask | None = None) -> None:
        c, t, s = config.case, config.tiling, config.schedule
        self.config, self.numerics = config, numerics
        self.costs = Costs(hw, config.kernel.build)
        l0a_half, l0b_half = hw.l0a // s.l0a, hw.l0b // s.l0b
        qk_k = cube_k(t.cube_s0, t.cube_s1, c.head, l0a_half, l0b_half)
        pv_k = cube_k(t.cube_s0, c.head, t.cube_s1, l0a_half, l0b_half)
        assert qk_k is not None and pv_k is not None, "legality admits only configs with a CubeK"
        self.shape = Shape(c.head, t.cube_s0, t.cube_s1, t.tile_s1, t.k_tile_factor, t.vec_s0, t.cube_s0 // 2,
                           s.qk_preload, qk_k, pv_k, softmax_scale(c.head), c.softcap, input_dtype(c.dtype),
                           *matmul_panels(config))
        cores, build = hw.cube_cores, config.kernel.build
        blocks = make_blocks(config, mask, cores)
        # the dsl build: a persistent grid whose cores loop over contiguous ranges of units (run_dsl.py)
        self.persistent = build == "dsl"
        self.blocks: Sequence[Block] = persistent_order(blocks, cores) if self.persistent else \
            order_blocks(blocks, s.block_order, cores)

    def template_key(self, block: Block) -> Hashable | None:
        """Timing only: the block's own key (equal for blocks that issue the same program and read the same
        K/V lines); blocks some of whose inputs the host prefetched share a template with the blocks that find
        the same of theirs in the L2 (:func:`~tfa_sim.spec.blocks.prefetch_signature`); with numerics every
        block moves its own data, so none is replayed."""
        if self.numerics is not None or self.persistent:
            return None
        signature = prefetch_signature(block, self.config)
        return block.key if block.key is None or signature == (False, 0) else (block.key, signature)

    def start(self, env: simpy.Environment, core: Core, block: Block | Sequence[Block], stats: Stats) -> BlockKernel:
        """The block's buffers on ``core`` and its programs: the AIC's, then each AIV's (a persistent kernel:
        ``block`` is the core's units, and the programs loop over them)."""
        units = block if isinstance(block, Sequence) else None
        first = units[0] if units is not None else block
        assert isinstance(first, Block)
        k = BlockKernel(env, core, first, self.config, self.shape, self.costs, self.numerics, stats)
        if units is not None:
            k.named_lines = True  # the units may read different K/V heads (the pipes keep no line base)
            k.programs = [(core.cube, dsl_aic_program(k, units)),
                          *((core.vec[a], dsl_aiv_program(k, units, a)) for a in range(LANES))]
        else:
            k.programs = [(core.cube, aic_program(k)), *((core.vec[a], aiv_program(k, a)) for a in range(LANES))]
        return k
