"""The chip: N AI cores, shared GM, blocks dispatched round-robin in waves; one SimPy run.

Core c runs blocks c, c+N, c+2N, … (the kernel's ``for block = coreIdx;
block < total; block += coreNum``), one after another.  Time 0 is when the
first core starts; core c starts ``c·core_stagger`` cycles later (the device
starts its cores one after another) and pays ``block_dispatch`` before each
block.  The kernel time is the last core's end: max(end) − min(start), as the
board measures it; the host's launch comes before time 0 and is reported
apart.  What a block does comes from a :class:`Kernel` (the stage programs of
``tfa_sim.stages``); the chip only runs it.  A run that stops with work left
is a deadlock (exit 3).
"""
from __future__ import annotations

import gc
from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import simpy

from tfa_sim.engine.core import Core
from tfa_sim.engine.diagnose import deadlock_report
from tfa_sim.engine.gm import GlobalMemory
from tfa_sim.engine.issue import IssueStream, Program
from tfa_sim.engine.pipes import Pipe, Stats
from tfa_sim.errors import ScheduleError
from tfa_sim.hardware import Hardware


class BlockRun(Protocol):
    """One block on one core: its units' programs, and the check at its end."""

    @property
    def programs(self) -> Sequence[tuple[Sequence[Pipe], Program]]:
        """Each unit's pipes and program, in issue order."""

    def finish(self) -> None:
        """Called when every program has completed: check the buffers are clean, drop the tiles."""

    def restart(self, block: Any) -> None:
        """Reset the buffers for ``block``, whose programs replay this run's template."""


class Kernel(Protocol):
    """What the chip runs: the blocks in dispatch order, and how a block starts on a core."""

    @property
    def stages(self) -> Sequence[str]: ...

    @property
    def blocks(self) -> Sequence[Any]: ...

    def start(self, env: simpy.Environment, core: Core, block: Any, stats: Stats) -> BlockRun:
        """The block's buffers on ``core`` and its units' programs."""

    def template_key(self, block: Any) -> Hashable | None:
        """Blocks with equal keys issue the same instructions on the same buffers (None: never replay)."""


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

    @property
    def time_us(self) -> float:
        return self.total_cycles / self.clock_mhz


#: The stage and pipe name of a block's dispatch in the event log (drawn before each block on the AIC).
DISPATCH = "dispatch"


def dispatch(blocks: Sequence[Any], cores: int) -> list[list[Any]]:
    """Blocks of each core in execution order (round-robin, waves of ``cores`` blocks)."""
    return [list(blocks[c::cores]) for c in range(cores)]


def run_chip(kernel: Kernel, hw: Hardware, log_events: bool = True) -> SimResult:
    """Run the whole kernel once on ``hw``."""
    env = simpy.Environment()
    stats = Stats(log_events, kernel.stages)
    gm = GlobalMemory(hw.gm.l2_bandwidth, hw.gm.l2_latency, hw.gm.hbm_bandwidth, hw.gm.miss_latency)
    blocks = kernel.blocks
    n_cores = min(hw.cube_cores, len(blocks))
    cores = [Core(env, i, stats, gm) for i in range(n_cores)]
    ends = [0.0] * n_cores

    def run_core(core: Core, queue: list[Any]) -> Generator[simpy.Event, Any, None]:
        templates: dict[Hashable, tuple[BlockRun, list[list[Any]]]] = {}
        if core.index and hw.overhead.core_stagger:
            yield env.timeout(core.index * hw.overhead.core_stagger)
        for block in queue:
            if hw.overhead.block_dispatch:
                stats.span(core.cube[0].unit, DISPATCH, DISPATCH, block.index, "block dispatch", env.now,
                           env.now + hw.overhead.block_dispatch)
                yield env.timeout(hw.overhead.block_dispatch)
            key = kernel.template_key(block)
            cached = templates.get(key) if key is not None else None
            run = kernel.start(env, core, block, stats) if cached is None else cached[0]
            streams = core.streams = [IssueStream(env, pipes[0].unit, pipes) for pipes, _ in run.programs]
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
            run.finish()
        ends[core.index] = env.now

    procs = [env.process(run_core(core, q)) for core, q in zip(cores, dispatch(blocks, n_cores))]
    # The run allocates millions of short-lived objects; cyclic GC passes over them cost
    # a fifth of the wall time on large runs.  Blocks drop their tiles when they end
    # (BlockRun.finish), so what stays uncollected until the end is small.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        env.run()
    finally:
        if gc_was_enabled:
            gc.enable()
    stuck = [c for c, p in zip(cores, procs) if p.is_alive]
    if stuck:
        raise ScheduleError(deadlock_report(env.now, stuck))
    return SimResult(total_cycles=max(ends), clock_mhz=hw.clock_mhz, cores_used=n_cores,
                     blocks=len(blocks), waves=-(-len(blocks) // n_cores), stats=stats, gm_bytes=gm.bytes,
                     hbm_bytes=gm.hbm_bytes)
