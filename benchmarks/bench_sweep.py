"""Sweep throughput, timing only, one-block shapes, 2 workers (issue 6 target: ≥ 20 points/s).

Run: ``python benchmarks/bench_sweep.py``.  Times a fresh 240-point sweep (S0 = 128,
S1 1024…4096, preload × TILE_S1 × FIFO depth × buffer counts) with the local process
pool, from start to the last result written.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tfa_sim.sweep import run_sweep

SWEEP = """
[base.case]
s0 = 128
[axes]
"case.s1" = [1024, 2048, 4096]
"schedule.qk_preload" = [2, 3, 4, 5, 6]
"tiling.tile_s1" = [128, 256]
"schedule.cv_fifo_size" = [6, 8]
"schedule.l1_k" = [1, 2]
"schedule.l1_v" = [1, 2]
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "bench.toml"
        spec.write_text(SWEEP)
        for jobs in (1, 2):
            start = time.perf_counter()
            _, rows = run_sweep(spec, Path(tmp) / f"out{jobs}", jobs, progress=False)
            wall = time.perf_counter() - start
            ok = sum(r["status"] == "ok" for r in rows)
            print(f"--jobs {jobs}: {len(rows)} points ({ok} simulated) in {wall:.2f} s = {len(rows) / wall:.0f} "
                  f"points/s")


if __name__ == "__main__":
    main()
