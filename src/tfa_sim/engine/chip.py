"""The chip: N AI cores, shared GM, blocks dispatched round-robin in waves; one SimPy run.

Core c runs blocks c, c+N, c+2N, … (the kernel's ``for block = coreIdx;
block < total; block += coreNum``), one after another.  Time 0 is the kernel
launch; cores start after the launch overhead and pay a dispatch overhead
per block.  A run that stops with work left is a deadlock (exit 3).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field

import simpy

from tfa_sim.blocks import Block, make_blocks
from tfa_sim.config import Config
from tfa_sim.costs import Costs
from tfa_sim.engine.diagnose import deadlock_report
from tfa_sim.engine.gm import GlobalMemory
from tfa_sim.engine.pipes import Stats
from tfa_sim.engine.program import BlockProgram, Core, Numerics
from tfa_sim.errors import ScheduleError
from tfa_sim.hardware import Hardware


@dataclass
class SimResult:
    total_cycles: float
    clock_mhz: float
    cores_used: int
    blocks: int
    waves: int
    stats: Stats
    core_spans: list[tuple[float, float]] = field(default_factory=list)
    gm_bytes: int = 0

    @property
    def time_us(self) -> float:
        return self.total_cycles / self.clock_mhz


def dispatch(blocks: list[Block], cores: int) -> list[list[Block]]:
    """Blocks of each core in execution order (round-robin, waves of ``cores`` blocks)."""
    return [blocks[c::cores] for c in range(cores)]


def simulate(config: Config, hw: Hardware, numerics: Numerics | None = None, log_events: bool = True) -> SimResult:
    """Run the whole kernel once; fills ``numerics.out`` when numerics are on."""
    costs = Costs(hw)
    env = simpy.Environment()
    stats = Stats(log_events)
    gm = GlobalMemory(costs.gm["bandwidth"], costs.gm["latency"])
    blocks = make_blocks(config)
    n_cores = min(hw.cube_cores, len(blocks))
    cores = [Core(env, i, stats, gm) for i in range(n_cores)]
    spans: list[list[float]] = [[0.0, 0.0] for _ in cores]
    current: list[BlockProgram | None] = [None] * n_cores

    def run_core(core: Core, queue: list[Block]):
        yield env.timeout(costs.overhead["launch"])
        spans[core.index][0] = env.now
        for block in queue:
            yield env.timeout(costs.overhead["block_dispatch"])
            program = BlockProgram(env, core, block, config, hw, costs, numerics)
            current[core.index] = program
            end = program.issue()
            yield end.done
            program.check_clean()
            program.close()
        spans[core.index][1] = env.now

    procs = [env.process(run_core(core, q)) for core, q in zip(cores, dispatch(blocks, n_cores))]
    # The run allocates millions of short-lived objects; cyclic GC passes over them cost
    # a fifth of the wall time on large runs.  Blocks drop their tiles when they end
    # (BlockProgram.close), so what stays uncollected until the end is small.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        env.run()
    finally:
        if gc_was_enabled:
            gc.enable()
    stuck = [c for c, p in zip(cores, procs) if p.is_alive]
    if stuck:
        raise ScheduleError(deadlock_report(env.now, stuck, current))
    return SimResult(total_cycles=max(e for _, e in spans), clock_mhz=hw.clock_mhz, cores_used=n_cores,
                     blocks=len(blocks), waves=-(-len(blocks) // n_cores), stats=stats,
                     core_spans=[tuple(s) for s in spans], gm_bytes=gm.bytes)
