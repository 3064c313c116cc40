"""Simulator speed: a timing-only run of the largest measured shape (910b2, S0 = S1 = 32768, 256 blocks).

Run: ``python benchmarks/bench_sim.py [S] [--event-log] [--public-simpy]`` (S0 = S1 = S, default
32768).  Prints wall time, instruction groups per wall second, and next to it
the bare SimPy event rate measured in the same process (one process yielding
``Timeout`` events), so the ratio does not depend on how busy the machine is.
``--public-simpy`` reruns itself with ``TFA_SIM_PUBLIC_SIMPY=1`` (SimPy's
public API instead of the shortcuts in ``tfa_sim/clock/simpy_adapter.py``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import simpy

from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import load_config
from tfa_sim.stages.plan import kernel_plan


def bare_simpy_rate(events: int = 300_000) -> float:
    """Events per second of a bare SimPy loop: one process, one Timeout per step."""
    env = simpy.Environment()

    def ticker(env: simpy.Environment):
        for _ in range(events):
            yield env.timeout(1)

    env.process(ticker(env))
    start = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - start)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--public-simpy" in sys.argv and os.environ.get("TFA_SIM_PUBLIC_SIMPY") != "1":
        argv = [sys.executable, __file__, *[a for a in sys.argv[1:] if a != "--public-simpy"]]
        sys.exit(subprocess.call(argv, env={**os.environ, "TFA_SIM_PUBLIC_SIMPY": "1"}))
    s = int(args[0]) if args else 32768
    log = "--event-log" in sys.argv
    config = load_config(overrides=[f"case.s0={s}", f"case.s1={s}", 'hardware.preset="910b2"',
                                    "numerics.enabled=false"])
    hw = load_hardware(config.hardware)
    bare = bare_simpy_rate()
    start = time.perf_counter()
    result = simulate(kernel_plan(config, hw), None, log_events=log)
    wall = time.perf_counter() - start
    groups = result.stats.instructions
    api = "public SimPy API" if os.environ.get("TFA_SIM_PUBLIC_SIMPY") == "1" else "SimPy shortcuts"
    print(f"910b2 S0=S1={s}: {result.blocks} blocks on {result.cores_used} cores ({result.waves} waves), "
          f"simulated {result.time_us:.1f} µs; event log {'on' if log else 'off'}; {api}")
    print(f"  wall {wall:.2f} s, {groups} instruction groups, {groups / wall:,.0f} groups/s; bare SimPy "
          f"{bare:,.0f} events/s (ratio {bare / (groups / wall):.1f}×)")


if __name__ == "__main__":
    main()
