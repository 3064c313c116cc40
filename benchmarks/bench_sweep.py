"""Sweep throughput: ``--jobs 1`` against ``--jobs 2`` on the shipped sweeps (issue: ≥ 1.6× on chips.toml).

Run: ``python benchmarks/bench_sweep.py [--rounds N] [--sweep NAME] [--plots yes|no|both]
[--python PATH ...]`` (defaults: 3 rounds, both shipped sweeps, with and without plots, this interpreter).
Each run is a fresh ``tfa-sim sweep FILE --out NEW --no-progress`` in a subprocess, timed from start to
exit: interpreter start, imports, all points, the report and its plots; then the same with ``--no-plots``
(the plots are drawn in the parent alike for every ``--jobs``).  The settings alternate, the order flipping
every round, so a noisy shared machine slows both alike; the figures are medians.  With several
``--python`` (each tree's venv interpreter: a side-by-side comparison of two trees) every round runs each
interpreter's two settings, alternated the same way.  The CPU seconds of each run (all its processes) show
when another job on the machine took a core: a ``--jobs 2`` run far below 200 % did not get two.  Before
each run the benchmark waits (up to ``--idle-wait`` s, default 120) for the machine to be at least 80 % idle.
"""
from __future__ import annotations

import argparse
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


def timed_run(python: str, spec: Path, out: Path, jobs: int, plots: bool, idle_wait: float
              ) -> tuple[float, float, int]:
    """Wall and CPU seconds of one fresh sweep, and the points it simulated (its own and reference points)."""
    if idle_wait > 0 and not wait_for_idle(idle_wait):
        print("  (the machine stayed busy: this run shares its cores)", flush=True)
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run([python, "-m", "tfa_sim", "sweep", str(spec), "--out", str(out), "--jobs", str(jobs),
                    "--no-progress", *([] if plots else ["--no-plots"])], check=True, capture_output=True)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    return wall, cpu, len(read_results(out / "results.jsonl")) + len(read_results(out / "references.jsonl"))


def bench(pythons: list[str], spec: Path, rounds: int, tmp: Path, plots: bool, idle_wait: float) -> None:
    """``rounds`` alternated runs of each interpreter at ``--jobs`` 1 and 2; prints each run and the medians."""
    runs: dict[tuple[int, int], list[tuple[float, float]]] = {(t, j): [] for t in range(len(pythons)) for j in (1, 2)}
    n = 0
    for r in range(rounds):
        order = [(t, j) for t in range(len(pythons)) for j in (1, 2)]
        for t, jobs in order if r % 2 == 0 else order[::-1]:
            wall, cpu, n = timed_run(pythons[t], spec, tmp / f"{spec.stem}-{plots}-{r}-{t}-{jobs}", jobs, plots,
                                     idle_wait)
            runs[t, jobs].append((wall, cpu))
    label = f"{spec.name}{'' if plots else ' --no-plots'}"
    for t, python in enumerate(pythons):
        tree = f" [{python}]" if len(pythons) > 1 else ""
        med = {jobs: statistics.median(w for w, _c in runs[t, jobs]) for jobs in (1, 2)}
        for jobs in (1, 2):
            each = ", ".join(f"{w:.2f} s ({c:.2f} s CPU, {c / w:.0%})" for w, c in runs[t, jobs])
            print(f"{label}{tree}: --jobs {jobs}: {n} points, median {med[jobs]:.2f} s = {n / med[jobs]:.2f} "
                  f"points/s (runs: {each})")
        print(f"{label}{tree}: --jobs 2 is {med[1] / med[2]:.2f}× --jobs 1 (median wall time ratio)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sweep", action="append", choices=SWEEPS, help="a shipped sweep (default: both)")
    parser.add_argument("--plots", choices=("yes", "no", "both"), default="both")
    parser.add_argument("--python", action="append", help="an interpreter to run tfa-sim with (default: this one)")
    parser.add_argument("--idle-wait", type=float, default=120.0, help="seconds to wait for an idle machine")
    args = parser.parse_args()
    plots = {"yes": (True,), "no": (False,), "both": (True, False)}[args.plots]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sweep or SWEEPS:
            for drawn in plots:
                bench(args.python or [sys.executable], CONFIG_DIR / "sweeps" / name, args.rounds, Path(tmp), drawn,
                      args.idle_wait)


if __name__ == "__main__":
    main()
