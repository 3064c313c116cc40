"""How a producer hands a tile on: when it allocates its FIFO slot, and how the cube's M pipe hands an accumulator
to FIX — two design choices, their registries' values declared here; the listings test them by name
(configs/listings/: ``if talloc == "before_load"``, ``if cube_handoff == "unit_flag"``).

* ``kernel.talloc``: a producer's ``TALLOC`` (the credit wait) before its tile's first store (the manual
  kernel's) or before its first load (the port's ``talloc``);
* ``kernel.cube_handoff``: ``flags`` — FIX waits for the whole matmul (``set_flag(PIPE_M, PIPE_FIX)`` /
  ``wait_flag``); ``unit_flag`` — ``TMATMUL<Final>`` (``AccPhase::Final``) sets a unit flag per finished L0C
  fractal and ``TSTORE<Final>`` (``STPhase::Final``) starts on the first and streams behind the matmul
  (pto-isa ba7056ea, "Unitflag support for A3 and A5, FA default enable").  :func:`matmul` and :func:`store` are
  the two instructions' cost rules; the numerics are the same.
"""
from __future__ import annotations

from typing import Any

from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, GmMove, Instr
from tfa_sim.listings.vocabulary import Selects
from tfa_sim.spec.choices import CUBE_HANDOFF, TALLOC
from tfa_sim.stages.site import Site

TALLOC.add("before_store", Selects(("compute_qk", "compute_p")), "`TALLOC` after the first matmul or vector work, "
           "before the first store", "manual TPUSH (fa_performance_kernel.cpp)", (), __name__)
TALLOC.add("before_load", Selects(("compute_qk", "compute_p")), "`TALLOC` before the tile's first load",
           "PTO-DSL fa_builder.py `emit_qk`, `emit_softmax`", (), __name__)
CUBE_HANDOFF.add("flags", Selects(("compute_qk", "compute_pv")), "FIX waits for the whole matmul "
                 "(`set_flag`/`wait_flag(PIPE_M, PIPE_FIX)`)", "manual kernel without `UF_ENABLE`; PTO-DSL port", (),
                 __name__)
CUBE_HANDOFF.add("unit_flag", Selects(("compute_qk", "compute_pv")), "FIX stores each final-phase L0C fractal as "
                 "its unit flag sets (`TMATMUL<Final>`, `TSTORE<Final>`)", "pto-isa ba7056ea (`UF_ENABLE`)", (),
                 __name__)


def matmul(site: Site, t: int, sub: int, pipe: Any, rows: int, n: int, kdim: int, cube_k: int, final: bool,
           waits: tuple[Any, ...], op: tuple[Effect, ...] | None, then: tuple[Effect, ...], flops: int) -> Program:
    """Issue a TMATMUL of rows×kdim·kdim×n on ``pipe`` (M) at ``site`` as tile ``t``, sub-tile ``sub``; returns
    (the instruction FIX's store waits for first, the one that completes the matmul).  A ``final`` matmul
    (``TMATMUL<Final>``: AccPhase::Final, its unit flags on) is two instructions on M, split where its first L0C
    fractal is final."""
    costs = site.costs
    cost = costs.matmul(rows, n, kdim, cube_k)
    first = costs.matmul_first_unit(rows, n, kdim, cube_k) if final else cost
    if not first < cost:
        done = yield site.instr(t, sub, pipe, "TMATMUL", cost, waits, op, then, 0, flops, None)
        return done, done
    head = yield site.instr(t, sub, pipe, "TMATMUL", first, waits, None, (), 0, 0, None)
    done = yield site.instr(t, sub, pipe, "TMATMUL final units", cost - first, (), op, then, 0, flops, None)
    return head, done


def store(site: Site, t: int, sub: int, pipe: Any, kind: str, nbytes: int, units: int, handoff: tuple[Instr, Instr],
          waits: tuple[Any, ...], op: tuple[Effect, ...] | None, then: tuple[Effect, ...]) -> Program:
    """Issue the FIXPIPE store (``TSTORE<Final>``) of an accumulator of ``units`` L0C fractals on ``pipe`` (FIX)
    at ``site`` (``waits``: beside the matmul's hand-off; ``handoff``: :func:`matmul`'s pair).  Under unit flags
    it streams behind the matmul: all but the last fractal once the first is final, the last once the matmul
    completes (one DMA: the latency paid once)."""
    head, done = handoff
    if head is done:
        last = yield site.instr(t, sub, pipe, kind, site.gm_move(nbytes, "l0c_to_gm"), (*waits, done), op, then,
                                nbytes, 0, None)
        return last
    tail = nbytes // max(units, 1)
    move = site.gm_move(nbytes - tail, "l0c_to_gm")
    yield site.instr(t, sub, pipe, kind, move, (*waits, head), None, (), nbytes - tail, 0, None)
    last = yield site.instr(t, sub, pipe, f"{kind} (last unit)", GmMove(tail, move.rate, None, 0), (done,), op, then,
                            tail, 0, None)
    return last
