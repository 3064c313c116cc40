"""The tune screen's probes of the decode example of docs/guide/tuning.md, timed in this interpreter's tree: every
distinct probe of the default space's legal candidates (S0 = 1, S1 = 131072, 32 heads on 8), one after another in
one process, and the seconds the cyclic GC took among them.

Run: ``python benchmarks/bench_screen.py [--candidates N]`` (N: the first N legal candidates' probes; all by
default).  For a side by side, run it with each tree's interpreter in turn (``OLD_VENV/bin/python
benchmarks/bench_screen.py``, then ``NEW_VENV/bin/python …``), alternated, and compare the medians' ratio: the
machine is shared.  The candidates are built before the clock starts; only ``run_probe`` is timed.
"""
from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from tfa_sim.api.library import load_config
from tfa_sim.explore.tune.screen import Screen, probe_key, run_probe
from tfa_sim.explore.tune.space import legal_candidates, load_space

#: The decode example's shape (docs/guide/tuning.md).
DECODE = {"case.s0": 1, "case.s1": 131072, "case.heads": 32, "case.kv_heads": 8}


def probes(candidates: int | None) -> tuple[Screen, list[tuple[Any, Any]]]:
    """The screen and each distinct probe (config, block) of the first ``candidates`` legal candidates."""
    space = load_space(load_config(None, overrides=DECODE), None)
    legal = [c.config for c in legal_candidates(space) if c.status == "legal"][:candidates]
    screen, jobs, seen = Screen(legal[0]), [], set()
    for config in legal:
        for block in screen.layout(config).representative:
            key = probe_key(config, block)
            if key not in seen:
                seen.add(key)
                jobs.append((config, block))
    return screen, jobs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--candidates", type=int, default=None, help="the first N legal candidates (default: all)")
    args = p.parse_args()
    screen, jobs = probes(args.candidates)
    hws = [screen.hw(config) for config, _ in jobs]
    in_gc, began = [0.0], [0.0]

    def clock(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            in_gc[0] += time.perf_counter() - began[0]

    gc.collect()
    gc.callbacks.append(clock)
    started = time.perf_counter()
    for (config, block), hw in zip(jobs, hws):
        run_probe(config, hw, block)
    took = time.perf_counter() - started
    gc.callbacks.remove(clock)
    print(f"{len(jobs)} probes in {took:.3f} s ({1000 * took / len(jobs):.2f} ms each), of which GC {in_gc[0]:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
