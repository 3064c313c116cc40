"""Whole-run numerics cost, numpy / native (issue 13): ``tfa-sim run`` minus ``--no-numerics``, no event log.

Run: ``python benchmarks/bench_numerics_cost.py [--rounds N] [--s0 S0] [--s1 S1] [TFA_SIM ...]``.  Each
TFA_SIM is a ``tfa-sim`` executable (default: the one on PATH); give two trees' executables to compare them
side by side.  Every round runs native, numpy and timing-only once per executable, alternated, and the
medians are printed with the ratio (numpy's cost over native's; target ≥ 5× at S0 = 512, S1 = 8192).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

VARIANTS = {"native": ["--set", "numerics.backend=native"], "numpy": ["--set", "numerics.backend=numpy"],
            "none": ["--no-numerics"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("executables", nargs="*", default=[shutil.which("tfa-sim") or "tfa-sim"], metavar="TFA_SIM")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--s0", type=int, default=512)
    p.add_argument("--s1", type=int, default=8192)
    args = p.parse_args()
    base = ["run", "--set", f"case.s0={args.s0}", "--set", f"case.s1={args.s1}", "--no-event-log"]
    times: dict[tuple[str, str], list[float]] = {(exe, v): [] for exe in args.executables for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for exe, variant in times:
                out = Path(tmp) / f"{len(times)}-{variant}-{abs(hash(exe))}"
                start = time.perf_counter()
                subprocess.run([exe, *base, *VARIANTS[variant], "--out", str(out)], check=True,
                               stdout=subprocess.DEVNULL)
                times[exe, variant].append(time.perf_counter() - start)
    print(f"S0={args.s0} S1={args.s1}, {args.rounds} alternated rounds, medians:")
    for exe in args.executables:
        m = {v: statistics.median(times[exe, v]) for v in VARIANTS}
        native, numpy = m["native"] - m["none"], m["numpy"] - m["none"]
        print(f"  {exe}: native {m['native']:.3f} s, numpy {m['numpy']:.3f} s, none {m['none']:.3f} s; "
              f"numerics cost native {native:.3f} s, numpy {numpy:.3f} s: {numpy / native:.2f}x")


if __name__ == "__main__":
    main()
