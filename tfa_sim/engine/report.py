"""Timing figures of one simulated run (docs/kernel.md, "Reported numbers") for summary.json and the console."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from tfa_sim.engine.chip import SimResult
from tfa_sim.spec.config import Config
from tfa_sim.spec.units import pipe_kind

#: Cores of the chip the normalised TFLOPS refer to (docs/kernel.md, "Reported numbers").
NORMALISE_CORES = 24


def mops(config: Config) -> float:
    """S0·S1·HEAD·4/1e6 per (batch, head): two matmuls, two flops per MAC."""
    c = config.case
    return c.s0 * c.s1 * c.head * 4 / 1e6 * c.batch * c.heads


def timing_summary(result: SimResult, config: Config) -> dict[str, Any]:
    """The stable keys: total_cycles, time_us, tflops, normalized_tflops, bound_pipe, pipes, stalls."""
    total = result.total_cycles
    pipes: dict[str, dict[str, float]] = defaultdict(dict)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for name, busy in sorted(result.stats.busy.items()):
        core, within = name.split(".", 1)  # core3, veccore1.V
        frac = busy / total if total else 0.0
        pipes[core][within] = round(frac, 6)
        by_kind[pipe_kind(name)].append(frac)
    mean_busy = {k: sum(v) / len(v) for k, v in by_kind.items()}
    bound = max(mean_busy, key=lambda kind: mean_busy[kind])
    tflops = mops(config) / result.time_us if result.time_us else 0.0
    return {
        "total_cycles": round(total, 3),
        "time_us": round(result.time_us, 4),
        "clock_mhz": result.clock_mhz,
        "mops": mops(config),
        "tflops": round(tflops, 4),
        "normalized_tflops": round(tflops * NORMALISE_CORES / result.cores_used, 4),
        "cores_used": result.cores_used,
        "blocks": result.blocks,
        "waves": result.waves,
        "bound_pipe": bound,
        "pipe_busy_mean": {k: round(v, 6) for k, v in sorted(mean_busy.items())},
        "pipes": dict(pipes),
        "stalls": {stage: {cause: round(c, 3) for cause, c in causes.items()}
                   for stage, causes in result.stats.stalls.items()},
        "gm_bytes": result.gm_bytes,
        "hbm_bytes": result.hbm_bytes,
        "sync": sync_load(result, mean_busy[bound]),
        "work": result.work,
        "s1_split_asked": config.schedule.s1_split,
        "folded": result.folded,
        "balance": balance(result),
        "launches": [{"name": x.name, "first_block": x.first_block, "blocks": x.blocks, "cores": x.cores,
                      "waves": x.waves, "start_cycle": round(x.start, 3),
                      "end_cycle": round(x.end, 3)} for x in result.launches],
    }


def balance(result: SimResult) -> dict[str, Any]:
    """How evenly the first launch's blocks kept its cores busy: per-core busy cycles (dispatch and blocks),
    imbalance = max/mean busy, the idle tail (first core out of work → launch end) and the idle share."""
    busy, ends = result.core_busy, result.core_end
    if not busy:
        return {}
    launch = result.launches[0]
    span = launch.end - launch.start
    mean = sum(busy) / len(busy)
    return {"core_busy_cycles": [round(b, 3) for b in busy],
            "imbalance": round(max(busy) / mean, 4) if mean else 1.0,
            "idle_tail_cycles": round(launch.end - min(ends), 3),
            "idle_fraction": round(1 - sum(busy) / (len(busy) * span), 4) if span else 0.0}


def format_timing(t: dict[str, Any]) -> list[str]:
    busy = "  ".join(f"{k} {v:.0%}" for k, v in t["pipe_busy_mean"].items())
    stalls = "; ".join(f"{stage}: " + ", ".join(f"{c} {v:.0f}" for c, v in causes.items() if v)
                       for stage, causes in t["stalls"].items() if any(causes.values()))
    return [
        f"  time: {t['total_cycles']:.0f} cycles = {t['time_us']:.2f} µs at {t['clock_mhz']:.0f} MHz on "
        f"{t['cores_used']} cores ({t['blocks']} blocks, {t['waves']} waves)",
        f"  {t['tflops']:.2f} TFLOPS ({t['normalized_tflops']:.2f} normalised to {NORMALISE_CORES} cores); "
        f"bound pipe: {t['bound_pipe']}",
        f"  busy (mean over cores): {busy}",
        f"  stall cycles by stage (sum over pipes): {stalls or 'none'}",
        *_format_sync(t),
        *_format_balance(t),
    ]


def sync_load(result: SimResult, bound_busy: float) -> dict[str, Any]:
    """The chip's cross-core sync unit (buffers/ffts.py): messages, its busy share of the kernel, the mean wait of
    a message for it, and ``bound``: busier than the busiest pipe kind's mean over cores (the launch waits for
    the unit)."""
    total = result.total_cycles
    busy = result.sync_busy / total if total else 0.0
    return {"messages": result.sync_messages, "unit_busy": round(busy, 4),
            "mean_queue_cycles": round(result.sync_queued / result.sync_messages, 3) if result.sync_messages else 0.0,
            "bound": busy > bound_busy}


def _format_sync(t: dict[str, Any]) -> list[str]:
    """The cross-core sync unit's load, when the run sent messages through it."""
    s = t.get("sync") or {}
    if not s.get("messages"):
        return []
    bound = ": busier than any pipe (mean over cores), it bounds the launch" if s.get("bound") else ""
    return [f"  cross-core sync: {s['messages']} flag messages, the sync unit busy {s['unit_busy']:.0%} of the "
            f"kernel{bound}, a message waiting {s['mean_queue_cycles']:.0f} cycles for it on average"]


def _format_balance(t: dict[str, Any]) -> list[str]:
    lines = []
    b, w, folded = t.get("balance"), t.get("work", {}), t.get("folded")
    if isinstance(folded, list):
        lines.append("  folded: time, bytes, busy and stall cycles estimated from " + "; ".join(
            f"{f['launch']} {len(f['samples'])} samples (blocks, tiles) {f['samples']}" for f in folded)
            + " (tfa_sim.sim.fold; no per-core balance)")
    elif folded:
        lines.append(f"  {folded}")
    if b:
        lines.append(f"  cores: imbalance {b['imbalance']:.3f} (max/mean busy), idle tail {b['idle_tail_cycles']:.0f} "
                     f"cycles, idle {b['idle_fraction']:.1%} of core-time")
    if w.get("tiles_skipped"):
        lines.append(f"  mask: {w['tiles_skipped']} of {w['tiles_skipped'] + w['tiles_issued']} logical tiles skipped "
                     f"(not loaded, not computed), {w['sub_tiles_skipped']} cube sub-tiles of issued tiles skipped")
    if w.get("s1_split", 1) > 1:
        lines.append(f"  split-S1: {w['s1_split']} chunks per row block (schedule.s1_split = "
                     f"{t.get('s1_split_asked', w['s1_split'])}; at most one chunk per logical tile)")
    if len(t.get("launches", ())) > 1:
        lines.append("  launches: " + ", ".join(f"{x['name']} {x['blocks']} blocks on {x['cores']} cores "
                                                 f"{x['start_cycle']:.0f}–{x['end_cycle']:.0f}" for x in t["launches"]))
    return lines
