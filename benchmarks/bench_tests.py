"""The README's test command in two trees, side by side (issue 44: ≤ 0.5× the time it took before).

Run: ``python benchmarks/bench_tests.py OLD_TREE NEW_TREE [--rounds N] [--first old|new]``, each tree a checkout
with its own ``.venv`` (``pip install -e ".[test]"``).  Each round runs ``python -m pytest -q`` (exactly the
README's command, so each tree's own pytest options apply) in each tree, alternating which goes first, and
prints each run's wall time, the CPU seconds of the whole process tree (workers, the tests' subprocesses), the
share of the machine's CPUs it got, and its closing line; then the medians and their ratio.  A new tree's
``__pycache__`` directories under ``tfa_sim/`` are removed before each of its runs, as a fresh clone has none.
One round of the full suite takes 10–25 minutes on a two-core machine: run nothing else meanwhile.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import time
from pathlib import Path


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_suite(tree: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``python -m pytest -q`` in ``tree`` (its venv), and pytest's closing line."""
    for cache in (tree / "tfa_sim").rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    cpu, start = _cpu(), time.perf_counter()
    r = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-m", "pytest", "-q"], cwd=tree,
                       capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    lines = [ln for ln in r.stdout.splitlines() if " passed" in ln or " failed" in ln]
    return wall, cpu, lines[-1] if lines else f"exit {r.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--first", choices=("old", "new"), default="old")
    args = parser.parse_args()
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    walls: dict[str, list[float]] = {"old": [], "new": []}
    cpus = os.cpu_count() or 1
    order = [args.first, "new" if args.first == "old" else "old"]
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            wall, cpu, line = run_suite(trees[name])
            walls[name].append(wall)
            print(f"{name} run {len(walls[name])}: {wall:.0f} s wall, {cpu:.0f} s CPU "
                  f"({cpu / wall / cpus:.0%} of {cpus} CPUs): {line}", flush=True)
    old, new = statistics.median(walls["old"]), statistics.median(walls["new"])
    print(f"medians: old {old:.0f} s, new {new:.0f} s; new/old = {new / old:.2f}")


if __name__ == "__main__":
    main()
