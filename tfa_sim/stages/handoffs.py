"""How a producer hands a tile on: when it allocates its FIFO slot, and how the cube's M pipe hands an accumulator
to FIX — two design choices, their registries' values declared here beside the code the stages call.

* ``kernel.talloc``: a producer's ``allocate()`` (the credit wait) before its tile's first store (the manual
  kernel's TPUSH) or before its first load (the port's ``talloc``);
* ``kernel.cube_handoff``: ``flags`` — FIX waits for the whole matmul (``set_flag(PIPE_M, PIPE_FIX)`` /
  ``wait_flag``); ``unit_flag`` — TMATMUL's final phase (``AccPhase::Final``) sets a unit flag per finished L0C
  fractal and ``TSTORE<STPhase::Final>`` starts on the first and streams behind the matmul
  (pto-isa ba7056ea, "Unitflag support for A3 and A5, FA default enable").  :func:`matmul` and :func:`store`
  issue both forms; the numerics are the same.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, GmMove, Instr
from tfa_sim.spec.choices import CUBE_HANDOFF, TALLOC
from tfa_sim.stages.block_kernel import BlockKernel


@dataclass(frozen=True)
class Talloc:
    """What a ``kernel.talloc`` value does: whether the producer allocates before its first load."""

    before_load: bool


@dataclass(frozen=True)
class CubeHandoff:
    """What a ``kernel.cube_handoff`` value does: FIX starts on each final fractal's unit flag (``unit_flag``) or
    on the whole matmul's flag."""

    unit_flag: bool


TALLOC.add("before_store", Talloc(False), "`allocate()` after the first matmul or vector work, before the first "
           "store", "manual TPUSH (fa_performance_kernel.cpp)", (), __name__)
TALLOC.add("before_load", Talloc(True), "`talloc` before the tile's first load", "PTO-DSL fa_builder.py "
           "`emit_qk`, `emit_softmax`", (), __name__)
CUBE_HANDOFF.add("flags", CubeHandoff(False), "FIX waits for the whole matmul (`set_flag`/`wait_flag(PIPE_M, "
                 "PIPE_FIX)`)", "manual kernel without `UF_ENABLE`; PTO-DSL port", (), __name__)
CUBE_HANDOFF.add("unit_flag", CubeHandoff(True), "FIX stores each final-phase L0C fractal as its unit flag sets "
                 "(`AccPhase::Final`, `TSTORE<STPhase::Final>`)", "pto-isa ba7056ea (`UF_ENABLE`)", (), __name__)


def matmul(k: BlockKernel, stage: str, t: int, s: int, rows: int, n: int, kdim: int, cube_k: int, final: bool,
           waits: tuple[Any, ...], op: tuple[Effect, ...] | None, then: tuple[Effect, ...],
           flops: int) -> Program:
    """Issue a TMATMUL of rows×kdim·kdim×n; returns (the instruction FIX's store waits for first, the one that
    completes the matmul).  With unit flags and a ``final`` matmul (the accumulator's last, AccPhase::Final) the
    first is the matmul up to its first finished fractal and the second the rest: two instructions on M."""
    cost = k.plan.costs.matmul(rows, n, kdim, cube_k)
    first = k.plan.costs.matmul_first_unit(rows, n, kdim, cube_k)
    aic = k.aic
    if not (final and k.plan.cube_handoff.unit_flag and first < cost):
        done = yield k.instr(aic.M, stage, t, s, "TMATMUL", cost, waits=waits, op=op, then=then, flops=flops)
        return done, done
    head = yield k.instr(aic.M, stage, t, s, "TMATMUL", first, waits=waits)
    done = yield k.instr(aic.M, stage, t, s, "TMATMUL final units", cost - first, op=op, then=then, flops=flops)
    return head, done


def store(k: BlockKernel, stage: str, t: int, s: int, kind: str, nbytes: int, units: int, handoff: tuple[Instr, Instr],
          waits: tuple[Any, ...], op: tuple[Effect, ...] | None, then: tuple[Effect, ...]) -> Program:
    """Issue the FIXPIPE store of an accumulator of ``units`` L0C fractals (``waits``: beside the matmul's hand-off;
    ``handoff``: :func:`matmul`'s pair).  Under unit flags it streams behind the matmul: all but the last fractal
    once the first is final, the last once the matmul completes (one DMA: the latency paid once)."""
    head, done = handoff
    aic = k.aic
    if head is done:
        last = yield k.instr(aic.FIX, stage, t, s, kind, k.gm_move(nbytes, "l0c_to_gm"), waits=(*waits, done), op=op,
                             then=then, nbytes=nbytes)
        return last
    tail = nbytes // max(units, 1)
    yield k.instr(aic.FIX, stage, t, s, kind, k.gm_move(nbytes - tail, "l0c_to_gm"), waits=(*waits, head),
                  nbytes=nbytes - tail)
    last = yield k.instr(aic.FIX, stage, t, s, f"{kind} (last unit)", GmMove(tail, k.plan.costs.move.l0c_to_gm,
                                                                              None, 0), waits=(done,), op=op,
                         then=then, nbytes=tail)
    return last
