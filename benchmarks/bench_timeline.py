"""Gantt rendering speed for a 24-core, 128-tile run (issue 4 target: under 10 s).

Run: ``python benchmarks/bench_timeline.py``.  Simulates 910b2 with S0 = 24·128,
S1 = 128·256 (24 blocks × 128 logical tiles, one wave), then times
``tfa-sim timeline`` rendering to PNG and SVG (lanes per unit by default).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tfa_sim.api.runner import run
from tfa_sim.spec.load import load_config
from tfa_sim.views.timeline import load_view, render


def main() -> None:
    config = load_config(overrides=["case.s0=3072", "case.s1=32768", 'hardware.preset="910b2"',
                                    "numerics.enabled=false"])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run(config, out_dir=tmp)
        print(f"simulated {result.summary['blocks']} blocks × 128 tiles on {result.summary['cores_used']} cores "
              f"with event log and trace in {time.perf_counter() - start:.1f} s")
        for suffix in ("png", "svg"):
            start = time.perf_counter()
            view = load_view(tmp, None, None, None)
            render([view], Path(tmp) / f"t.{suffix}")
            size = (Path(tmp) / f"t.{suffix}").stat().st_size / 1e6
            print(f"timeline .{suffix}: {len(view.bars)} bars in {len(view.lanes)} lanes, "
                  f"{time.perf_counter() - start:.1f} s (reading the event log included), {size:.1f} MB")


if __name__ == "__main__":
    main()
