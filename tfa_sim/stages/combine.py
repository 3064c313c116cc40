"""``combine``: the second launch of a split-S1 run, on the vector cores — the N chunks' partial results
of each row block merged into O (flash-decoding's final GU).

Per row block, each AIV takes its rows (the blocks' lane split) and, in order:

1. ``TLOAD m,l`` (MTE2): every chunk's running max and sum of its rows (fp32);
2. ``VEC factors`` (V): M = max over chunks; per chunk f = exp((m − M)·s) and the
   weighted sum Σ f·l (the contract's order, docs/numerics.md "Split-S1 combine");
3. per chunk, ``TLOAD O`` (MTE2) of its unnormalised O into a UB ping-pong slot,
   then ``VEC accumulate`` (V): acc += f ⊙row O;
4. ``VEC normalise`` (V): acc ⊘row L, and ``TSTORE O`` (MTE3).

The numerics run as one :meth:`~tfa_sim.backends.interface.Backend.combine` call at step 4
over the chunks in order (chunk 0 … N−1), which is what the loads delivered.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import partial
from typing import Any

import numpy as np
import simpy

from tfa_sim.buffers.capacity import FP32
from tfa_sim.buffers.data import Compute, Dump, Move, View
from tfa_sim.buffers.pools import HazardError, PingPong
from tfa_sim.engine.core import Core
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import GmMove, Instr, Pipe, Stats
from tfa_sim.spec import work
from tfa_sim.spec.blocks import CombineBlock
from tfa_sim.spec.geometry import Dispatch
from tfa_sim.spec.units import LANES, vec_unit
from tfa_sim.stages import COMBINE
from tfa_sim.stages.block_kernel import Numerics, Partials
from tfa_sim.stages.plan import KernelPlan

STAGE = COMBINE


def merge(backend: Any, scale: np.float32, o: np.ndarray, m: np.ndarray, l: np.ndarray) -> np.ndarray:
    """The combine of one AIV's rows: ``o`` [chunks, rows, HEAD], ``m``/``l`` [chunks, rows]."""
    return backend.combine(list(o), list(m), list(l), scale)


class CombineRun:
    """The UB tiles and programs of one combine block on one core's two AIVs."""

    def __init__(self, env: simpy.Environment, core: Core, block: CombineBlock, kernel: CombineKernel,
                 stats: Stats) -> None:
        self.env, self.block, self.kernel = env, block, kernel
        self.aiv = core.vec
        names = [vec_unit(core.index, a).name for a in range(LANES)]
        self.ub_o = [PingPong(env, f"{names[a]}.UB.partial_o", 2, core.vec[a].V) for a in range(LANES)]
        if stats.events is not None:
            for pool in self.ub_o:
                pool.samples = []
                stats.pools.append(pool)
        self.programs: list[tuple[Sequence[Pipe], Program]] = [(core.vec[a], self.lane_program(a))
                                                                for a in range(LANES)]

    def gm(self, nbytes: int) -> GmMove:
        return GmMove(nbytes, self.kernel.costs.move.gm_to_ub, None)

    def lane_program(self, lane: int) -> Program:
        """AIV ``lane``'s issue stream for the block (nothing for an AIV without rows)."""
        b, k = self.block, self.kernel
        row0, rows = b.lane_rows(lane)
        if not rows:
            return
        aiv, head, n = self.aiv[lane], k.head, len(b.chunks)
        stats_bytes = 2 * n * rows * FP32
        load = yield self.instr(aiv.MTE2, 0, "TLOAD m,l", self.gm(stats_bytes), nbytes=stats_bytes)
        prev: Instr = yield self.instr(aiv.V, 0, "VEC factors", k.costs.combine_factors(rows, n), waits=(load,),
                                       work=work.combine_factors(k.costs, rows, n))
        o_bytes = rows * head * FP32
        for i in range(n):
            slot = self.ub_o[lane].slot()
            load_o = yield self.instr(aiv.MTE2, i, "TLOAD O", self.gm(o_bytes), waits=(slot,), nbytes=o_bytes)
            prev = yield self.instr(aiv.V, i, "VEC accumulate", k.costs.combine_accumulate(rows, head),
                                    waits=(load_o, prev), then=(slot.release,),
                                    work=work.combine_accumulate(k.costs, rows, head))
        op = None
        if k.numerics is not None:
            out = View(np.empty((rows, head), np.float32))
            parts, dest = self.gm_rows(row0, rows)
            p, recorder = k.partials, k.numerics.dumps
            dump = () if recorder is None else (Dump(recorder, "combine_o", b.index, b.tile, row0, out),)
            op = (Compute(partial(merge, k.numerics.backend, k.scale), tuple(View(a, parts) for a in (p.o, p.m, p.l)),
                          (out,)),
                  Move(out, View(k.numerics.out, dest)), *dump)
        vec = yield self.instr(aiv.V, n, "VEC normalise", k.costs.combine_normalise(rows, head), waits=(prev,),
                               work=work.combine_normalise(k.costs, rows, head))
        yield self.instr(aiv.MTE3, n, "TSTORE O", GmMove(o_bytes, k.costs.move.ub_to_gm, None), waits=(vec,),
                         op=op, nbytes=o_bytes)

    def gm_rows(self, row0: int, rows: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """Indexes of the AIV's rows: in the partials' [chunk, batch, heads, S0] layout over the block's
        chunks, and in O's [batch, heads, S0]."""
        r, own = self.block.rows, slice(row0, row0 + rows)
        parts = (np.array(self.block.chunks)[:, None], r.batch, r.heads[own][None, :], r.pos[own][None, :])
        return parts, (r.batch, r.heads[own], r.pos[own])

    def instr(self, pipe: Pipe, sub: int, kind: str, cost: float | GmMove, waits: tuple[Any, ...] = (),
              op: Any = None, then: tuple[Any, ...] = (), nbytes: int = 0, work: str | None = None) -> Instr:
        return Instr(pipe, STAGE, self.block.index, 0, sub, kind, cost, waits, op, then, nbytes, 0, work)

    def finish(self, keep_tiles: bool = False) -> None:
        """At block end every UB slot must be released; then drop the tiles (unless ``keep_tiles``)."""
        for pool in self.ub_o:
            if pool.in_use:
                raise HazardError(f"{pool.name}: {pool.in_use} slot(s) still held at the end of combine block "
                                  f"{self.block.index} (cycle {self.env.now:.0f})")
        if not keep_tiles:
            self.restart(self.block)

    def restart(self, block: CombineBlock) -> None:
        self.block = block
        for pool in self.ub_o:
            pool.reset()


class CombineKernel:
    """The combine launch for the chip engine: one block per split row block (``dispatch``: the plan's combine
    launch unless given), on the AIVs; the factors' scale is the softmax's (1 with a softcap, whose maxima carry
    it already)."""

    name = "combine"
    stages = (STAGE,)

    def __init__(self, plan: KernelPlan, numerics: Numerics | None, dispatch: Dispatch | None = None) -> None:
        combine = dispatch or plan.geometry.combine
        assert combine is not None, "a split run has a combine launch"
        self.dispatch, self.config, self.costs, self.numerics = combine, plan.config, plan.costs, numerics
        self.head = plan.shape.head
        self.scale = np.float32(1.0) if plan.shape.softcap else plan.shape.scale

    @property
    def partials(self) -> Partials:
        assert self.numerics is not None and self.numerics.partials is not None
        return self.numerics.partials

    def template_key(self, block: CombineBlock) -> Hashable | None:
        return None if self.numerics is not None else (block.n_rows, len(block.chunks))

    def start(self, env: simpy.Environment, core: Core, block: CombineBlock, stats: Stats) -> CombineRun:
        return CombineRun(env, core, block, self, stats)
