"""The native backend's lead (issue 34): whole-run numerics of numpy over native, S0 = 512, S1 = 8192 on 910b2.

Run: ``python benchmarks/bench_native_lead.py [--rounds N] [--python PY ...]``.  Whole-run numerics is the wall
time of a run minus the same run without numerics (``numerics.enabled = false``), event log off, in memory
(``tfa_sim.run(..., event_log=False)``, i.e. ``runner.compute``): in one warm process this is far less noisy than
timing ``tfa-sim run`` commands, whose start-up swings by more than native's whole cost.  Each tree is a worker
process (``PY``: that tree's venv python; default this one), warmed by one run of each kind; every round asks
each worker in turn (the order rotated by one a round) for one native, one numpy and one timing-only run, so
the trees alternate.  Printed per
tree: the medians, the two numerics costs and their ratio, and native's cost over the first tree's; the same
for CPU time (the run's process and its goldens' child, user + system), which other jobs on the machine
disturb far less than wall time.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CASE = "case_float_H_128_S0_512_S1_8192"
#: the runs of one round, in order: (section, key, value) settings of each
KINDS = {"native": [("numerics", "backend", "native")], "numpy": [("numerics", "backend", "numpy")],
         "none": [("numerics", "enabled", False)]}


def cpu_seconds() -> float:
    """User + system time of this process and of its reaped children (the goldens' forked child)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_run(kind: str) -> tuple[float, float]:
    """Wall and CPU time of one in-memory run of ``kind`` (no event log) in this process's tfa_sim, after
    collecting the previous run's garbage (its cycles would otherwise be walked during this one, as no fresh
    command's are)."""
    try:
        from tfa_sim.api.runner import compute
        from tfa_sim.spec.load import load_config
    except ImportError:  # the layout before issue 28 (7189abb)
        from tfa_sim.config import load_config  # type: ignore[no-redef]
        from tfa_sim.runner import compute  # type: ignore[no-redef]
    config = load_config(None, CASE, (), [("hardware", "preset", "910b2"), *KINDS[kind]])
    gc.collect()
    start, cpu = time.perf_counter(), cpu_seconds()
    compute(config, event_log=False)
    return time.perf_counter() - start, cpu_seconds() - cpu


def worker() -> None:
    """Answer each line on stdin with one round's times as a JSON line, after one warm-up round.  BLAS starts
    with one thread, as the ``tfa-sim`` command starts it (then ``numerics.blas_threads`` costs nothing)."""
    try:
        from tfa_sim.numerics.blas import start_single_threaded
    except ImportError:  # the layout before issue 28 (7189abb)
        from tfa_sim.blas import start_single_threaded  # type: ignore[no-redef]
    start_single_threaded()  # before numpy is imported
    for kind in KINDS:
        timed_run(kind)
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps({kind: timed_run(kind) for kind in KINDS}), flush=True)


def start_worker(python: str) -> subprocess.Popen[str]:
    """``python`` running this script as a worker."""
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", f"{python}: worker failed"
    return proc


def ask(proc: subprocess.Popen[str]) -> dict[str, list[float]]:
    """One round from a worker: {kind: [wall s, CPU s]}."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def one_round(procs: list[subprocess.Popen[str]], r: int) -> list[dict[str, list[float]]]:
    """Round ``r``: each worker's answer, asked in an order rotated by one tree a round (no tree always comes
    right after another's numpy run)."""
    answers: dict[int, dict[str, list[float]]] = {}
    for i in range(len(procs)):
        k = (i + r) % len(procs)
        answers[k] = ask(procs[k])
    return [answers[k] for k in range(len(procs))]


def report(pythons: list[str], rounds: list[list[dict[str, list[float]]]]) -> None:
    """Per tree and measure (wall, CPU): medians, the numerics costs, numpy over native, native over the first
    tree's native."""
    print(f"{CASE} on 910b2, no event log, {len(rounds)} alternated rounds, medians:")
    first: list[float] = []
    for i, python in enumerate(pythons):
        print(f"  {python}")
        for j, measure in enumerate(("wall", "CPU")):
            m = {kind: statistics.median(r[i][kind][j] for r in rounds) for kind in KINDS}
            native, numpy = m["native"] - m["none"], m["numpy"] - m["none"]
            first += [native] if i == 0 else []
            print(f"    {measure:4s} native {m['native']:.4f} s, numpy {m['numpy']:.4f} s, none {m['none']:.4f} s; "
                  f"numerics native {native:.4f} s, numpy {numpy:.4f} s: numpy/native {numpy / native:.2f}x; "
                  f"native / first tree's {native / first[j]:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--python", action="append", metavar="PY", help="a tree's venv python (repeat; default: this one)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker()
        return
    pythons = args.python or [sys.executable]
    procs = [start_worker(py) for py in pythons]
    try:
        rounds = [one_round(procs, r) for r in range(args.rounds)]
    finally:
        for proc in procs:
            proc.kill()
    report(pythons, rounds)


if __name__ == "__main__":
    main()
