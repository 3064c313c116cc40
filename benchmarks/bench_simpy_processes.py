"""Why the pipes are callbacks, not SimPy processes: the same stage programs on both engines.

Run: ``python benchmarks/bench_simpy_processes.py [S]`` (910b2, S0 = S1 = S, default 8192, timing only).
The stage programs (``tfa_sim.stages``) are generator processes either way; this
script swaps the engine's callback-driven :class:`~tfa_sim.engine.pipes.Pipe` for
a textbook SimPy pipe — one process per pipe that takes instructions from a
``simpy.Store``, ``yield``s each wait (another instruction's completion event, a
slot request, a flag request) and a ``Timeout`` for its cost — runs both engines
alternately three times and prints the median wall times, the ratio and whether
the two give the same makespan.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import simpy

import tfa_sim.engine.core as core_module
from tfa_sim.buffers.pools import Granted
from tfa_sim.engine.pipes import GmMove, Instr, Pipe, Stats
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import load_config
from tfa_sim.stages.plan import kernel_plan


class ProcessPipe(Pipe):
    """An in-order pipe as a SimPy process: Store → waits → Timeout → effects."""

    def __init__(self, env: simpy.Environment, unit: str, name: str, stats: Stats, gm: Any = None) -> None:
        super().__init__(env, unit, name, stats, gm)
        self.store = simpy.Store(env)
        env.process(self._run())

    def issue(self, ins: Instr) -> Instr:
        self.store.put(ins)
        return ins

    def _run(self):
        env = self.env
        while True:
            ins = yield self.store.get()
            for source in ins.waits:
                if source.__class__ is Instr:
                    if not source.finished:
                        yield source.done
                else:
                    ev = source.request(ins)
                    if not isinstance(ev, Granted):
                        yield ev
            ins.start = env.now
            cost = ins.cost
            cycles = self.gm.transfer(env.now, cost.nbytes, cost.rate)[0] if isinstance(cost, GmMove) else cost
            if cycles > 0:
                yield env.timeout(cycles)
            self._finish(ins, cycles)

    def _finish(self, ins: Instr, cycles: float) -> None:
        ins.end = self.env.now
        self.executed += 1
        self.busy += cycles
        for effect in ins.then:
            effect(ins)
        ins.finished = True
        if ins._done is not None:
            ins._done.succeed()


def run(config: Any, hw: Any, engine: type) -> tuple[float, float]:
    core_module.Pipe = engine  # type: ignore[misc]
    try:
        start = time.perf_counter()
        result = simulate(kernel_plan(config, hw), None, log_events=False)
        return time.perf_counter() - start, result.total_cycles
    finally:
        core_module.Pipe = Pipe  # type: ignore[misc]


def main() -> None:
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    config = load_config(overrides=[f"case.s0={s}", f"case.s1={s}", "numerics.enabled=false"])
    hw = load_hardware(config.hardware)
    walls: dict[str, list[float]] = {"callbacks": [], "processes": []}
    makespans = {}
    for _ in range(3):
        for name, engine in (("callbacks", Pipe), ("processes", ProcessPipe)):
            wall, cycles = run(config, hw, engine)
            walls[name].append(wall)
            makespans[name] = cycles
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"910b2 S0=S1={s}, timing only, medians of 3 alternated runs:")
    for name, label in (("callbacks", "callback pipes (tfa-sim's engine)"), ("processes", "SimPy process per pipe")):
        print(f"  {label:34s} {med[name]:.2f} s, makespan {makespans[name]:.0f} cycles")
    print(f"  processes / callbacks: {med['processes'] / med['callbacks']:.2f}×")


if __name__ == "__main__":
    main()
