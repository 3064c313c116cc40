"""``tfa-sim sweep-report``: best point per shape, ranking, Pareto fronts, speed-up, plots.

Nothing is simulated here: the speed-up of a shape's best point is measured
against its reference (the kernel defaults for that shape), which the sweep
ran with the other points, either as one of its own points or as a row of
``references.jsonl``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.plots import draw
from tfa_sim.explore.sweep.points import reference_config, shape_label, shape_of
from tfa_sim.explore.sweep.results import META, REFERENCES, RESULTS, STATUSES, read_meta, read_results, write_atomic
from tfa_sim.explore.sweep.schema import filled
from tfa_sim.explore.sweep.spec import METRICS
from tfa_sim.spec.errors import InputError


def pareto(rows: list[dict[str, Any]], metric: str, other: str) -> list[dict[str, Any]]:
    """Points no other point beats on both the metric and ``other`` (bytes)."""
    sign = 1 if METRICS[metric] is min else -1
    ordered = sorted(rows, key=lambda r: (r[other], sign * r[metric]))
    front, best = [], None
    for r in ordered:
        if best is None or sign * r[metric] < best:
            front.append(r)
            best = sign * r[metric]
    return front


def space_order(meta: dict[str, Any]) -> Callable[[dict[str, Any]], tuple]:
    """A row's place in the sweep's own order (each axis's values as the file lists them, the first axis first):
    rows read in the order the workers finished are put back in it, so that rows of equal figures rank the same
    on every run, the first listed first."""
    axes = (meta.get("definition") or {}).get("axes") or []
    places = [(axis, {json.dumps(v, default=str): i for i, v in enumerate(values)}) for axis, values in axes]

    def place(row: dict[str, Any]) -> tuple:
        given = row.get("overrides") or {}
        return (*(where.get(json.dumps(given.get(axis), default=str), len(where)) for axis, where in places),
                json.dumps(given, sort_keys=True, default=str), row["key"])
    return place


def references(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Shape → the row of its reference point, among all rows (points and references) not excluded."""
    out = {}
    for r in rows:
        full = filled(r.get("config"))
        if r["status"] != "excluded" and full is not None and full == reference_config(full):
            out[shape_of(full)] = r
    return out


def _reference_metric(ref: dict[str, Any] | None, metric: str) -> float | str:
    if ref is None:
        return "no reference point recorded (a sweep directory of an older tfa-sim)"
    if ref["status"] != "ok":
        return f"defaults {ref['status']}: {ref.get('message', '')}"
    return ref[metric]


def interval(row: dict[str, Any], metric: str) -> tuple[float, float] | None:
    """The 90 % interval of ``row``'s metric (tfa_sim.sim.prediction), or None for rows of an older tfa-sim: the
    launch period's or the host-synchronised time's for them, else the kernel time's relative bounds applied to
    the metric (inverted for throughputs)."""
    figure = metric if metric in ("launch_period_us", "host_sync_us") else "time_us"
    key, base = figure.replace("_us", "_interval_us"), row.get(figure)
    if key not in row or not base:
        return None
    lo, hi = (bound / base for bound in row[key])
    value = row[metric]
    return (value * lo, value * hi) if METRICS[metric] is min else (value / hi, value / lo if lo else math.inf)


def _shape_summary(shape: tuple, rows: list[dict[str, Any]], metric: str,
                   ref: dict[str, Any] | None) -> dict[str, Any]:
    better = METRICS[metric]
    ranked = sorted(rows, key=lambda r: r[metric], reverse=better is max)
    best, ref_value = ranked[0], _reference_metric(ref, metric)
    speedup = None
    if not isinstance(ref_value, str) and ref_value > 0 and best[metric] > 0:
        speedup = ref_value / best[metric] if better is min else best[metric] / ref_value
    span = interval(best, metric)
    within = [r["key"] for r in ranked if span is not None and span[0] <= r[metric] <= span[1]]
    return {"shape": shape_label(shape), "best": best, "best_interval": span, "within_best_interval": within,
            "default_metric": ref_value, "speedup": speedup, "ranked": ranked[:10],
            "pareto_ub": pareto(rows, metric, "ub_bytes"), "pareto_l1": pareto(rows, metric, "l1_bytes")}


def sweep_report(out_dir: str | Path, plots: bool = True) -> dict[str, Any]:
    """The report of a sweep directory (also written to ``report.json``); plots unless ``plots`` is false."""
    out = Path(out_dir)
    meta = read_meta(out)
    metric = meta["metric"]
    rows = sorted(read_results(out / RESULTS), key=space_order(meta))
    ok = [r for r in rows if r["status"] == "ok"]
    status = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    status = {s: n for s, n in status.items() if n or s in STATUSES[:4]}
    refs = references(read_results(out / REFERENCES) + rows)
    missing = next(((r["key"], a) for r in ok for a in meta["axes"] if a not in r["overrides"]), None)
    if missing:
        raise InputError(f"{out / RESULTS}: point {missing[0]} has no value for axis {missing[1]} of {out / META}; "
                         f"these files are not from one sweep: rerun it into a new --out")
    shapes: dict[tuple, list] = {}
    for r in ok:
        full = filled(r["config"])
        assert full is not None  # read_results refuses ok rows without a full config
        shapes.setdefault(shape_of(full), []).append(r)
    per_shape = [_shape_summary(shape, rs, metric, refs.get(shape)) for shape, rs in sorted(shapes.items(),
                                                                                           key=lambda kv: repr(kv[0]))]
    report = {"metric": metric, "points": len(rows), "status": status, "shapes": per_shape,
              "plots": draw(out, rows, meta["axes"], metric) if plots and ok else []}
    write_atomic(out / "report.json", json.dumps(report, indent=2, default=str))
    return report


def format_sweep_report(report: dict[str, Any]) -> str:
    """The report as text: per shape the best point, speed-up, top ten and the UB Pareto front."""
    m = report["metric"]
    lines = [f"sweep report: {report['points']} points ({', '.join(f'{k} {v}' for k, v in report['status'].items())})"
             f"; metric {m} ({'lower' if METRICS[m] is min else 'higher'} is better)"]
    for s in report["shapes"]:
        best, span, within = s["best"], s.get("best_interval"), set(s.get("within_best_interval", ()))
        sp = f"{s['speedup']:.2f}× vs the kernel defaults ({s['default_metric']:.4g})" if s["speedup"] else \
            f"no default to compare ({s['default_metric']})"
        lines.append(f"{s['shape']}: best {m} {best[m]:.4g} with {best['overrides']} — {sp}")
        if span:
            lines.append(f"  best's 90 % interval {span[0]:.4g}–{span[1]:.4g}: {len(within)} point(s) inside it "
                         f"(marked *), which the model cannot tell from the best")
        lines.append(f"  {'rank':>4s} {m:>12s} {'90 % interval':>19s} {'bound':>10s} {'UB B':>7s} {'L1 B':>7s}  point")
        for i, r in enumerate(s["ranked"], 1):
            iv = interval(r, m)
            shown = f"{iv[0]:.4g}–{iv[1]:.4g}" if iv else "-"
            mark = "*" if r["key"] in within else " "
            lines.append(f"  {i:4d}{mark}{r[m]:12.4g} {shown:>19s} {r['bound_pipe']:>10s} {r['ub_bytes']:7d} "
                         f"{r['l1_bytes']:7d}  {r['overrides']}")
        front = ", ".join(f"{r[m]:.4g}@{r['ub_bytes']}B" for r in s["pareto_ub"])
        lines.append(f"  Pareto front {m} vs UB bytes: {front}")
    for p in report["plots"]:
        lines.append(f"plot: {p['file']}" if p["file"] else f"plot skipped: {p['skipped']}")
    return "\n".join(lines)
