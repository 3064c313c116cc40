"""Folded timing-only runs (tfa_sim.sim.fold): their error against full runs, and the time per decode point.

Run: ``python benchmarks/bench_fold.py [--error] [--speed]`` (both by default).

* ``--error``: decode-shaped points small enough to simulate in full (S1 up to
  32768, batch up to 4; packed ones at S1 = 131072) and the 16k² and 32k²
  prefill squares, folded and full; prints each point's relative error of time
  and GM bytes, and the largest.
* ``--speed``: the heaviest points of ``configs/sweeps/decode.toml`` (batch
  16, S1 = 131072) folded three times each, the median wall seconds of each
  (the README's ≤ 2 s per point).
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

BASE = {"heads": 32, "kv_heads": 8}
ERROR_POINTS = [({"batch": b, "s0": s0, "s1": s1}, sch)
                for b, s0, s1 in ((1, 1, 32768), (4, 1, 16384), (2, 128, 8192), (1, 16, 32768), (4, 16, 8192))
                for sch in ({}, {"gqa_pack": True}, {"s1_split": "auto"}, {"s1_split": 8, "gqa_pack": True})]
#: Decode steps at the sweep's longest S1, as long as a full run stays short: batch 1 and 4, packed, whole and in
#: two chunks (sampling the first waves folded batch 1, S0 = 1, two chunks 15.8 % low).
LONG_POINTS = [({"batch": b, "s0": s0, "s1": 131072}, {"gqa_pack": True, **split})
               for b, s0 in ((1, 1), (4, 16)) for split in ({}, {"s1_split": 2})]
#: Full-chip prefill squares (910b2, one head), as in benchmarks/bench_sim.py.
SQUARE_POINTS = [({"heads": 1, "kv_heads": 1, "batch": 1, "s0": s, "s1": s}, {}) for s in (16384, 32768)]
SPEED_POINTS = [({"batch": 16, "s0": s0, "s1": 131072}, sch)
                for s0 in (1, 16, 128) for sch in ({}, {"gqa_pack": True}, {"s1_split": 24}, {"s1_split": "auto"})]


def timed(case: dict[str, Any], schedule: dict[str, Any], fold: bool) -> tuple[Any, float]:
    cfg = build_config({"case": {**BASE, **case}, "schedule": schedule, "numerics": {"enabled": False}})
    began = time.perf_counter()
    result = simulate(kernel_plan(cfg), None, log_events=False, fold=fold)
    return result, time.perf_counter() - began


def error() -> None:
    worst = 0.0
    points = ERROR_POINTS + LONG_POINTS + SQUARE_POINTS
    for case, schedule in points:
        (full, t_full), (fold, t_fold) = timed(case, schedule, False), timed(case, schedule, True)
        err = fold.total_cycles / full.total_cycles - 1
        worst = max(worst, abs(err))
        print(f"{case} {schedule}: full {full.time_us:9.1f} µs ({t_full:5.1f} s)  folded {fold.time_us:9.1f} µs "
              f"({t_fold:4.1f} s)  error {err:+.3%}  GM bytes {fold.gm_bytes / full.gm_bytes - 1:+.2%}", flush=True)
    print(f"largest |error| of the folded time: {worst:.2%} over {len(points)} points")


def speed(repeats: int = 3) -> None:
    """Each point folded ``repeats`` times in a row; its median wall time (this machine is shared and noisy)."""
    times = []
    for case, schedule in SPEED_POINTS:
        runs = [timed(case, schedule, True) for _ in range(repeats)]
        seconds = statistics.median(t for _, t in runs)
        times.append(seconds)
        print(f"{case} {schedule}: {runs[0][0].time_us:10.1f} µs, folded in {seconds:.2f} s (median of {repeats}: "
              f"{', '.join(f'{t:.2f}' for _, t in runs)})", flush=True)
    print(f"folded decode points: max {max(times):.2f} s, median {statistics.median(times):.2f} s "
          f"(per-point medians of {repeats})")


if __name__ == "__main__":
    args = set(sys.argv[1:]) or {"--error", "--speed"}
    if "--error" in args:
        error()
    if "--speed" in args:
        speed()
