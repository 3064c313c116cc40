"""Two installs of tfa-sim side by side: the 32768² timing-only run and the default run, alternated, medians and
their ratio (the speed line of issues 47 and 48: "no slower than before, side by side").

Run: ``python benchmarks/bench_side_by_side.py OLD_VENV NEW_VENV [--rounds 7]`` where each VENV is a virtual
environment with its tree installed (``OLD_VENV/bin/tfa-sim``); each round runs old then new, each command a
fresh process timed from start to exit (wall seconds, and the CPU seconds it used: user + system, steadier
when other jobs share the machine), in a scratch directory.  The machine is shared: compare the ratios, not one
absolute time.
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

#: name → the command's arguments after ``tfa-sim``.
COMMANDS = {"32768² timing only": ["run", "--set", "case.s0=32768", "--set", "case.s1=32768", "--no-numerics",
                                   "--no-event-log"],
            "default run": ["run"]}


def seconds(venv: Path, args: list[str], where: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``tfa-sim`` command run from ``venv`` in ``where`` (a failure stops the
    benchmark)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(venv / "bin" / "tfa-sim"), *args, "--out", str(where / "run")], cwd=where, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", type=Path, help="the old tree's venv")
    p.add_argument("new", type=Path, help="the new tree's venv")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for name, command in COMMANDS.items():
                for label, venv in (("old", args.old), ("new", args.new)):
                    times.setdefault((name, label), []).append(seconds(venv, command, Path(tmp)))
            print(f"round {n + 1}: " + ", ".join(f"{name} {label} {t[-1][0]:.3f} s" for (name, label), t in
                                                 times.items()), flush=True)
    for name in COMMANDS:
        for i, what in enumerate(("wall", "CPU")):
            old, new = (statistics.median(t[i] for t in times[name, label]) for label in ("old", "new"))
            print(f"{name}, {what}: old {old:.3f} s, new {new:.3f} s (medians of {args.rounds}): new/old "
                  f"{new / old:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
