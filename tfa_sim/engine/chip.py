"""The chip: N AI cores, shared GM, each launch's blocks run as its dispatch says; one SimPy run.

A run is one or more kernel launches, one after another (the split-S1 kernel
and its combine).  In each, core c runs what the launch's
:class:`~tfa_sim.spec.geometry.Dispatch` queues for it, one after another: blocks
c, c+N, c+2N, … of a hardware-dispatched launch, or a persistent core's units in
one program.  Time 0 is the first launch's start on the device: core c starts
``c·core_stagger`` cycles later and pays ``block_dispatch`` before each block.
The kernel time is the last launch's last core's end, as the board measures
it.  A later launch of the same stream (the split-S1 combine) starts
``launch.gap`` after the one before it ends: the gap a stream of launches pays
between kernels (tfa_sim.sim.prediction).  What a block does comes from a
:class:`Kernel` (the stage programs of ``tfa_sim.stages``); the chip only runs
it.  A run that stops with work left is a deadlock (exit 3).
"""
from __future__ import annotations

import gc
from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import simpy

from tfa_sim.buffers.ffts import Ffts
from tfa_sim.clock.simpy_adapter import run
from tfa_sim.engine.core import Core
from tfa_sim.engine.diagnose import deadlock_report
from tfa_sim.engine.gm import GlobalMemory
from tfa_sim.engine.issue import IssueStream, Program
from tfa_sim.engine.ops import BlockOps
from tfa_sim.engine.pipes import Pipe, Stats
from tfa_sim.rundir.events import DISPATCH
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import ScheduleError
from tfa_sim.spec.geometry import Dispatch
from tfa_sim.spec.hardware import Hardware


class BlockRun(Protocol):
    """One block on one core: its units' programs, and the check at its end."""

    @property
    def programs(self) -> Sequence[tuple[Sequence[Pipe], Program]]:
        """Each unit's pipes and program, in issue order."""

    def finish(self, keep_tiles: bool = False) -> None:
        """Called when every program has completed: check the buffers are clean, drop the tiles (unless
        ``keep_tiles``: the block's data steps have yet to run, engine/ops.py)."""

    def restart(self, block: Any) -> None:
        """Reset the buffers for ``block``, whose programs replay this run's template."""


class Kernel(Protocol):
    """What the chip runs: the launch's dispatch, and how a dispatched block starts on a core."""

    @property
    def name(self) -> str:
        """The launch's name in reports (``tfa``, ``combine``)."""

    @property
    def stages(self) -> Sequence[str]: ...

    @property
    def config(self) -> Config:
        """The run's config."""

    @property
    def dispatch(self) -> Dispatch:
        """The launch's units in dispatch order and the cores they run on."""

    def start(self, env: simpy.Environment, core: Core, block: Any, stats: Stats) -> BlockRun:
        """A dispatched item's buffers on ``core`` and its units' programs (a block, or a persistent core's
        :class:`~tfa_sim.spec.geometry.CoreUnits`: all its units in one program, paying the set-up once, one
        unit's work running into the next's)."""

    def template_key(self, block: Any) -> Hashable | None:
        """Blocks with equal keys issue the same instructions on the same buffers (None: never replay)."""


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a run: its name, its first block's index, its blocks (units), cores and waves (its
    dispatch's, :class:`~tfa_sim.spec.geometry.Dispatch`), and when it started and ended (cycles)."""

    name: str
    first_block: int
    blocks: int
    cores: int
    waves: int
    start: float
    end: float


@dataclass
class SimResult:
    total_cycles: float
    clock_mhz: float
    cores_used: int
    blocks: int
    waves: int
    stats: Stats
    gm_bytes: int = 0
    hbm_bytes: int = 0
    sync_messages: int = 0  # cross-core flag messages through the chip's sync unit (buffers/ffts.py)
    sync_busy: float = 0.0  # cycles the unit spent serving them
    sync_queued: float = 0.0  # cycles they waited for it, summed
    launches: list[Launch] = field(default_factory=list)
    core_busy: list[float] = field(default_factory=list)  # per core of the first launch: dispatch + its blocks
    core_end: list[float] = field(default_factory=list)  # per core of the first launch: when its last block ended
    work: dict[str, int] = field(default_factory=dict)  # what the kernel's blocks issue (filled by the caller)
    folded: Any = None  # a folded run (tfa_sim.sim.fold): per launch its samples; or why a fold was refused

    @property
    def time_us(self) -> float:
        return self.total_cycles / self.clock_mhz


class _Chip:
    """The cores, GM and statistics of one run, and the processes that run its launches."""

    def __init__(self, hw: Hardware, log_events: bool, stages: Sequence[str], op_workers: int,
                 launch_gap: float) -> None:
        self.hw, self.env, self.launch_gap = hw, simpy.Environment(), launch_gap
        self.stats = Stats(log_events, stages)
        self.stats.ops = BlockOps(op_workers) if op_workers else None
        self.gm = GlobalMemory(hw.gm.l2_bandwidth, hw.gm.l2_latency, hw.gm.hbm_bandwidth, hw.gm.miss_latency)
        self.ffts = Ffts(hw.sync.ffts_service)
        self.cores: list[Core] = []  # created as launches need them (unused cores have no pipes in the stats)
        self.launches: list[Launch] = []
        self.busy: list[list[float]] = []  # per launch, per core
        self.ends: list[list[float]] = []
        self.running: list[tuple[Core, Any]] = []  # the core processes of the launch under way

    def run_launches(self, kernels: Sequence[Kernel]) -> Generator[simpy.Event, Any, None]:
        """Each kernel ``launch_gap`` after the previous one has ended (the stream's gap), then its cores."""
        for at, kernel in enumerate(kernels):
            if at and self.launch_gap:
                yield self.env.timeout(self.launch_gap)
            start, dispatch = self.env.now, kernel.dispatch
            n = dispatch.cores
            self.cores += [Core(self.env, i, self.stats, self.gm, self.ffts) for i in range(len(self.cores), n)]
            busy, ends = [0.0] * n, [start] * n
            self.running = [(core, self.env.process(self.run_core(kernel, core, queue, busy, ends)))
                            for core, queue in zip(self.cores, dispatch.queues())]
            yield simpy.AllOf(self.env, [proc for _, proc in self.running])
            if self.stats.ops is not None:
                self.stats.ops.drain()  # the next launch may read what this one's blocks wrote
            first = dispatch.order[0].index if dispatch.order else 0
            self.launches.append(Launch(kernel.name, first, dispatch.units, n, dispatch.waves, start,
                                        max(ends, default=start)))
            self.busy.append(busy)
            self.ends.append(ends)

    def run_core(self, kernel: Kernel, core: Core, queue: list[Any], busy: list[float],
                 ends: list[float]) -> Generator[simpy.Event, Any, None]:
        env, stats, over = self.env, self.stats, self.hw.overhead
        templates: dict[Hashable, tuple[BlockRun, list[list[Any]]]] = {}
        wait = core.index * over.core_stagger
        if wait:
            stats.span(core.cube[0].unit, DISPATCH, DISPATCH, queue[0].index, "kernel start", env.now, env.now + wait)
            yield env.timeout(wait)
        for block in queue:  # a block, or a persistent core's units
            began = env.now
            if over.block_dispatch:
                stats.span(core.cube[0].unit, DISPATCH, DISPATCH, block.index, "block dispatch", env.now,
                           env.now + over.block_dispatch)
                yield env.timeout(over.block_dispatch)
            yield from self.run_block(kernel, core, block, templates)
            busy[core.index] += env.now - began
        ends[core.index] = env.now

    def run_block(self, kernel: Kernel, core: Core, block: Any,
                  templates: dict[Hashable, tuple[BlockRun, list[list[Any]]]]) -> Generator[simpy.Event, Any, None]:
        """One block on ``core``: its programs issued (or a recorded template replayed) until all complete."""
        key = kernel.template_key(block)
        cached = templates.get(key) if key is not None else None
        base = getattr(block, "line_base", None)
        for pipe in core.pipes():  # input lines are named relative to the block's tensors: templates replay
            pipe.line_base = base
            pipe.keep_waits = key is not None
        run = kernel.start(self.env, core, block, self.stats) if cached is None else cached[0]
        streams = core.streams = [IssueStream(self.env, pipes[0].unit, pipes) for pipes, _ in run.programs]
        if cached is None:
            for stream, (_, program) in zip(streams, run.programs):
                stream.run(program, record=key is not None)
            if key is not None:  # the streams fill their item lists until the block ends
                templates[key] = (run, [stream.items for stream in streams if stream.items is not None])
        else:
            run.restart(block)
            for stream, template in zip(streams, cached[1]):
                stream.replay(template, block.index)
        for stream in streams:
            done = stream.done()
            if done is not None:
                yield done
        ops = self.stats.ops
        run.finish(keep_tiles=ops is not None)
        if ops is not None:
            for unit in block.units:  # each unit's steps, in order
                ops.block_done(unit.index, run)


def run_chip(kernels: Kernel | Sequence[Kernel], hw: Hardware, log_events: bool = True,
             op_workers: int = 0, launch_gap: float = 0.0) -> SimResult:
    """Run the kernels (one launch each, in order, ``launch_gap`` cycles apart) once on ``hw``; time 0 is the
    first launch's start.  ``op_workers``: the numerics' data steps run per block on that many worker threads
    (engine/ops.py); 0: each as its instruction completes, in the simulation's thread."""
    launches = [kernels] if not isinstance(kernels, Sequence) else list(kernels)
    chip = _Chip(hw, log_events, [s for k in launches for s in k.stages if s], op_workers, launch_gap)
    launcher = chip.env.process(chip.run_launches(launches))
    # The run allocates millions of short-lived objects; cyclic GC passes over them cost
    # a fifth of the wall time on large runs.  Blocks drop their tiles when they end
    # (BlockRun.finish), so what stays uncollected until the end is small.  ``tfa-sim run`` keeps it
    # off until the run's files are written (runner.gc_paused): then this leaves it off.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = _finish(chip, launcher, hw)
    finally:
        # GC comes back once the run's graph (cyclic: processes, pipes, instructions) is unreachable, so that its
        # first pass frees it in the youngest generation; back while the graph is still held, that pass would
        # only promote it, and an older generation's pass free it later: two walks over it instead of one.
        del chip, launcher
        if gc_was_enabled:
            gc.enable()
    return result


def _finish(chip: _Chip, launcher: Any, hw: Hardware) -> SimResult:
    """Run ``chip`` to its end (a deadlock diagnosed) and read its figures."""
    try:
        run(chip.env)  # each launch drains its blocks' data steps before the next starts
    finally:
        if chip.stats.ops is not None:
            chip.stats.ops.close()
    if launcher.is_alive:
        stuck = [core for core, proc in chip.running if proc.is_alive]
        raise ScheduleError(deadlock_report(chip.env.now, stuck))
    first = chip.launches[0]
    return SimResult(total_cycles=chip.launches[-1].end, clock_mhz=hw.clock_mhz, cores_used=first.cores,
                     blocks=first.blocks, waves=first.waves, stats=chip.stats, gm_bytes=chip.gm.bytes,
                     hbm_bytes=chip.gm.hbm_bytes, sync_messages=chip.ffts.messages,
                     sync_busy=chip.ffts.messages * chip.ffts.service, sync_queued=chip.ffts.queued,
                     launches=chip.launches, core_busy=chip.busy[0], core_end=chip.ends[0])
