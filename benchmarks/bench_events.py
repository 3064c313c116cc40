"""Event log cost, old tree against new: wall time and peak RSS of ``tfa-sim run`` with and without the log.

Run: ``python benchmarks/bench_events.py OLD_TREE NEW_TREE [S] [--runs N]`` (S0 = S1 = S, default 16384; 910b2,
timing only).  Each measurement is a fresh ``python -m tfa_sim run`` under ``/usr/bin/time -v`` with
``PYTHONPATH`` set to the tree; old and new alternate so that load on a shared machine hits both alike.
Prints every run and the medians, and the new/old ratios.
"""
from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def measure(tree: str, size: int, event_log: bool, out: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one run."""
    argv = ["/usr/bin/time", "-v", "env", f"PYTHONPATH={tree}", sys.executable, "-m", "tfa_sim", "run", "--hw",
            "910b2", "--set", f"case.s0={size}", "--set", f"case.s1={size}", "--no-numerics", "--out", str(out)]
    if not event_log:
        argv.append("--no-event-log")
    r = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tree)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", r.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    assert wall and rss, r.stderr
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall[1].split(":"))))
    return seconds, int(rss[1]) / 1024


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    if "--runs" in sys.argv:
        args.remove(str(runs))
    old, new = args[0], args[1]
    size = int(args[2]) if len(args) > 2 else 16384
    results: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            for event_log in (False, True):
                for name, tree in (("old", old), ("new", new)):
                    wall, rss = measure(tree, size, event_log, Path(tmp) / f"{name}{i}{event_log}")
                    results.setdefault((name, event_log), []).append((wall, rss))
                    print(f"run {i} {name} event_log={event_log}: {wall:.1f} s, {rss:.0f} MiB", flush=True)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v)) for k, v in results.items()}
    print(f"\nmedians of {runs}, 910b2 S0=S1={size}, timing only:")
    for (name, event_log), (wall, rss) in sorted(med.items()):
        print(f"  {name} event_log={event_log}: {wall:.1f} s, {rss:.0f} MiB")
    for name in ("old", "new"):
        w1, r1 = med[(name, True)]
        w0, r0 = med[(name, False)]
        print(f"  {name}: with/without log {w1 / w0:.2f}× wall, {r1 / r0:.2f}× RSS")
    for event_log in (False, True):
        (wn, rn), (wo, ro) = med[("new", event_log)], med[("old", event_log)]
        print(f"  event_log={event_log}: new/old {wn / wo:.2f}× wall, {rn / ro:.2f}× RSS")


if __name__ == "__main__":
    main()
