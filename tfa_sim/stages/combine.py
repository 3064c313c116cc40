"""``combine``: the second launch of a split-S1 run, on the vector cores — the N chunks' partial results of each
row block merged into O (flash-decoding's final GU), as its listing says (``listings.combine``:
configs/listings/combine/, docs/kernel.md "Listings").

Per row block, each AIV takes its rows (the blocks' lane split); the listing loads every chunk's running max and
sum of them (``TLOAD m,l``), computes M = max over the chunks' maxima, per chunk f = exp((m − M)·s) and the
weighted sum L = Σ f·l (``VEC factors``, the contract's order: docs/numerics.md "Split-S1 combine"), then per chunk
loads its unnormalised O into a UB ping-pong slot and adds f ⊙row O (``VEC accumulate``), and finally divides by L
(``VEC normalise``) and stores O.  The numerics run as one :meth:`~tfa_sim.backends.interface.Backend.combine` call
over the chunks in order (chunk 0 … N−1), which is what the loads delivered, at the normalisation — or, for a
listing whose math is not the shipped one, its lines one by one.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

import numpy as np
import simpy

from tfa_sim.buffers.capacity import FP32
from tfa_sim.buffers.data import Compute, Dump, View
from tfa_sim.buffers.pools import HazardError, PingPong
from tfa_sim.engine.core import Core
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, GmMove, Instr, Pipe, Stats
from tfa_sim.listings.library import StageListing
from tfa_sim.listings.program import Step
from tfa_sim.listings.vocabulary import Tile, Vocabulary, declare
from tfa_sim.spec.blocks import CombineBlock
from tfa_sim.spec.geometry import Dispatch
from tfa_sim.spec.units import LANES, vec_unit
from tfa_sim.stages import COMBINE
from tfa_sim.stages.block_kernel import Numerics, Partials
from tfa_sim.stages.driver import Bind, Binds, issue
from tfa_sim.stages.plan import KernelPlan
from tfa_sim.stages.site import Site
from tfa_sim.stages.vector_math import interpreted, last_vector, semantics

STAGE = COMBINE
ROW = ("1", "rows")


def steady(plan: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """A row block's combine over the run's chunks (two without a split: ``tfa-sim listing``'s call)."""
    combine = plan.geometry.combine
    chunks = max((len(b.chunks) for b in combine.order), default=2) if combine is not None else 2
    return {"chunks": chunks}, {"rows": plan.shape.half, "head": plan.shape.head}


VOCABULARY = declare(Vocabulary(
    STAGE, "AIV",
    tiles={"ml": Tile("UB", ("1", "rows")), "m": Tile("UB", ROW, indexed=True, within="ml"),
           "l": Tile("UB", ROW, indexed=True, within="ml"), "partial_ml": Tile("GM", ("1", "rows")),
           "o": Tile("UB", ("rows", "head"), pool=True), "partial_o": Tile("GM", ("rows", "head"), indexed=True),
           "out": Tile("UB", ("rows", "head"), role="output"), "gm_o": Tile("GM", ("rows", "head"), role="output")},
    scalars=frozenset({"scale"}), dims=frozenset({"rows", "head", "chunks"}), context={"chunks": (1, 2, 3)},
    label="factors",
    steady=steady))


def merge(backend: Any, scale: np.float32, o: np.ndarray, m: np.ndarray, l: np.ndarray) -> np.ndarray:
    """The combine of one AIV's rows: ``o`` [chunks, rows, HEAD], ``m``/``l`` [chunks, rows]."""
    return backend.combine(list(o), list(m), list(l), scale)


def merge_of(listing: StageListing, backend: Any, chunks: int, scale: np.float32) -> Callable[..., np.ndarray]:
    """What the combine of ``chunks`` chunks computes, as :func:`merge` takes it (o, m, l of every chunk): the
    backend's combine when the listing's lines are the shipped math, else the lines one by one."""
    lines = tuple(ln for s in listing.steps(chunks) for ln in s.instructions)
    inputs = (*(f"m[{i}]" for i in range(chunks)), *(f"l[{i}]" for i in range(chunks)),
              *(f"partial_o[{i}]" for i in range(chunks)))
    scalars = {"scale": scale}
    if listing.shipped_math({"chunks": chunks}, lines, inputs, ("out",), scalars):
        return partial(merge, backend, scale)
    run = interpreted(lines, semantics(backend, np.float32), scalars, listing.listing.consts, inputs, ("out",), {})
    return lambda o, m, l: run(*m, *l, *o)[0]


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

    def lane_program(self, lane: int) -> Program:
        """AIV ``lane``'s issue stream for the block (nothing for an AIV without rows)."""
        b, k = self.block, self.kernel
        row0, rows = b.lane_rows(lane)
        if not rows:
            return
        n, head, listing = len(b.chunks), k.head, k.listing
        steps = listing.steps(n)
        data = k.numerics
        out = View(np.empty((rows, head), np.float32))

        def gm(r: int, c: int, kind: str, location: Any = None) -> Bind:
            return Bind("GM", r, c, FP32, location, load=kind, store=kind)

        def make(name: str) -> Bind | None:
            base = name.split("[", 1)[0]
            if base == "ml":
                return Bind("UB", 1, 2 * n * rows, FP32)
            if base == "partial_ml":
                return gm(1, 2 * n * rows, "TLOAD m,l")
            if base in ("m", "l"):
                return Bind("UB", 1, rows, FP32)
            if base == "o":
                return Bind("UB", rows, head, FP32, slot=self.ub_o[lane].slot())
            if base == "partial_o":
                return gm(rows, head, "TLOAD O")
            if base == "gm_o":
                return gm(rows, head, "TSTORE O", View(data.out, self.gm_rows(row0, rows)[1]) if data else None)
            if base == "out":
                return Bind("UB", rows, head, FP32, out)
            return None

        binds = Binds(make, listing, {"rows": rows, "head": head})

        def compute(step: Step, binds: Binds) -> tuple[Effect, ...] | None:
            if step is not last_vector(steps) or data is None:
                return None
            parts, _ = self.gm_rows(row0, rows)
            p = k.partials
            fn = merge_of(listing, data.backend, n, k.scale)
            return (Compute(fn, tuple(View(a, parts) for a in (p.o, p.m, p.l)), (out,)),)

        def extra(step: Step, binds: Binds) -> tuple[Effect, ...]:
            """The combine's O dumped as it is stored."""
            recorder = data.dumps if data is not None else None
            if recorder is None or "gm_o" not in step.instructions[0].writes:
                return ()
            return (Dump(recorder, "combine_o", b.index, b.tile, row0, out),)

        site = Site(STAGE, self.aiv[lane], k.costs, self.instr)
        yield from issue(site, steps, binds, b.tile, 0, (rows, n), compute if data is not None else None, extra)

    def gm_rows(self, row0: int, rows: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """Indexes of the AIV's rows: in the partials' [chunk, batch, heads, S0] layout over the block's
        chunks, and in O's [batch, heads, S0]."""
        r, own = self.block.rows, slice(row0, row0 + rows)
        parts = (np.array(self.block.chunks)[:, None], r.batch, r.heads[own][None, :], r.pos[own][None, :])
        return parts, (r.batch, r.heads[own], r.pos[own])

    def instr(self, _t: int, sub: int, pipe: Pipe, kind: str, cost: float | GmMove, waits: tuple[Any, ...] = (),
              op: Any = None, then: tuple[Any, ...] = (), nbytes: int = 0, flops: int = 0,
              work: str | None = None) -> Instr:
        return Instr(pipe, STAGE, self.block.index, 0, sub, kind, cost, waits, op, then, nbytes, flops, work)

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
        self.head, self.listing = plan.shape.head, plan.listings[STAGE]
        self.scale = np.float32(1.0) if plan.shape.softcap else plan.shape.scale

    @property
    def partials(self) -> Partials:
        assert self.numerics is not None and self.numerics.partials is not None
        return self.numerics.partials

    def template_key(self, block: CombineBlock) -> Hashable | None:
        return None if self.numerics is not None else (block.n_rows, len(block.chunks))

    def start(self, env: simpy.Environment, core: Core, block: CombineBlock, stats: Stats) -> CombineRun:
        return CombineRun(env, core, block, self, stats)
