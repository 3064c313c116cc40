"""What a board would measure for a run, with a 90 % interval and the reasons it is as wide as it is.

A board measures one of three things (docs/calibration.md, "What a measurement includes"):

* ``time_us`` — the kernel time an in-kernel counter (or msprof's Task Duration) sees: from the first block's
  start to the last block's end (the simulated makespan);
* ``launch_period_us`` — the mean period of back-to-back launches on one stream: the kernel time plus the
  launch gap of the host class driving the stream (``launch.gap_<host>``, fitted);
* ``host_sync_us`` — the host clock around one launch and a device synchronise: the kernel time plus the
  host's launch-and-synchronise overhead (``launch.host_sync``, fitted).

The interval's half-width starts from the preset's cross-validated error (``calibration.half_width``: 90 % of
the relative errors of points left out of the fit, across the builds and scales measured) and is widened by a
fixed factor for each way the run leaves what the fit saw — a board without points, each design choice's value
that no measured launch had (a plugin's value, a new mechanism, a value of another build's never measured),
more blocks or waves, another S1, a knob value or kernel variant never measured — each named in
``interval_reasons``.  The factors are judgment, not fitted: they say "further from the data" in a way a reader
can check (:data:`PER_DOUBLING`, :data:`PER_KNOB`, :data:`UNMEASURED_BOARD`).  The half-width h is a relative
error of the measured quantity: each figure's interval is [figure / (1 + h), figure · (1 + h)] (a factor either
way, so a wide one never reaches zero).
"""
from __future__ import annotations

import math
from typing import Any

from tfa_sim.spec.config import Config
from tfa_sim.spec.hardware import Hardware
from tfa_sim.stages.plan import KernelPlan

#: Half-width factor for a board whose values were fitted on another board.
UNMEASURED_BOARD = 2.0
#: Half-width added per doubling of blocks or S1 beyond the measured range (relative to the half-width).
PER_DOUBLING = 0.5
#: Half-width factor per schedule or tiling value, per design choice's value, and per kernel variant, that no
#: measured point had.
PER_KNOB = 1.25
#: A prediction is never quoted tighter than this (the boards' own run-to-run spread).
FLOOR = 0.03


def _knob_reasons(config: Config, hw: Hardware) -> list[str]:
    """The knob values and kernel variants of ``config`` that no measured point had."""
    c, t, s, cal = config.case, config.tiling, config.schedule, hw.calibration
    out = [f"{name} = {value} never measured (measured: {', '.join(map(str, seen))})"
           for name, value, seen in (("case.head", c.head, cal.head), ("tiling.cube_s0", t.cube_s0, cal.cube_s0),
                                     ("tiling.cube_s1", t.cube_s1, cal.cube_s1),
                                     ("tiling.tile_s1", t.tile_s1, cal.tile_s1),
                                     ("schedule.qk_preload", s.qk_preload, cal.qk_preload),
                                     ("schedule.cv_fifo_size", s.cv_fifo_size, cal.cv_fifo_size),
                                     ("schedule.cv_fifo_cons_sync_period", s.cv_fifo_cons_sync_period,
                                      cal.cv_fifo_cons_sync_period),
                                     ("schedule.s1_split", s.s1_split, cal.s1_split),
                                     ("schedule.local_slot_num", s.local_slot_num, cal.local_slot_num))
           if value not in seen]
    variants = {"causal mask": c.causal, "sliding window": c.window is not None, "mask file": bool(c.mask),
                "logit softcap": c.softcap > 0, "batch × heads > 1": c.batch * c.heads > 1,
                "bf16 inputs": c.dtype != "fp16",
                "GQA packing": s.gqa_pack, f"block order {s.block_order}": s.block_order != "row"}
    return out + [f"{name}: no measured launch had it" for name, used in variants.items() if used]


def _choice_reasons(plan: KernelPlan) -> list[str]:
    """The design choices whose value no measured launch had (the preset's ``calibration.choices``)."""
    measured = plan.hw.calibration.choices
    out = []
    for key, value in plan.values.items():
        if f"{key}={value.word}" not in measured:
            seen = [word.split("=", 1)[1] for word in measured if word.startswith(f"{key}=")]
            out.append(f"kernel.{key} = {value.word} never measured (measured: {', '.join(seen) or 'none'})")
    return out


def widening(plan: KernelPlan) -> tuple[float, list[str]]:
    """The factor on the preset's half-width for this run, and why (empty: inside the calibrated domain)."""
    config, hw, dispatch = plan.config, plan.hw, plan.geometry.main
    blocks, waves = dispatch.units, dispatch.waves
    cal, reasons, factor = hw.calibration, [], 1.0
    if not cal.measured:
        factor *= UNMEASURED_BOARD
        reasons.append(f"{hw.name} has no measured points: its fitted values are another board's")
    choices = _choice_reasons(plan)
    factor *= PER_KNOB ** len(choices)
    reasons += choices
    if blocks > cal.blocks_max:
        factor *= 1 + PER_DOUBLING * math.log2(blocks / cal.blocks_max)
        reasons.append(f"{blocks} blocks, more than the {cal.blocks_max} measured")
    if waves > cal.waves_max:
        factor *= 1 + PER_DOUBLING * math.log2(waves / cal.waves_max)
        reasons.append(f"{waves} blocks per core, more than the {cal.waves_max} measured")
    s1, low, high = config.case.s1, min(cal.s1), max(cal.s1)
    if not low <= s1 <= high:
        factor *= 1 + PER_DOUBLING * abs(math.log2(s1 / (low if s1 < low else high)))
        reasons.append(f"S1 = {s1} outside the measured {low}…{high}")
    knobs = _knob_reasons(config, hw)
    factor *= PER_KNOB ** len(knobs)
    return factor, reasons + knobs


def _interval(figure: float, width: float, spread: float = 0.0) -> list[float]:
    """[figure / (1 + width) − spread, figure · (1 + width) + spread], rounded."""
    return [round(max(0.0, figure / (1 + width) - spread), 4), round(figure * (1 + width) + spread, 4)]


def prediction(plan: KernelPlan, total_cycles: float) -> dict[str, Any]:
    """The summary keys of a run's measured quantities: ``time_us`` is the caller's; this adds
    ``launch_period_us`` and ``host_sync_us``, the three 90 % intervals, the half-width, the host and the
    reasons for any widening."""
    hw = plan.hw
    clock, cal, host = hw.clock_mhz, hw.calibration, plan.config.hardware.host
    time_us = total_cycles / clock
    factor, reasons = widening(plan)
    period = time_us + hw.launch.gap(host) / clock
    synced = time_us + hw.launch.host_sync / clock
    width = max(FLOOR, cal.half_width * factor)
    spread = 0.0
    if not host:  # either host class: the interval holds both gaps
        gaps = [hw.launch.gap_aarch64 / clock, hw.launch.gap_x86_64 / clock]
        spread = (max(gaps) - min(gaps)) / 2
        reasons.append("hardware.host not given: the launch period holds either host's launch gap")
    return {"launch_period_us": round(period, 4), "host_sync_us": round(synced, 4), "host": host or "any",
            "time_interval_us": _interval(time_us, width),
            "launch_period_interval_us": _interval(period, width, spread),
            "host_sync_interval_us": _interval(synced, width),
            "interval_half_width": round(width, 4), "interval_reasons": reasons,
            "calibrated_builds": list(cal.builds)}


def format_prediction(s: dict[str, Any]) -> list[str]:
    """The console lines of :func:`prediction`'s keys."""
    lo, hi = s["time_interval_us"]
    plo, phi = s["launch_period_interval_us"]
    slo, shi = s["host_sync_interval_us"]
    lines = [f"  measured as: kernel time {s['time_us']:.2f} µs (90 % interval {lo:.2f}–{hi:.2f}); launch period "
             f"{s['launch_period_us']:.2f} µs ({plo:.2f}–{phi:.2f}) back to back on a stream, host {s['host']}; "
             f"host-synchronised {s['host_sync_us']:.2f} µs ({slo:.2f}–{shi:.2f})"]
    if s["interval_reasons"]:
        lines.append(f"  interval ±{s['interval_half_width']:.0%}, widened: " + "; ".join(s["interval_reasons"]))
    return lines
