"""How far each resource is from its limit: ``summary.json``'s ``roofline`` table, and the run report's line.

For every resource of :func:`tfa_sim.spec.limits.chip_limits` the table gives the work the run did on it
(``work``, in ``unit``: MACs, 32-bit element operations, bytes), the achieved rate (``achieved_per_cycle``: work ÷
the kernel's cycles), the limit for the units the run used (``limit_per_cycle``: the peak per unit × the AICs or
AIVs that ran, or the chip-wide figure) and ``fraction_of_limit`` = achieved ÷ limit; the same per stage.  A pipe
of several peaks (``vec.V``: its intrinsic classes; ``cube.MTE1``: its two paths) is a row of its own too: its
fraction is the sum of its parts' (they share the pipe's time), its limit the peak of its mix of work (work ÷
the cycles it needs at its parts' peaks).  Each pipe's busy share (``busy_fraction``) bounds its fraction: an
instruction costs at least its work at the peak (docs/guide/roofline.md).

The work comes from the event log: ``nbytes`` and ``flops`` of each instruction and the work labels of vector
op sequences and TEXTRACTs (:mod:`tfa_sim.spec.work`).  Without it (``--no-event-log``, ``--fold``) only the L2's
and HBM's figures are known (the run's GM and HBM bytes); each pipe keeps its busy share, and ``missing`` says
why the rest is absent.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from tfa_sim.rundir.events import DISPATCH, EventLog
from tfa_sim.spec.hardware import Hardware
from tfa_sim.spec.limits import MOVE_PIPES, Limit, chip_limits
from tfa_sim.spec.units import parse_unit, pipe_kind
from tfa_sim.spec.work import parse

#: The pipes whose work splits over parts of different peaks, and the prefix of their parts' names.
MIXED = ("cube.MTE1", "vec.V")
#: The rows the report ranks: every pipe and the chip's GM (the parts of a mixed pipe are in their pipe's row).
RANKED = ("cube.MTE2", "cube.MTE1", "cube.M", "cube.FIX", "vec.MTE2", "vec.V", "vec.MTE3", "gm.L2", "gm.HBM")
#: How many resources the report names.
NEAREST = 3
#: Why a run without its event log has no per-pipe or per-stage work.
NO_LOG = ("the work per pipe and per stage is counted from the event log, which this run {why}: rerun without "
          "{option} for it; each pipe's busy_fraction bounds its fraction_of_limit")

Work = dict[str, float]


def logged_work(log: EventLog) -> dict[str, Work]:
    """The work per stage and resource of every instruction in ``log`` (module docstring)."""
    ev = log.events.view()
    units, pipes, stages = log.names("units"), log.names("pipes"), log.names("stages")
    if not len(ev["id"]):
        return {}
    kinds = [f"{parse_unit(u).kind}.{p}" for u in units for p in pipes]  # (unit, pipe) code pair → pipe kind
    group = (ev["stage"].astype(np.int64) * len(units) + ev["unit"]) * len(pipes) + ev["pipe"]
    keys, rows = np.unique(group, return_inverse=True)
    nbytes = np.bincount(rows, weights=ev["nbytes"])
    flops = np.bincount(rows, weights=ev["flops"])
    out: dict[str, Work] = defaultdict(lambda: defaultdict(float))
    for at, key in enumerate(keys.tolist()):
        stage, kind = stages[key // (len(units) * len(pipes))], kinds[key % (len(units) * len(pipes))]
        if kind.endswith(DISPATCH):
            continue
        work = out[stage]
        if kind == "cube.M":
            work["cube.M"] += flops[at] / 2
        elif kind in MOVE_PIPES:
            work[kind] += nbytes[at]
            work["gm.L2"] += nbytes[at]
    _add_labels(log, ev, group, stages, kinds, len(units) * len(pipes), out)
    return {stage: dict(work) for stage, work in out.items()}


def _add_labels(log: EventLog, ev: dict[str, np.ndarray], group: np.ndarray, stages: list[str], kinds: list[str],
                pairs: int, out: dict[str, Work]) -> None:
    """The work labels' amounts, by each labelled instruction's stage and pipe kind."""
    work = log.work.view()
    if not len(work["id"]):
        return
    order = np.argsort(ev["id"], kind="stable")
    rows = order[np.searchsorted(ev["id"][order], work["id"])]
    labels = [parse(text) for text in log.names("works")]
    pair = group[rows] * len(labels) + work["label"]
    keys, counts = np.unique(pair, return_counts=True)
    for key, count in zip(keys.tolist(), counts.tolist()):
        g, label = divmod(key, len(labels))
        stage, kind = stages[g // pairs], kinds[g % pairs]
        for name, amount in labels[label].items():
            out[stage][f"{kind}.{name}"] += amount * count


def pipe_units(summary: dict[str, Any]) -> dict[str, int]:
    """How many pipes of each kind the run had (``summary['pipes']``: a fraction per pipe per core)."""
    count: dict[str, int] = defaultdict(int)
    for core, pipes in summary["pipes"].items():
        for within in pipes:
            count[pipe_kind(f"{core}.{within}")] += 1
    return dict(count)


def _row(work: float | None, limit: Limit, units: int, cycles: float) -> dict[str, Any]:
    """One resource's figures over ``cycles`` with ``units`` of it."""
    peak = limit.per_cycle * (1 if limit.scope == "chip" else units)
    achieved = None if work is None or not cycles else work / cycles
    return {"unit": limit.unit, "work": None if work is None else round(work),
            "achieved_per_cycle": None if achieved is None else round(achieved, 6),
            "limit_per_cycle": round(peak, 6),
            "fraction_of_limit": None if achieved is None or not peak else round(achieved / peak, 6)}


def _mixed(pipe: str, parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A mixed pipe's row from its parts': work summed, fractions summed, the mix's peak."""
    mine = [row for name, row in parts.items() if name.startswith(f"{pipe}.")]
    if not mine or any(row["work"] is None for row in mine):
        return {"unit": mine[0]["unit"] if mine else None, "work": None, "achieved_per_cycle": None,
                "limit_per_cycle": None, "fraction_of_limit": None}
    work = sum(row["work"] for row in mine)
    achieved = sum(row["achieved_per_cycle"] for row in mine)
    fraction = sum(row["fraction_of_limit"] or 0.0 for row in mine)
    return {"unit": mine[0]["unit"], "work": work, "achieved_per_cycle": round(achieved, 6),
            "limit_per_cycle": round(achieved / fraction, 6) if fraction else None,
            "fraction_of_limit": round(fraction, 6)}


def _table(work: Work | None, limits: dict[str, Limit], units: dict[str, int], cycles: float) -> dict[str, Any]:
    """Every resource's row (:func:`_row`) and each mixed pipe's (:func:`_mixed`); ``work`` None: unknown."""
    rows = {}
    for name, limit in limits.items():
        n = units.get(limit.pipe or "", 0) if limit.scope != "chip" else 1
        rows[name] = _row(None if work is None else work.get(name, 0.0), limit, n, cycles)
    for pipe in MIXED:
        rows[pipe] = _mixed(pipe, rows)
    return rows


def roofline(summary: dict[str, Any], hw: Hardware, log: EventLog | None) -> dict[str, Any]:
    """The ``roofline`` table of a run (module docstring) from its timing summary, its preset and its event log
    (None: not kept)."""
    cycles, units, limits = summary["total_cycles"], pipe_units(summary), chip_limits(hw)
    stages = logged_work(log) if log is not None else None
    total: Work | None = None
    if stages is not None:
        total = defaultdict(float)
        for work in stages.values():
            for name, amount in work.items():
                total[name] += amount
    resources = _table(total, limits, units, cycles)
    for name, value in (("gm.L2", summary["gm_bytes"]), ("gm.HBM", summary["hbm_bytes"])):
        resources[name] = _row(value, limits[name], 1, cycles)  # the GM model's own count, folded runs included
    for kind, busy in summary["pipe_busy_mean"].items():
        resources[kind]["busy_fraction"] = busy
    out: dict[str, Any] = {
        "cycles": cycles, "clock_mhz": summary["clock_mhz"], "hardware": hw.name,
        "units": {"cube": units.get("cube.M", 0), "vec": units.get("vec.V", 0)},
        "resources": resources,
        "stages": None if stages is None else {stage: _stage_rows(work, limits, units, cycles)
                                                for stage, work in stages.items()},
        "intensity": _intensity(total, summary),
        "nearest": nearest(resources),
        "missing": None if log is not None else _why_missing(summary)}
    return out


def _stage_rows(work: Work, limits: dict[str, Limit], units: dict[str, int], cycles: float) -> dict[str, Any]:
    """A stage's rows: the resources it did work on."""
    rows = _table(work, limits, units, cycles)
    return {name: row for name, row in rows.items() if row["work"]}


def _intensity(total: Work | None, summary: dict[str, Any]) -> dict[str, Any]:
    """Operations per byte: the cube's FLOPs and the vector pipe's element operations per GM (L2) and HBM byte."""
    def per(ops: float | None, nbytes: float) -> float | None:
        return None if ops is None or not nbytes else round(ops / nbytes, 6)

    flops = None if total is None else 2 * total.get("cube.M", 0.0)
    vector = None if total is None else sum(v for k, v in total.items() if k.startswith("vec.V."))
    return {"flop_per_gm_byte": per(flops, summary["gm_bytes"]), "flop_per_hbm_byte": per(flops, summary["hbm_bytes"]),
            "vector_ops_per_gm_byte": per(vector, summary["gm_bytes"])}


def _why_missing(summary: dict[str, Any]) -> str:
    folded = summary.get("folded")
    if isinstance(folded, list):
        return NO_LOG.format(why="was folded from short samples without", option="--fold")
    if folded is not None:  # --fold asked for, the run simulated in full (the reason why), still without the log
        return NO_LOG.format(why="ran in full without (--fold keeps none)", option="--fold")
    return NO_LOG.format(why="ran without (--no-event-log)", option="--no-event-log")


def nearest(resources: dict[str, Any], top: int = NEAREST) -> list[str]:
    """The ``top`` resources of :data:`RANKED` with the largest known fraction of their limit, largest first."""
    known = [(row["fraction_of_limit"], name) for name, row in resources.items()
             if name in RANKED and row.get("fraction_of_limit") is not None and row["work"]]
    return [name for _, name in sorted(known, key=lambda item: (-item[0], item[1]))[:top]]


def format_nearest(summary: dict[str, Any]) -> list[str]:
    """The run report's line: the resources nearest their limits, each with the stages that use it most."""
    table = summary.get("roofline")
    if not table:
        return []
    parts = []
    for name in table["nearest"]:
        row = table["resources"][name]
        stages = sorted(((rows[name]["fraction_of_limit"], stage) for stage, rows in (table["stages"] or {}).items()
                         if name in rows and rows[name]["fraction_of_limit"]), reverse=True)
        where = ", ".join(f"{stage} {share:.0%}" for share, stage in stages[:2] if share >= 0.005)
        parts.append(f"{name} {row['fraction_of_limit']:.0%}" + (f" ({where})" if len(stages) > 1 and where else ""))
    line = "  nearest their limits: " + (", ".join(parts) or "none measured")
    if table["missing"]:
        line += "; per pipe: busy share only (no event log)"
    return [line]
