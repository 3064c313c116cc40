"""Simulator speed: a timing-only run of the largest measured shape (910b2, S0 = S1 = 32768, 256 blocks).

Run: ``python benchmarks/bench_sim.py [S]`` (S0 = S1 = S, default 32768).  Target
(issue 3): under 10 s wall on a 2-core machine.  Prints wall time and simulated
instruction groups (events) per wall second.
"""
from __future__ import annotations

import sys
import time

from tfa_sim.config import load_config
from tfa_sim.simulation import simulate
from tfa_sim.hardware import load_hardware


def main() -> None:
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
    config = load_config(overrides=[f"case.s0={s}", f"case.s1={s}", 'hardware.preset="910b2"',
                                    "numerics.enabled=false"])
    hw = load_hardware(config.hardware)
    start = time.perf_counter()
    result = simulate(config, hw, None, log_events=False)
    wall = time.perf_counter() - start
    events = result.stats.instructions
    print(f"910b2 S0=S1={s}: {result.blocks} blocks on {result.cores_used} cores ({result.waves} waves), "
          f"simulated {result.time_us:.1f} µs")
    print(f"  wall {wall:.2f} s, {events} instruction groups, {events / wall:,.0f} events per wall second")


if __name__ == "__main__":
    main()
