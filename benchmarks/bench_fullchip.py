"""Long sequences on the full chip stay fast: the 131072² prefill on all 24 cores of the 910b2, timing only.

Run: ``python benchmarks/bench_fullchip.py [--repeats N] [--no-full]``.

For each build's schedule (the dsl build: a persistent grid of 24 cores over 1024 units of 256 tiles of 512
columns; the manual build: 1024 blocks of 512 tiles of 256 columns in 43 waves) it runs the launch folded
``--repeats`` times and once in full (``--no-full`` skips that), no event log, and prints the wall seconds
(median of the folded runs), the predicted kernel time of each and the fold's error against the full run.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

S = 131072
BUILDS = ("dsl", "manual")


def timed(build: str, fold: bool) -> tuple[Any, float]:
    cfg = build_config({"kernel": {"build": build}, "case": {"s0": S, "s1": S}, "numerics": {"enabled": False}})
    began = time.perf_counter()
    result = simulate(kernel_plan(cfg), None, log_events=False, fold=fold)
    return result, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-full", action="store_true", help="skip the full simulations")
    args = parser.parse_args()
    # every folded run first: a fresh process is what a user runs (when a full dsl run peaked at 11 GB, the next
    # folded run, which forks its sampler, took 130–138 s instead of about 1 s)
    folded = {build: [timed(build, True) for _ in range(args.repeats)] for build in BUILDS}
    for build in BUILDS:
        runs = folded[build]
        line = (f"{build:6s} {S}²: folded {runs[0][0].time_us:10.1f} µs in "
                f"{statistics.median(t for _, t in runs):5.2f} s (median of {args.repeats}: "
                f"{', '.join(f'{t:.2f}' for _, t in runs)})")
        if not args.no_full:
            gc.collect()
            full, t_full = timed(build, False)
            line += (f"; full {full.time_us:10.1f} µs in {t_full:6.1f} s, fold error "
                     f"{runs[0][0].total_cycles / full.total_cycles - 1:+.2%}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
