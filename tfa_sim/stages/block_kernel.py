"""One block of the TFA kernel on one core: its tiles, FIFOs, pipes and data, as the stages see them.

The kernel's ``runTFA`` declares its L1/L0/UB tiles and GM FIFOs once and passes them to each stage call;
:class:`CoreBuffers` is that set on one core — ping-pong buffers (:class:`~tfa_sim.buffers.pools.PingPong`), the
three GM FIFOs (:class:`~tfa_sim.buffers.fifo.GmFifo`), the ``l1_exp_max`` ring, the UB state tiles — built from
the run's :class:`~tfa_sim.stages.plan.KernelPlan`.  :class:`BlockKernel` is what a unit's stage calls see: the
block, the plan, the pipes of the AIC (``aic``) and the AIVs (``aiv[lane]``), the core's buffers (``buf``) and
(numerics on) where Q, K, V and O live.  It holds no program state and nothing the plan holds: stages keep what
passes between their instructions in local variables and buffers, as the kernel does.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import simpy

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.data import Dump, View
from tfa_sim.buffers.fifo import FifoWindow, GmFifo, Ring
from tfa_sim.buffers.pools import Flag, HazardError, PingPong
from tfa_sim.engine.core import Core
from tfa_sim.engine.gm import MISS, PREFETCHED
from tfa_sim.engine.issue import Program, Wait
from tfa_sim.engine.pipes import Effect, GmMove, Instr, Pipe, Stats
from tfa_sim.numerics.inputs import Inputs
from tfa_sim.spec.blocks import Block, prefetch_signature, prefetched_columns
from tfa_sim.spec.units import LANES, cube_unit, vec_unit
from tfa_sim.stages.plan import KernelPlan
from tfa_sim.stages.site import Site


@dataclass
class Partials:
    """What split-S1 blocks leave in GM for the combine (fp32): per chunk, each row's unnormalised O, its
    running max and its running sum, in the full [chunk, batch, heads, S0, …] layout."""

    o: np.ndarray  # [chunks, batch, heads, S0, HEAD]
    m: np.ndarray  # [chunks, batch, heads, S0]
    l: np.ndarray  # [chunks, batch, heads, S0]

    @classmethod
    def empty(cls, chunks: int, batch: int, heads: int, s0: int, head: int) -> Partials:
        rows = (chunks, batch, heads, s0)
        return cls(np.zeros(rows + (head,), np.float32), np.zeros(rows, np.float32), np.zeros(rows, np.float32))


@dataclass
class Numerics:
    """What the stages compute with: backend, inputs, the output being filled, optional dumps, and (split-S1)
    the partial results between the two launches."""

    backend: Backend
    inputs: Inputs
    out: np.ndarray
    dumps: Any = None  # a tfa_sim.rundir.dumps.DumpRecorder when dumping
    partials: Partials | None = None


class Fifos(NamedTuple):
    """The block's three GM FIFOs (docs/kernel.md, "Cross-core FIFOs")."""

    qk: GmFifo
    p: GmFifo
    pv: GmFifo


class CoreBuffers:
    """What ``runTFA`` declares once per core and passes to every stage call: the ping-pong tiles of L1, L0 and
    UB, the three GM FIFOs, the ``l1_exp_max`` ring and the block-end flags (all from the plan's
    :class:`~tfa_sim.buffers.capacity.BufferPlan`), and with numerics each AIV's UB state tiles.  A block's, or
    a persistent core's for all its units; checked and reset as one."""

    def __init__(self, env: simpy.Environment, core: Core, plan: KernelPlan, stats: Stats, numerics: bool) -> None:
        n, s, shape, latency = plan.buffers, plan.config.schedule, plan.shape, plan.hw.sync.flag_latency
        self._traced = stats.pools if stats.events is not None else None
        self.pools: list[PingPong] = []
        core_name = cube_unit(core.index).core_name
        aic, aiv = core.cube, core.vec
        self.l1_q = self._pool(env, f"{core_name}.L1.q", n.l1_q, aic.MTE1)
        self.l1_k = self._pool(env, f"{core_name}.L1.k", n.l1_k, aic.MTE1)
        self.l1_p = self._pool(env, f"{core_name}.L1.p", n.l1_p, aic.MTE1)
        self.l1_v = self._pool(env, f"{core_name}.L1.v", n.l1_v, aic.MTE1)
        self.l0a = self._pool(env, f"{core_name}.L0A", n.l0a, aic.M)
        self.l0b = self._pool(env, f"{core_name}.L0B", n.l0b, aic.M)
        # L0C accumulators (two halves by default); the AIC program picks them as kernel.accumulators assigns
        self.l0c = self._pool(env, f"{core_name}.L0C", n.l0c, aic.FIX)
        vec = [vec_unit(core.index, a).name for a in range(LANES)]
        # the qk source tiles, and under the UB union the GU input tiles at the same addresses
        self.ub_src = [self._pool(env, f"{vec[a]}.UB.src", n.ub_src, aiv[a].V) for a in range(LANES)]
        # the GU input tiles of their own (kernel.ub_union = false), or the union's
        self.ub_pv = [self._pool(env, f"{vec[a]}.UB.pv", n.ub_pv, aiv[a].V) for a in range(LANES)] if n.ub_pv \
            else self.ub_src
        self.ub_x_exp = [self._pool(env, f"{vec[a]}.UB.x_exp", n.ub_x_exp, aiv[a].MTE3) for a in range(LANES)]
        # l1_exp_max_ififo: entry t % entries, written by compute_p(t), read by compute_gu(t)
        self.l1_exp_max = [Ring(env, f"{vec[a]}.UB.l1_exp_max", n.exp_ring, (shape.half,), np.float32)
                           for a in range(LANES)]
        depth, period = s.cv_fifo_size, s.cv_fifo_cons_sync_period
        tile = (shape.cube_s0, shape.tile_s1)
        self.fifos = Fifos(
            self._fifo(env, core, f"{core_name}.qk_tile_fifo", depth, period, latency, tile, np.float32,
                       [aic.FIX] * LANES, [v.MTE2 for v in aiv]),
            self._fifo(env, core, f"{core_name}.p_tile_fifo", depth, period, latency, tile, shape.dtype,
                       [v.MTE3 for v in aiv], [aic.MTE2] * LANES),
            self._fifo(env, core, f"{core_name}.pv_tile_fifo", depth, period, latency, (shape.cube_s0, shape.head),
                       np.float32, [aic.FIX] * LANES, [v.MTE2 for v in aiv]))
        self.block_end = [Flag(env, f"{core_name}.block_end[aiv{a}]", latency, "data", aiv[a].MTE3, core.ffts)
                          for a in range(LANES)]
        # UB state tiles of each AIV (numerics only): running max and sum per row, runningOTile
        rows = (shape.half,)
        self.m2_global_max = [np.empty(rows, np.float32) for _ in range(LANES)] if numerics else []
        self.l2_global_sum = [np.empty(rows, np.float32) for _ in range(LANES)] if numerics else []
        self.running_o = [np.empty((shape.half, shape.head), np.float32) for _ in range(LANES)] if numerics else []

    def _pool(self, env: simpy.Environment, name: str, count: int, owner: Pipe) -> PingPong:
        pool = PingPong(env, name, count, owner)
        self.pools.append(pool)
        self._trace(pool)
        return pool

    def _fifo(self, env: simpy.Environment, core: Core, name: str, depth: int, period: int, latency: float,
              shape: tuple[int, ...], dtype: Any, producers: list[Pipe], consumers: list[Pipe]) -> GmFifo:
        fifo = GmFifo(env, name, depth, period, latency, shape, dtype, producers, consumers, core.ffts)
        self._trace(fifo)
        return fifo

    def _trace(self, pool: PingPong | GmFifo) -> None:
        """With the event log on, sample the buffer's occupancy for the trace's counter tracks."""
        if self._traced is not None:
            pool.samples = []
            self._traced.append(pool)

    def check_clean(self, block: int, now: float) -> None:
        """At block end every flag must be back to zero and every slot released."""
        for flag in (*(flag for fifo in self.fifos for flag in fifo.flags()), *self.block_end):
            if flag.pending:
                raise HazardError(f"{flag.name} was set {flag.pending} more time(s) than waited in block {block} "
                                  f"(cycle {now:.0f}): producer and consumer disagree on the credit rule")
        for pool in self.pools:
            if pool.in_use:
                raise HazardError(f"{pool.name}: {pool.in_use} slot(s) still held at the end of block {block} "
                                  f"(cycle {now:.0f})")

    def reset(self) -> None:
        """Every buffer, FIFO, flag and ring back to its initial state (the tiles dropped)."""
        for pool in self.pools:
            pool.reset()
        for fifo in self.fifos:
            fifo.reset()
        for flag in self.block_end:
            flag.reset()
        for ring in self.l1_exp_max:
            ring.reset()


class KernelSite(Site):
    """Where a stage's calls issue on one of ``kernel``'s units: its instructions record the stage, the block and
    its global tile, and the unit's latest instruction per pipe (a mark's predecessor)."""

    def __init__(self, stage: str, pipes: Any, kernel: BlockKernel) -> None:
        super().__init__(stage, pipes, kernel.plan.costs)
        self.kernel = kernel

    def instr(self, t: int, sub: int, pipe: Pipe, kind: str, cost: float | GmMove, waits: tuple[Any, ...],
              op: tuple[Effect, ...] | None, then: tuple[Effect, ...], nbytes: int, flops: int,
              work: str | None) -> Instr:
        k = self.kernel
        ins = k.issued[pipe] = k.instr(pipe, self.stage, t, sub, kind, cost, waits, op, then, nbytes, flops, work)
        return ins

    def wait(self, flags: Sequence[Flag]) -> Wait:
        """The unit's scalar unit waits for one count of each flag (``wait()``/``allocate()``) before issuing
        anything else."""
        return Wait(self.stage, flags)

    def previous(self, pipe: Pipe) -> Instr | None:
        return self.kernel.issued.get(pipe)


class BlockKernel:
    """One unit of the kernel on one core as its stages see it: the ``block``, the run's ``plan``, the core's
    pipes and :class:`CoreBuffers` (``buf``), the FIFOs as this unit counts their tiles, and (numerics on) where
    Q, K, V and O live (see the module docstring)."""

    def __init__(self, env: simpy.Environment, core: Core, block: Block, plan: KernelPlan, numerics: Numerics | None,
                 stats: Stats, buf: CoreBuffers | None = None, base: int = 0, named_lines: bool = False) -> None:
        self.env, self.core, self.block, self.plan, self.num, self.stats = env, core, block, plan, numerics, stats
        self.numerics = numerics is not None  # stages build their data steps (op) only when True
        self.aic = core.cube
        self.aiv = core.vec
        self.buf = buf if buf is not None else CoreBuffers(env, core, plan, stats, self.numerics)
        self.programs: list[tuple[Sequence[Pipe], Program]] = []  # each unit's pipes and program (run_tfa)
        # K/V lines named with the block's K/V head (a persistent core's units may read different heads)
        self.named_lines = named_lines
        # what the stages index: the FIFOs, or (a later unit of a persistent core) windows on them from ``base``
        fifos = self.buf.fifos
        self.qk_fifo: GmFifo | FifoWindow = FifoWindow(fifos.qk, base) if base else fifos.qk
        self.p_fifo: GmFifo | FifoWindow = FifoWindow(fifos.p, base) if base else fifos.p
        self.pv_fifo: GmFifo | FifoWindow = FifoWindow(fifos.pv, base) if base else fifos.pv
        self.sites: dict[tuple[str, int], Site] = {}  # where each stage's calls issue, by (stage, lane)
        # what the stages ask of the block per call, read once: each local tile's global one (one past the last:
        # the epilogue's), each AIV's rows, how far the host prefetched K and V (-1: not yet asked)
        self.tile_ids: list[int] = [block.tile_id(t) for t in range(block.tiles + 1)]
        self.lanes: list[tuple[int, int]] = [block.lane_rows(lane) for lane in range(LANES)]
        self.prefetched_cols = -1
        self.issued: dict[Pipe, Instr] = {}  # each pipe's latest instruction of this unit (a mark's predecessor)

    def unit_view(self, block: Block, base: int) -> BlockKernel:
        """The same buffers, FIFOs and pipes for ``block``, a later unit of a persistent core whose FIFO tiles
        are counted from ``base`` on (the persistent grid declares them once per core)."""
        return BlockKernel(self.env, self.core, block, self.plan, self.num, self.stats, self.buf, base, True)

    # ---- what the stages call --------------------------------------------------------------------
    def instr(self, pipe: Pipe, stage: str, t: int, sub: int, kind: str, cost: float | GmMove,
              waits: tuple[Any, ...] = (), op: tuple[Effect, ...] | None = None, then: tuple[Effect, ...] = (),
              nbytes: int = 0, flops: int = 0, work: str | None = None) -> Instr:
        """An instruction group of local tile ``t`` of this block (see :class:`~tfa_sim.engine.pipes.Instr`;
        it records the global tile)."""
        ids = self.tile_ids
        return Instr(pipe, stage, self.block.index, ids[t] if t < len(ids) else ids[-1], sub, kind, cost, waits, op,
                     then, nbytes, flops, work)

    def site(self, stage: str, lane: int = -1) -> Site:
        """Where ``stage``'s calls issue on AIV ``lane`` (-1: the AIC), made once."""
        site = self.sites.get((stage, lane))
        if site is None:
            site = self.sites[(stage, lane)] = KernelSite(stage, self.aic if lane < 0 else self.aiv[lane], self)
        return site

    def kv_line(self, tensor: str, t: int, s: int) -> Hashable:
        """The L2 line of the K or V chunk of sub-tile (t, s), relative to the block's K/V head
        (:attr:`~tfa_sim.spec.blocks.Block.line_base`): shared by every block of the head; with
        ``named_lines`` (a persistent core's units) the head is part of the name; :data:`PREFETCHED` when the
        host put it into the L2 before the launch."""
        b, col0, plan = self.block, self.block.col0(t, s), self.plan
        if plan.prefetched:
            if self.prefetched_cols < 0:
                self.prefetched_cols = prefetched_columns(b, plan.config, plan.prefetched)
            if col0 + plan.shape.cube_s1 <= self.prefetched_cols:
                return PREFETCHED
        if self.named_lines:
            return tensor, col0, b.line_base
        return tensor, col0

    def q_line(self) -> Hashable:
        """The L2 line of the block's Q load: :data:`PREFETCHED` when the host put those rows into the L2 before
        the launch, else a read from HBM (:data:`MISS`)."""
        plan = self.plan
        return PREFETCHED if plan.prefetched and prefetch_signature(self.block, plan.config)[0] else MISS

    @property
    def data(self) -> Numerics:
        """Backend, inputs and output (numerics on only)."""
        assert self.num is not None, "data steps are built only when numerics are on"
        return self.num

    def dump(self, name: str, t: int, row0: int, src: Any, slot: int | None = None) -> tuple[Dump, ...]:
        """The dump step of an instruction (empty unless the intermediate check is on)."""
        recorder = self.data.dumps
        return () if recorder is None else (Dump(recorder, name, self.block.index, self.block.tile_id(t), row0, src,
                                                 slot),)

    # GM tensors of this block (numerics on)
    def gm_q(self) -> View:
        rows = self.block.rows
        return View(self.data.inputs.q, (rows.batch, rows.heads, rows.pos))

    def gm_k(self, col0: int) -> View:
        b = self.block
        return View(self.data.inputs.k, (b.batch, b.kv_head, slice(col0, col0 + self.plan.shape.cube_s1)))

    def gm_v(self, col0: int) -> View:
        b = self.block
        return View(self.data.inputs.v, (b.batch, b.kv_head, slice(col0, col0 + self.plan.shape.cube_s1)))

    def lane_rows(self, lane: int) -> tuple[int, int]:
        """(first block row, rows) of AIV ``lane`` (:meth:`~tfa_sim.spec.blocks.Block.lane_rows`)."""
        return self.lanes[lane]

    def _own(self, lane: int, mine: slice | None) -> slice:
        """AIV ``lane``'s rows of the block, or the part ``mine`` of them (counted from the AIV's first row)."""
        first, n = self.lane_rows(lane)
        return slice(first, first + n) if mine is None else slice(first + mine.start, first + mine.stop)

    def gm_o(self, lane: int, mine: slice | None = None) -> View:
        """AIV ``lane``'s rows of O (or, for a partial block, of its chunk's unnormalised O), or the part
        ``mine`` of them."""
        rows, own = self.block.rows, self._own(lane, mine)
        if self.block.partial:
            return View(self.partials.o, (self.block.chunk, rows.batch, rows.heads[own], rows.pos[own]))
        return View(self.data.out, (rows.batch, rows.heads[own], rows.pos[own]))

    def gm_partial(self, lane: int, name: str, mine: slice | None = None) -> View:
        """AIV ``lane``'s rows (or the part ``mine`` of them) of the chunk's running max (``m``) or sum (``l``)."""
        rows, own = self.block.rows, self._own(lane, mine)
        return View(getattr(self.partials, name), (self.block.chunk, rows.batch, rows.heads[own], rows.pos[own]))

    @property
    def partials(self) -> Partials:
        assert self.data.partials is not None, "split-S1 runs allocate the partials"
        return self.data.partials

    # ---- block end --------------------------------------------------------------------------------
    def finish(self, keep_tiles: bool = False) -> None:
        """At block end every flag must be back to zero and every slot released; then drop the tiles (unless
        ``keep_tiles``: engine/ops.py runs the block's data steps first)."""
        self.buf.check_clean(self.block.index, self.env.now)
        if not keep_tiles:
            self.restart(self.block)

    def restart(self, block: Block) -> None:
        """Reset every buffer, FIFO and flag to its initial state (dropping the tiles), for ``block``."""
        self.block = block
        self.buf.reset()
