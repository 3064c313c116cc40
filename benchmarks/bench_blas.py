"""BLAS threads for the numerics: ``numerics.blas_threads = 1`` (the default) vs one per core.

Run: ``python benchmarks/bench_blas.py [--repeats N]``.  Times ``runner.compute`` (simulation with
numerics, the fp64 reference and the kernel-ordered golden; no event log, nothing written) of
S0 = 512, S1 = 8192 with the numpy backend, the two settings alternated, and prints the medians.
One thread per core is what OpenBLAS does when nobody chooses.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from tfa_sim.api.runner import compute
from tfa_sim.spec.load import load_config

SETTINGS = ["case.s0=512", "case.s1=8192", "numerics.backend=\"numpy\""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    times: dict[int, list[float]] = {1: [], cores: []}
    for _ in range(args.repeats):
        for threads in times:
            config = load_config(overrides=[*SETTINGS, f"numerics.blas_threads={threads}"])
            start = time.perf_counter()
            compute(config, event_log=False)
            times[threads].append(time.perf_counter() - start)
    print(f"S0=512 S1=8192 numpy backend, runner.compute, median of {args.repeats} alternated runs:")
    for threads, ts in times.items():
        print(f"  blas_threads={threads}: {statistics.median(ts):.3f} s  ({', '.join(f'{t:.2f}' for t in ts)})")
    print(f"  one thread per core / one thread: {statistics.median(times[cores]) / statistics.median(times[1]):.2f}×")


if __name__ == "__main__":
    main()
