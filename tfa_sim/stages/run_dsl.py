"""The PTO-DSL port's programs (``kernel.build = "dsl"``): a persistent core loops over its units.

pto-isa ``kernels/python/flash_atten/kernels/fa_builder.py`` (docs/kernel.md, "Builds"): a launch of
min(units, cores) cores, each running a contiguous range of units (one CUBE_S0 row block each) with the GM
FIFOs, their flags and the L1/L0/UB tiles declared once per core, so the FIFOs count tiles across the
units and one unit's work runs into the next's.  Per unit the stage order differs from the manual kernel's:

* the AIC loads Q, runs the QK prologue (``qk_preload`` tiles, ``talloc`` before each tile's first K load),
  then per tile t and sub-tile s ``compute_pv(t, s)`` (P loaded before V) followed by
  ``compute_qk(t + qk_preload, s)``, and drains the last PV tiles;
* each AIV runs the P prologue, then per tile ``compute_gu(t)`` — in kTileFactor row slices — before the row
  slices of ``compute_p(t + qk_preload)``, whose ``talloc`` of the P slot follows the QK ``tpop`` before the
  tile's first load (the cube's ``tfree`` of P follows its last V load); its ``l1_exp_max`` ring has
  ``qk_preload`` entries (EXP_RING).

The port has no block-end handshake: after its last unit a core drains the credits nobody waited for (the
pipes' destructors, ``TPipe::~TPipe``).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from tfa_sim.engine.issue import Program
from tfa_sim.spec.units import LANES
from tfa_sim.stages import EPILOGUE
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.compute_gu import compute_gu
from tfa_sim.stages.compute_p import compute_p
from tfa_sim.stages.compute_pv import compute_pv
from tfa_sim.stages.compute_qk import compute_qk, load_q

QK_ACC, PV_ACC = 0, 1  # the L0C slots of the port's two accumulators


def unit_views(k: BlockKernel, blocks: Sequence) -> Iterator[BlockKernel]:
    """``k`` as each unit of the core sees it: the FIFOs count on from the tiles of the units before."""
    base = 0
    for block in blocks:
        yield k if block is k.block else k.unit_view(block, base)
        base += block.tiles


def dsl_aic_program(k: BlockKernel, blocks: Sequence) -> Program:
    """The AIC's issue stream over the core's units, then the credits its pipes drain."""
    for view in unit_views(k, blocks):
        yield from _aic_unit(view)
    total = sum(b.tiles for b in blocks)
    drain = [f.consumed[a] for f in (k.fifos.qk, k.fifos.pv) for a in range(LANES) for _ in range(
        f.undrained_credits(total))]
    if drain:
        yield k.wait(EPILOGUE, drain)


def _aic_unit(k: BlockKernel) -> Program:
    """One unit on the AIC (``emit_qk``, ``emit_qk_pv_interleaved``, ``emit_pv``).  The port has one QK and
    one PV accumulator (``qk_acc_a``, ``pv_acc_a``): L0C slots 0 and 1."""
    tiles, preload, kf = k.block.tiles, k.shape.qk_preload, k.shape.k_tile_factor
    q_load, q_l1 = yield from load_q(k)
    for t in range(min(preload, tiles)):
        for s in range(kf):
            yield from compute_qk(k, t, s, q_load, q_l1, QK_ACC, allocate_first=True)
    for t in range(tiles):
        pv_acc = k.l0c.slot(PV_ACC)
        for s in range(kf):
            yield from compute_pv(k, t, s, pv_acc, v_first=False)
            if t + preload < tiles:
                yield from compute_qk(k, t + preload, s, q_load, q_l1, QK_ACC, allocate_first=True)
    # the unit's Q tile is free once the MTE1 has moved it for the last time
    yield k.instr(k.aic.MTE1, EPILOGUE, tiles, 0, "Q tile free", 0.0, then=(q_l1.release,))


def dsl_aiv_program(k: BlockKernel, blocks: Sequence, lane: int) -> Program:
    """AIV ``lane``'s issue stream over the core's units, then the P credits its pipe drains."""
    src = 0  # the UB source/x_exp ping-pong counter, as in the manual kernel's compute_p and compute_gu
    for view in unit_views(k, blocks):
        src = yield from _aiv_unit(view, lane, src)
    total = sum(b.tiles for b in blocks)
    drain = [k.fifos.p.consumed[lane]] * k.fifos.p.undrained_credits(total)
    if drain:
        yield k.wait(EPILOGUE, drain)


def _aiv_unit(k: BlockKernel, lane: int, src: int) -> Program:
    """One unit on AIV ``lane`` (``vec_unit_body`` and the O store); returns the ping-pong counter after it."""
    tiles, preload, kf = k.block.tiles, k.shape.qk_preload, k.shape.k_tile_factor
    for t in range(min(preload, tiles)):
        for r in range(kf):
            yield from compute_p(k, lane, t, r, src, allocate_first=True)
            src += 1
    for t in range(tiles):
        for r in range(kf):
            yield from compute_gu(k, lane, t, src, r, kf)
            src += 1
        if t + preload < tiles:
            for r in range(kf):
                yield from compute_p(k, lane, t + preload, r, src, allocate_first=True)
                src += 1
    return src
