"""Sweep throughput: ``--jobs 1`` against ``--jobs 2`` on the shipped sweeps (issue: ≥ 1.6× on chips.toml).

Run: ``python benchmarks/bench_sweep.py [ROUNDS]`` (default 3).  Each run is a fresh
``tfa-sim sweep FILE --out NEW --no-progress`` in a subprocess, timed from start to
exit: interpreter start, imports, all points, the report and its plots; then the same
with ``--no-plots`` (the plots are drawn in the parent alike for every ``--jobs``).  The two settings
alternate, the order flipping every round, so a noisy shared machine slows both
alike; the figures are medians.  The CPU share of each run (all its processes) shows
when another job on the machine took a core: a ``--jobs 2`` run far below 200 % did
not get two.  Before each run the benchmark waits (up to 2 minutes) for the machine
to be at least 80 % idle.
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tfa_sim.explore.sweep import read_results
from tfa_sim.spec.config import CONFIG_DIR

SWEEPS = ("chips.toml", "preload_tiling.toml")


def _idle_share(seconds: float = 2.0) -> float:
    """The machine's idle CPU share over ``seconds`` (Linux /proc/stat; 1.0 where unavailable)."""
    def idle_total() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return fields[3], sum(fields)

    if not Path("/proc/stat").exists():
        return 1.0
    i0, t0 = idle_total()
    time.sleep(seconds)
    i1, t1 = idle_total()
    return (i1 - i0) / max(1, t1 - t0)


def wait_for_idle(limit: float = 120.0, share: float = 0.8) -> bool:
    """Wait (at most ``limit`` s) until other jobs leave ``share`` of the CPU idle; whether they did."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if _idle_share() >= share:
            return True
    return False


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed_run(spec: Path, out: Path, jobs: int, plots: bool) -> tuple[float, float, int]:
    """Wall and CPU seconds of one fresh sweep, and the points it simulated (its own and reference points)."""
    if not wait_for_idle():
        print("  (the machine stayed busy: this run shares its cores)", flush=True)
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "tfa_sim", "sweep", str(spec), "--out", str(out), "--jobs", str(jobs),
                    "--no-progress", *([] if plots else ["--no-plots"])], check=True, capture_output=True)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    return wall, cpu, len(read_results(out / "results.jsonl")) + len(read_results(out / "references.jsonl"))


def bench(spec: Path, rounds: int, tmp: Path, plots: bool) -> None:
    runs: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    n = 0
    for r in range(rounds):
        for jobs in ((1, 2) if r % 2 == 0 else (2, 1)):
            wall, cpu, n = timed_run(spec, tmp / f"{spec.stem}-{plots}-{r}-{jobs}", jobs, plots)
            runs[jobs].append((wall, cpu))
    med = {jobs: statistics.median(w for w, _c in rs) for jobs, rs in runs.items()}
    for jobs in (1, 2):
        each = ", ".join(f"{w:.2f} s ({c / w:.0%} CPU)" for w, c in runs[jobs])
        label = f"{spec.name}{'' if plots else ' --no-plots'}: --jobs {jobs}"
        print(f"{label}: {n} points, median {med[jobs]:.2f} s = {n / med[jobs]:.2f} points/s (runs: {each})")
    print(f"{spec.name}{'' if plots else ' --no-plots'}: --jobs 2 is {med[1] / med[2]:.2f}× --jobs 1 "
          f"(median wall time ratio)")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        for name in SWEEPS:
            for plots in (True, False):
                bench(CONFIG_DIR / "sweeps" / name, rounds, Path(tmp), plots)


if __name__ == "__main__":
    main()
