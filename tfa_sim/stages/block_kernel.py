"""One block of the TFA kernel on one core: its tiles, FIFOs, pipes and data, as the stages see them.

The kernel's ``runTFA`` declares its L1/L0/UB tiles and GM FIFOs once and
passes them to each stage call; :class:`BlockKernel` is that set for one block
on one core — ping-pong buffers (:class:`~tfa_sim.buffers.pools.PingPong`),
the three GM FIFOs (:class:`~tfa_sim.buffers.fifo.GmFifo`), the
``l1_exp_max`` ring, the UB state tiles, the pipes of the AIC (``aic``) and
the AIVs (``aiv[lane]``), the costs, and (numerics on) where Q, K, V and O
live.  It holds no program state: stages keep what passes between their
instructions in local variables and buffers, as the kernel does.
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
from tfa_sim.numerics.rounding import kernel_cube_k
from tfa_sim.spec.blocks import Block, prefetch_signature, prefetched_columns, prefetched_rows
from tfa_sim.spec.config import Config
from tfa_sim.spec.costs import Costs
from tfa_sim.spec.units import LANES, cube_unit, vec_unit


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


@dataclass(frozen=True)
class Shape:
    """The per-block sizes every stage uses (from the config)."""

    head: int
    cube_s0: int
    cube_s1: int
    tile_s1: int
    k_tile_factor: int
    vec_s0: int  # rows of one compute_p row slice
    half: int  # rows per AIV (CUBE_S0 / 2)
    qk_preload: int
    qk_cube_k: int  # CubeK of compute_qk's matmul
    pv_cube_k: int
    scale: np.float32  # the softmax scale s, the kernel's constexpr_inv_sqrt(HEAD) (rounding.softmax_scale)
    softcap: float  # c > 0: scores capped to c·tanh(s·x/c); 0: off
    dtype: Any  # Q, K, V and P (x_exp): float16 or bfloat16
    qk_panel: int  # the numerics' K panel of compute_qk's matmul (rounding.kernel_cube_k: the kernel's, no knob)
    pv_panel: int  # the same of compute_pv's, within one CUBE_S1 sub-tile


def matmul_panels(config: Config) -> tuple[int, int]:
    """The K panels of the numerics' matmuls, (QK, PV), as the kernel's calls ``pto_macro_matmul<CUBE_S0, HEAD,
    CUBE_S1>`` (QK) and ``<CUBE_S0, CUBE_S1, HEAD>`` (PV, one call per sub-tile) cut them."""
    c, t = config.case, config.tiling
    return kernel_cube_k(t.cube_s0, t.cube_s1, c.head), kernel_cube_k(t.cube_s0, c.head, t.cube_s1)


def stage_choices(config: Config, shape: Shape) -> tuple[bool, bool, int, bool]:
    """The design choices the stage calls read (docs/kernel.md, "Builds"): a producer's ``allocate()`` before its
    first load (``talloc``), V loaded before the wait for P (``pv_loads``), compute_gu calls per tile
    (``gu_rows``), L0C by the running index (``accumulators``)."""
    k = config.kernel
    return (k.talloc == "before_load", k.pv_loads == "v_first",
            shape.k_tile_factor if k.gu_rows == "slices" else 1, k.accumulators == "running")


class BlockKernel:
    """Buffers, FIFOs, pipes and data of one block on one core (see the module docstring)."""

    def __init__(self, env: simpy.Environment, core: Core, block: Block, config: Config, shape: Shape,
                 costs: Costs, numerics: Numerics | None, stats: Stats, share: BlockKernel | None = None) -> None:
        self.env, self.block, self.shape, self.costs, self.num = env, block, shape, costs, numerics
        self.core, self.config, self.stats = core, config, stats
        self.numerics = numerics is not None  # stages build their data steps (op) only when True
        self.aic = core.cube
        self.aiv = core.vec
        self.ffts = core.ffts
        self._traced = stats.pools if stats.events is not None else None
        self.programs: list[tuple[Sequence[Pipe], Program]] = []  # each unit's pipes and program (run_tfa)
        self.order: Any = None  # the module of the stage order's steady loops (run_tfa.ORDERS), set by the kernel
        self.named_lines = False  # K/V lines named relative to the pipes' line_base (a unit view: to its own)
        self.prefetched = prefetched_rows(config)  # rows of each input the host put into L2 (blocks.prefetched_rows)
        self.talloc_first, self.v_first, self.gu_parts, self.running_acc = stage_choices(config, shape)
        if share is not None:
            self._adopt(share)
            return
        s, latency = config.schedule, costs.hw.sync.flag_latency
        core_name = cube_unit(core.index).core_name
        aic, aiv = self.aic, self.aiv
        self.l1_q = self._pool(f"{core_name}.L1.q", s.l1_q, aic.MTE1)
        self.l1_k = self._pool(f"{core_name}.L1.k", s.l1_k, aic.MTE1)
        self.l1_p = self._pool(f"{core_name}.L1.p", s.l1_p, aic.MTE1)
        self.l1_v = self._pool(f"{core_name}.L1.v", s.l1_v, aic.MTE1)
        self.l0a = self._pool(f"{core_name}.L0A", s.l0a, aic.M)
        self.l0b = self._pool(f"{core_name}.L0B", s.l0b, aic.M)
        # L0C accumulators (two halves by default); the AIC program picks them by the kernel's running index
        self.l0c = self._pool(f"{core_name}.L0C", s.l0c, aic.FIX)
        vec_names = [vec_unit(core.index, a).name for a in range(LANES)]
        # the qk and pv source tiles share UB addresses (one ping-pong per AIV)
        self.ub_src = [self._pool(f"{vec_names[a]}.UB.src", s.ub_src, aiv[a].V) for a in range(LANES)]
        self.ub_x_exp = [self._pool(f"{vec_names[a]}.UB.x_exp", s.ub_x_exp, aiv[a].MTE3) for a in range(LANES)]
        # l1_exp_max_ififo[CV_FIFO_SIZE]: entry t % cv_fifo_size, written by compute_p(t), read by compute_gu(t)
        # (kernel.exp_ring = "preload": the port's EXP ring of qk_preload entries, docs/kernel.md, "Builds")
        ring = s.qk_preload if config.kernel.exp_ring == "preload" else s.cv_fifo_size
        self.l1_exp_max = [Ring(env, f"{vec_names[a]}.UB.l1_exp_max", ring, (shape.half,), np.float32)
                           for a in range(LANES)]
        depth, period = s.cv_fifo_size, s.cv_fifo_cons_sync_period
        tile = (shape.cube_s0, shape.tile_s1)
        qk = self._fifo(f"{core_name}.qk_tile_fifo", depth, period, latency, tile, np.float32,
                        [aic.FIX] * LANES, [v.MTE2 for v in aiv])
        p = self._fifo(f"{core_name}.p_tile_fifo", depth, period, latency, tile, shape.dtype,
                       [v.MTE3 for v in aiv], [aic.MTE2] * LANES)
        pv = self._fifo(f"{core_name}.pv_tile_fifo", depth, period, latency, (shape.cube_s0, shape.head),
                        np.float32, [aic.FIX] * LANES, [v.MTE2 for v in aiv])
        # what the stages index: the FIFOs, or a unit view's windows on them
        self.qk_fifo: GmFifo | FifoWindow = qk
        self.p_fifo: GmFifo | FifoWindow = p
        self.pv_fifo: GmFifo | FifoWindow = pv
        self.fifos = Fifos(qk, p, pv)  # the FIFOs themselves
        self.block_end = [Flag(env, f"{core_name}.block_end[aiv{a}]", latency, "data", aiv[a].MTE3, core.ffts)
                          for a in range(LANES)]
        # UB state tiles of each AIV (numerics only): running max and sum per row, runningOTile
        rows = (shape.half,)
        self.m2_global_max = [np.empty(rows, np.float32) for _ in range(LANES)] if numerics else []
        self.l2_global_sum = [np.empty(rows, np.float32) for _ in range(LANES)] if numerics else []
        self.running_o = [np.empty((shape.half, shape.head), np.float32) for _ in range(LANES)] if numerics else []

    def unit_view(self, block: Block, base: int) -> BlockKernel:
        """The same buffers, FIFOs and pipes for ``block``, a later unit of a persistent core whose FIFO tiles
        are counted from ``base`` on (the persistent grid declares them once per core).  Its K/V lines
        carry the block's own K/V head, since the core's units may read different heads."""
        view = BlockKernel(self.env, self.core, block, self.config, self.shape, self.costs, self.num, self.stats,
                           share=self)
        view.qk_fifo, view.p_fifo, view.pv_fifo = (FifoWindow(f, base) for f in self.fifos)
        view.named_lines, view.order = True, self.order
        return view

    def _adopt(self, other: BlockKernel) -> None:
        """Take ``other``'s buffers, FIFOs, flags and state tiles (a unit view of the same core)."""
        self.l1_q, self.l1_k, self.l1_p, self.l1_v = other.l1_q, other.l1_k, other.l1_p, other.l1_v
        self.l0a, self.l0b, self.l0c = other.l0a, other.l0b, other.l0c
        self.ub_src, self.ub_x_exp, self.l1_exp_max = other.ub_src, other.ub_x_exp, other.l1_exp_max
        self.fifos, self.block_end = other.fifos, other.block_end
        self.qk_fifo, self.p_fifo, self.pv_fifo = other.qk_fifo, other.p_fifo, other.pv_fifo
        self.m2_global_max, self.l2_global_sum = other.m2_global_max, other.l2_global_sum
        self.running_o = other.running_o

    def _pool(self, name: str, count: int, owner: Pipe) -> PingPong:
        pool = PingPong(self.env, name, count, owner)
        self._trace(pool)
        return pool

    def _fifo(self, name: str, depth: int, period: int, latency: float, shape: tuple[int, ...], dtype: Any,
              producers: list[Pipe], consumers: list[Pipe]) -> GmFifo:
        fifo = GmFifo(self.env, name, depth, period, latency, shape, dtype, producers, consumers, self.ffts)
        self._trace(fifo)
        return fifo

    def _trace(self, pool: PingPong | GmFifo) -> None:
        """With the event log on, sample the buffer's occupancy for the trace's counter tracks."""
        if self._traced is not None:
            pool.samples = []
            self._traced.append(pool)

    # ---- what the stages call --------------------------------------------------------------------
    def wait(self, stage: str, flags: Sequence[Flag]) -> Wait:
        """The unit's scalar unit waits for one count of each flag (``wait()``/``allocate()``) before issuing
        anything else."""
        return Wait(stage, flags)

    def instr(self, pipe: Pipe, stage: str, t: int, sub: int, kind: str, cost: float | GmMove,
              waits: tuple[Any, ...] = (), op: tuple[Effect, ...] | None = None, then: tuple[Effect, ...] = (),
              nbytes: int = 0, flops: int = 0, work: str | None = None) -> Instr:
        """An instruction group of local tile ``t`` of this block (see :class:`~tfa_sim.engine.pipes.Instr`;
        it records the global tile)."""
        return Instr(pipe, stage, self.block.index, self.block.tile_id(t), sub, kind, cost, waits, op, then, nbytes,
                     flops, work)

    def gm_move(self, nbytes: int, path: str, line: Hashable | None = None, chunks: int = 1) -> GmMove:
        """A GM transfer of ``nbytes`` on ``path`` (``gm_to_l1``, ``gm_to_ub``, ``ub_to_gm``, ``l0c_to_gm``) in
        ``chunks`` DMA instructions; ``line`` names an input read for the L2 (:mod:`tfa_sim.engine.gm`)."""
        return GmMove(nbytes, getattr(self.costs.move, path), line, chunks)

    def kv_line(self, tensor: str, t: int, s: int) -> Hashable:
        """The L2 line of the K or V chunk of sub-tile (t, s), relative to the block's K/V head
        (:attr:`~tfa_sim.spec.blocks.Block.line_base`): shared by every block of the head; with
        ``named_lines`` (a persistent core's units) the head is part of the name; :data:`PREFETCHED` when the
        host put it into the L2 before the launch."""
        b, col0 = self.block, self.block.col0(t, s)
        if self.prefetched and col0 + self.shape.cube_s1 <= prefetched_columns(b, self.config):
            return PREFETCHED
        if self.named_lines:
            return tensor, col0, b.line_base
        return tensor, col0

    def q_line(self) -> Hashable:
        """The L2 line of the block's Q load: :data:`PREFETCHED` when the host put those rows into the L2 before
        the launch, else a read from HBM (:data:`MISS`)."""
        return PREFETCHED if self.prefetched and prefetch_signature(self.block, self.config)[0] else MISS

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
        return View(self.data.inputs.k, (b.batch, b.kv_head, slice(col0, col0 + self.shape.cube_s1)))

    def gm_v(self, col0: int) -> View:
        b = self.block
        return View(self.data.inputs.v, (b.batch, b.kv_head, slice(col0, col0 + self.shape.cube_s1)))

    def lane_rows(self, lane: int) -> tuple[int, int]:
        """(first block row, rows) of AIV ``lane`` (:meth:`~tfa_sim.spec.blocks.Block.lane_rows`)."""
        return self.block.lane_rows(lane)

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
    def _pools(self) -> list[PingPong]:
        return [self.l1_q, self.l1_k, self.l1_p, self.l1_v, self.l0a, self.l0b, self.l0c, *self.ub_src,
                *self.ub_x_exp]

    def finish(self, keep_tiles: bool = False) -> None:
        """At block end every flag must be back to zero and every slot released; then drop the tiles (unless
        ``keep_tiles``: engine/ops.py runs the block's data steps first)."""
        flags = [*(flag for fifo in self.fifos for flag in fifo.flags()), *self.block_end]
        for flag in flags:
            if flag.pending:
                raise HazardError(f"{flag.name} was set {flag.pending} more time(s) than waited in block "
                                  f"{self.block.index} (cycle {self.env.now:.0f}): producer and consumer "
                                  f"disagree on the credit rule")
        for pool in self._pools():
            if pool.in_use:
                raise HazardError(f"{pool.name}: {pool.in_use} slot(s) still held at the end of block "
                                  f"{self.block.index} (cycle {self.env.now:.0f})")
        if not keep_tiles:
            self.restart(self.block)

    def restart(self, block: Block) -> None:
        """Reset every buffer, FIFO and flag to its initial state (dropping the tiles), for ``block``."""
        self.block = block
        for pool in self._pools():
            pool.reset()
        for fifo in self.fifos:
            fifo.reset()
        for flag in self.block_end:
            flag.reset()
        for ring in self.l1_exp_max:
            ring.reset()

