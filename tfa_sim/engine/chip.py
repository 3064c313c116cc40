"""The chip: N AI cores, shared GM, blocks dispatched round-robin in waves; one SimPy run.

Core c runs blocks c, c+N, c+2N, … (the kernel's ``for block = coreIdx;
block < total; block += coreNum``), one after another.  Time 0 is the kernel
launch; cores start after the launch overhead and pay a dispatch overhead
per block.  A run that stops with work left is a deadlock (exit 3).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass

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
    ends = [0.0] * n_cores

    def run_core(core: Core, queue: list[Block]):
        yield env.timeout(costs.overhead["launch"])
        for block in queue:
            yield env.timeout(costs.overhead["block_dispatch"])
            program = BlockProgram(env, core, block, config, hw, costs, numerics)
            end = program.issue()
            yield end.done
            program.check_clean()
            program.close()
        ends[core.index] = env.now

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
        raise ScheduleError(deadlock_report(env.now, stuck))
    return SimResult(total_cycles=max(ends), clock_mhz=hw.clock_mhz, cores_used=n_cores,
                     blocks=len(blocks), waves=-(-len(blocks) // n_cores), stats=stats,
                     gm_bytes=gm.bytes)
