"""``tfa-sim calibrate --check``: the presets as they are against measured points, no fit.

For each point, the figure its timing measures (the kernel time, the launch period or the host-synchronised
time, :func:`tfa_sim.explore.points.measured_as`) with the 90 % interval ``tfa-sim run`` would print for its
config (:func:`tfa_sim.sim.prediction.prediction`), then over all points the errors, how many measured times
the intervals cover and their median half-width: how far a board's table may trust a preset before refitting.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfa_sim.explore.calibrate import LINEAR, Simulator, builds, by_build
from tfa_sim.explore.points import Point, base_preset, figure, measured_as
from tfa_sim.sim.prediction import prediction
from tfa_sim.stages.plan import kernel_plan

#: The launch values a point's figure adds to its kernel time (tfa_sim.explore.points.figure).
LAUNCH_KEYS = tuple(par.key for par in LINEAR if par.key.startswith("launch."))
#: The summary key of each timing's interval (tfa_sim.sim.prediction).
INTERVAL_OF = {"kernel": "time_interval_us", "task": "time_interval_us", "stream": "launch_period_interval_us",
               "sync": "host_sync_interval_us"}


@dataclass(frozen=True)
class Checked:
    """One point beside the preset's prediction of what it measured."""

    point: Point
    how: str  # the timing compared: the point's, or for an unknown one the nearest its evidence allows
    predicted: float  # µs
    low: float  # the 90 % interval, µs
    high: float
    half_width: float  # the interval's relative half-width (tfa-sim run's interval_half_width)

    @property
    def error(self) -> float:
        return self.predicted / self.point.time_us - 1

    @property
    def covered(self) -> bool:
        return self.low <= self.point.time_us <= self.high


def check_points(points: Sequence[Point], sim: Simulator | None = None) -> list[Checked]:
    """Each point beside its preset's prediction (kernel times as the fit computes them: long launches folded)."""
    sim = sim or Simulator()
    sim.prime(points, [{}])
    out = []
    for p in points:
        plan = kernel_plan(p.config(host=p.host), base_preset(p.preset))
        hw = plan.hw
        kernel_us = sim.kernel(p, {})[0]
        values = {key: hw.value(key) for key in LAUNCH_KEYS}
        how = measured_as(p, kernel_us, values)
        said = prediction(plan, kernel_us * hw.clock_mhz)
        low, high = said[INTERVAL_OF[how]]
        out.append(Checked(p, how, figure(p, how, kernel_us, values), low, high, said["interval_half_width"]))
    return out


def check_record(rows: Sequence[Checked]) -> dict[str, Any]:
    """The check as JSON: every point, and the summary :func:`format_check` prints."""
    points = [r.point for r in rows]
    errors = np.array([r.error for r in rows])
    return {"points": [{"row": i, "label": r.point.label, "source": r.point.source, "timing": r.how,
                        "measured_us": r.point.time_us, "predicted_us": round(r.predicted, 4),
                        "error": round(r.error, 5), "interval_us": [r.low, r.high],
                        "half_width": r.half_width, "covered": r.covered} for i, r in enumerate(rows, start=1)],
            "mape": float(np.mean(np.abs(errors))), "max_abs_error": float(np.max(np.abs(errors))),
            "covered": sum(r.covered for r in rows), "missed_rows": [i for i, r in enumerate(rows, 1) if not r.covered],
            "median_half_width": statistics.median(r.half_width for r in rows),
            "by_build": by_build(points, errors), "builds": builds(points)}


def format_check(rows: Sequence[Checked]) -> str:
    """The check as text: a line per point, then the errors, the coverage and the half-width."""
    record = check_record(rows)
    lines = ["the presets as they are (no fit), each point beside the figure its timing measures:",
             "  row preset build  timing  host     blocks     s1  period  measured µs  predicted µs   error"
             "  90 % interval µs        covered"]
    for i, r in enumerate(rows, start=1):
        p = r.point
        lines.append(f"  {i:3d} {p.preset:6s} {p.build:6s} {r.how:7s} {p.host or '-':8s} {p.row_blocks:6d} {p.s1:6d} "
                     f"{p.sync_period:7d} {p.time_us:12.3f} {r.predicted:13.3f} {r.error:+7.1%}  "
                     f"{r.low:10.2f}–{r.high:<10.2f} {'yes' if r.covered else 'NO'}")
    missed = ", ".join(map(str, record["missed_rows"])) or "none"
    lines += [f"{len(rows)} points: MAPE {record['mape']:.1%}, max |error| {record['max_abs_error']:.1%}; the 90 % "
              f"interval covers {record['covered']} of {len(rows)} (missed rows: {missed}), median half-width "
              f"{record['median_half_width']:.1%}"]
    lines += [f"  {b}: {r['points']} points, MAPE {r['mape']:.1%}, max |error| {r['max_abs_error']:.1%}"
              for b, r in record["by_build"].items()]
    return "\n".join(lines)
