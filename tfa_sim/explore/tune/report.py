"""What a tune answers: ``tune.json``, ``report.txt`` (the console's text), ``best.toml`` and ``landscape.png``.

The top K simulated candidates are set against the kernel's defaults for the case: the metric with its
90 % interval (:mod:`tfa_sim.sim.prediction`), the launch period, the gain over the defaults, the bound
pipe, and what the best changes from the defaults, in the config and in the stalls (per stage and cause,
summed over the pipes).  When the runner-up lies inside the best's 90 % interval the report says the model
cannot tell them apart instead of claiming a winner, and likewise for the defaults and the gain; per knob, the
best candidate of each value is set against the best's interval the same way (:func:`knob_verdicts`).  The
screen's agreement with the simulations it led to (Kendall τ of estimates against simulated values, the
range of simulated/estimated ratios) is reported with them.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.plots import figure_png, order
from tfa_sim.explore.sweep.report import interval
from tfa_sim.explore.tune.search import Search
from tfa_sim.explore.tune.space import Candidate, Space
from tfa_sim.spec.builds import is_path
from tfa_sim.views.figures import points

#: Stall changes the report lists (the largest first).
STALL_LINES = 6
#: Row keys copied into each simulated candidate's entry of tune.json.
ROW_KEYS = ("time_us", "time_interval_us", "launch_period_us", "launch_period_interval_us", "host_sync_us",
            "host_sync_interval_us", "total_cycles",
            "bound_pipe", "tflops", "pipe_busy_mean")


def changes(full: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """The schedule and tiling keys, the design choices (and ``hardware.cores``) where ``full`` differs from
    ``reference``; not the plugins loaded (what they bring shows as the choices they set)."""
    out = {f"{s}.{k}": v for s in ("tiling", "schedule", "kernel") for k, v in full[s].items()
           if reference[s][k] != v and (s, k) != ("kernel", "plugins")}
    if full["hardware"]["cores"] != reference["hardware"]["cores"]:
        out["hardware.cores"] = full["hardware"]["cores"]
    return out


def candidate_entry(c: Candidate) -> dict[str, Any]:
    """One candidate of tune.json: where it came from, how far it got and what it measured."""
    entry: dict[str, Any] = {"index": c.index, "key": c.key or None, "overrides": c.overrides, "stage": c.stage,
                             "status": c.status, "message": c.message, "estimate": c.estimate}
    if c.row is not None:
        entry.update({k: c.row[k] for k in ROW_KEYS if k in c.row})
    return entry


def agreement(search: Search) -> dict[str, Any]:
    """How well the screen's estimates ranked the candidates it sent to simulation."""
    pairs = [(c.estimate, search.rows[c.key][search.metric]) for c in search.simulated()
             if search.rows[c.key]["status"] == "ok" and c.estimate]
    out: dict[str, Any] = {"simulated": len(pairs)}
    if len(pairs) >= 2:
        from scipy.stats import kendalltau

        tau = kendalltau([e for e, _ in pairs], [v for _, v in pairs]).statistic
        ratios = [v / e for e, v in pairs]
        out.update(kendall_tau=None if math.isnan(tau) else round(float(tau), 4),
                   ratio_min=round(min(ratios), 4), ratio_max=round(max(ratios), 4),
                   median_abs_error=round(sorted(abs(r - 1) for r in ratios)[len(ratios) // 2], 4))
    return out


def stall_changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Per stage and cause the stall cycles of ``before`` and ``after`` (summed over pipes), largest change
    first, unchanged ones left out."""
    keys = {(s, c) for row in (before, after) for s, causes in row.get("stalls", {}).items() for c in causes}
    out = []
    for stage, cause in keys:
        a = before.get("stalls", {}).get(stage, {}).get(cause, 0.0)
        b = after.get("stalls", {}).get(stage, {}).get(cause, 0.0)
        if a != b:
            out.append({"stage": stage, "cause": cause, "defaults": a, "best": b, "change": b - a})
    return sorted(out, key=lambda d: (-abs(d["change"]), d["stage"], d["cause"]))[:STALL_LINES]


def _ranked(search: Search, reference: dict[str, Any] | None, metric: str) -> list[dict[str, Any]]:
    """The simulated candidates that ran, best first, each with its changes from the defaults."""
    rows = [(search.rows[c.key], c) for c in search.simulated() if search.rows[c.key]["status"] == "ok"]
    rows.sort(key=lambda rc: (rc[0][metric], rc[1].estimate or 0.0, rc[1].index))
    return [{"rank": n, "index": c.index, "overrides": c.overrides, "config": row["config"],
             "changes": changes(row["config"], reference) if reference else {}, "metric": row[metric],
             **{k: row[k] for k in ROW_KEYS if k in row}, "stalls": row.get("stalls", {})}
            for n, (row, c) in enumerate(rows, 1)]


def verdicts(top: list[dict[str, Any]], defaults: dict[str, Any] | None, metric: str) -> list[str]:
    """Sentences on what the model can and cannot tell apart (the runner-up, the defaults)."""
    best = top[0]
    span = interval(best, metric)
    out: list[str] = []
    if span is None:
        return out
    where = f"the best's 90 % interval ({span[0]:.4g}–{span[1]:.4g})"
    if len(top) > 1:
        second = top[1]["metric"]
        out.append(f"the runner-up ({second:.4g}) lies inside {where}: the model cannot tell them apart; either "
                   f"is as good as the model can say" if second <= span[1] else
                   f"the runner-up ({second:.4g}) lies outside {where}: the best is the model's clear winner")
    if defaults is not None and defaults.get("status") == "ok":
        value = defaults[metric]
        out.append(f"the kernel's defaults ({value:.4g}) lie inside {where}: the gain is within the model's "
                   f"uncertainty" if value <= span[1] else
                   f"the kernel's defaults ({value:.4g}) lie outside {where}: the gain is beyond the model's "
                   f"uncertainty")
    return out


def knob_verdicts(ranked: list[dict[str, Any]], candidates: list[Candidate], axes: dict[str, list[Any]],
                  metric: str, ratio: float | None) -> list[str]:
    """Per knob of the space (with more than one value): which value wins, and each other value's best against
    the best's 90 % interval — the least of its simulated candidates and of its other candidates' screen
    estimates times ``ratio``, the most favourable simulated/estimated ratio the search saw (what the stopping
    rule assumes; named as such where it is the least) — so that the report says whether the model can tell
    the values apart."""
    if not ranked or (span := interval(ranked[0], metric)) is None:
        return []
    best, out = ranked[0], []
    for axis, values in axes.items():
        if len(values) < 2:
            continue
        parts = []
        for value in sorted(values, key=order):
            if value == best["overrides"][axis]:
                continue
            simulated = [e["metric"] for e in ranked if e["overrides"][axis] == value]
            estimated = [c.estimate * (ratio or 1.0) for c in candidates
                         if c.overrides.get(axis) == value and c.estimate and c.row is None]
            if not simulated and not estimated:
                parts.append(f"{value}: none legal")
                continue
            figure = min(simulated + estimated)
            how = "" if simulated and figure == min(simulated) else f" (screen estimate × {ratio or 1.0:.3g})"
            inside = "inside the interval: not told apart" if figure <= span[1] else "outside: worse"
            parts.append(f"{value} {figure / best['metric'] - 1:+.1%}{how}, {inside}")
        out.append(f"{axis}: {best['overrides'][axis]} wins; " + "; ".join(parts))
    return out


def summarise(space: Space, candidates: list[Candidate], search: Search, info: dict[str, Any],
              top: int) -> dict[str, Any]:
    """The content of tune.json (the module docstring)."""
    metric, reference = space.sweep.metric, search.reference
    defaults = search.rows.get(search.reference_key or "") if reference else None
    ranked = _ranked(search, space.reference(), metric)
    taken = {c.key for c in search.simulated()}  # not those simulated ahead past the search's stop
    for c in candidates:
        if c.key in taken and c.status in ("screened",):
            c.stage, c.row = "simulated", search.rows[c.key]
            c.status, c.message = c.row["status"], c.row.get("message", "")
    best = dict(ranked[0]) if ranked else None
    if best is not None and defaults is not None and defaults.get("status") == "ok" and best["metric"]:
        best["gain"] = round(defaults[metric] / best["metric"], 4)
    status = {s: sum(c.status == s for c in candidates) for s in sorted({c.status for c in candidates})}
    return {"case": info["case"], "hardware": info["hardware"], "space": space.source, "metric": metric,
            "axes": {k: v for k, v in space.sweep.axes}, "constraints": list(space.sweep.constraints),
            "points": len(candidates), "status": status, "screen": info["screen"],
            "search": {"simulations": len(search.simulated()), "stop": search.stop, **info["search"],
                       "agreement": agreement(search)},
            "defaults": _defaults_entry(reference, defaults, metric), "best": best, "top": ranked[:top],
            "verdicts": verdicts(ranked, defaults, metric) if ranked else [],
            "knob_verdicts": knob_verdicts(ranked, candidates, dict(space.sweep.axes), metric,
                                           agreement(search).get("ratio_min")),
            "stall_changes": stall_changes(defaults, best) if best and defaults and "stalls" in defaults else [],
            "seconds": info["seconds"], "candidates": [candidate_entry(c) for c in candidates]}


def _defaults_entry(reference: dict[str, Any] | None, row: dict[str, Any] | None, metric: str) -> dict[str, Any]:
    if reference is None:
        return {"status": "illegal", "message": "the kernel's defaults are illegal for this case"}
    if row is None:
        return {"status": "not simulated", "config": reference}
    return {"config": reference, "status": row["status"], "message": row.get("message", ""),
            **({"metric": row[metric], "stalls": row.get("stalls", {})} if row["status"] == "ok" else {}),
            **{k: row[k] for k in ROW_KEYS if k in row}}


def _line(label: str, e: dict[str, Any], metric: str, base: float | None) -> str:
    iv = interval(e, metric)
    shown = f"{iv[0]:.4g}–{iv[1]:.4g}" if iv else "-"
    gain = f"{base / e['metric']:.3f}×" if base and e["metric"] else "-"
    period = f"{e['launch_period_us']:.6g}" if "launch_period_us" in e else "-"
    what = ", ".join(f"{k}={v}" for k, v in e.get("changes", {}).items()) or "(the defaults' schedule)"
    return (f"  {label:>8s} {e['metric']:12.6g} {shown:>19s} {period:>12s} "
            f"{gain:>7s} {e.get('bound_pipe', '-'):>10s}  {what}")


def format_report(s: dict[str, Any]) -> str:
    """The console's and report.txt's text of a tune.json summary."""
    m, st, scr, se = s["metric"], s["status"], s["screen"], s["search"]
    legal = s["points"] - st.get("illegal", 0) - st.get("excluded", 0)
    lines = [f"tfa-sim tune: {s['case']} on {s['hardware']}, {s['space']}: {s['points']} points, {legal} legal "
             f"({st.get('illegal', 0)} illegal, {st.get('excluded', 0)} excluded by constraints)",
             f"  screen: {scr['estimated']} estimated from {scr['probes']} probe simulations in {scr['seconds']:.1f} s"
             f" ({scr['schedule_errors']} schedule errors, {scr['twins']} twins of better-ranked candidates)",
             f"  finalists: {se['simulations']} simulated in {se['seconds']:.1f} s; stopped: {se['stop']}"]
    ag = se["agreement"]
    if ag.get("kendall_tau") is not None:
        lines.append(f"  screen vs simulation on the {ag['simulated']} simulated: Kendall τ {ag['kendall_tau']:+.2f}, "
                     f"simulated/estimated {ag['ratio_min']:.3f}–{ag['ratio_max']:.3f}")
    d = s["defaults"]
    base = d.get("metric") if d.get("status") == "ok" else None
    lines.append(f"  {'rank':>8s} {m:>12s} {'90 % interval':>19s} {'period µs':>12s} {'gain':>7s} {'bound':>10s}  "
                 f"changes from the kernel's defaults")
    lines += [_line(str(e["rank"]), e, m, base) for e in s["top"]]
    lines.append(_line("defaults", {**d, "changes": {}}, m, base) if base is not None else
                 f"  defaults: {d['status']} {d.get('message', '')}".rstrip())
    lines += [f"  {v}" for v in s["verdicts"]]
    if s.get("knob_verdicts"):
        lines.append(f"  each knob's values against the best's 90 % interval (the best {m} with that value):")
        lines += [f"    {v}" for v in s["knob_verdicts"]]
    if s["stall_changes"]:
        lines.append("  stalls, defaults → best (cycles summed over pipes): " + "; ".join(
            f"{c['stage']} {c['cause']} {_cycles(c['defaults'])} → {_cycles(c['best'])}" for c in s["stall_changes"]))
    if s.get("landscape_skipped"):
        lines.append(f"  {s['landscape_skipped']}")
    return "\n".join(lines)


def _cycles(n: float) -> str:
    """Cycles for a reader: 2.52 M, 840 k, 512."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f}"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_toml_value, value)) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def config_toml(config: dict[str, dict[str, Any]], comment: str) -> str:
    """A complete config as TOML (absent values left out), ``comment`` on top; a bundle's path made absolute, as
    its plugins' are (the file is run from anywhere)."""
    lines = [f"# {comment}"]
    build = config.get("kernel", {}).get("build")
    if isinstance(build, str) and is_path(build) and not Path(build).is_absolute():
        config = {**config, "kernel": {**config["kernel"], "build": str(Path(build).resolve())}}
    for section, values in config.items():
        lines += ["", f"[{section}]"] + [f"{k} = {_toml_value(v)}" for k, v in values.items() if v is not None]
    return "\n".join(lines) + "\n"


def _draw_knob(ax: Any, panel: dict[str, Any], metric: str) -> None:
    """One knob: every screened estimate (grey), every simulated value (blue), the kernel's defaults (black
    cross), the best (red star); a value that is not a finite number is left out."""
    xs = panel["values"]
    pos = {repr(v): i for i, v in enumerate(xs)}
    for pairs, style in ((panel["estimates"], {"color": "0.6", "s": 8, "label": "screen estimate"}),
                         (panel["simulated"], {"color": "C0", "s": 22, "label": "simulated"})):
        at, ys = points((pos.get(repr(v)), y) for v, y in pairs)
        if at:
            ax.scatter(at, ys, **style)
    if panel["defaults"] is not None:
        at, ys = points([(pos.get(repr(panel["defaults"][0])), panel["defaults"][1])])
        if at:
            ax.scatter(at, ys, marker="x", s=60, color="black", label="kernel defaults", zorder=3)
    bx, by = panel["best"]
    at, ys = points([(pos.get(repr(bx)), by)])
    if at:
        ax.scatter(at, ys, marker="*", s=200, color="red", label="best", zorder=3)
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlabel(panel["title"])
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # nothing drawn, nothing to name
        ax.legend(fontsize=7)
    ax.set_title(f"{panel['title']}: best {bx}", fontsize=9, y=1.0)  # y given: no search for top tick labels


def landscape_png(s: dict[str, Any]) -> bytes | None:
    """``landscape.png``: the metric against each knob (None when nothing was simulated)."""
    if not s["best"]:
        return None
    panels = []
    d = s["defaults"]
    for axis, values in s["axes"].items():
        section, key = axis.split(".", 1)
        default = (d["config"][section][key], d["metric"]) if d.get("status") == "ok" else None
        est = [(c["overrides"][axis], c["estimate"]) for c in s["candidates"] if c["estimate"] is not None]
        sim = [(c["overrides"][axis], c[s["metric"]]) for c in s["candidates"]
               if c["status"] == "ok" and s["metric"] in c]
        panels.append({"title": axis, "values": sorted(values, key=order), "estimates": est, "simulated": sim,
                       "best": (s["best"]["overrides"][axis], s["best"]["metric"]), "defaults": default})
    return figure_png(panels, _draw_knob, (5, 3.8), s["metric"],
                      f"{s['case']} on {s['hardware']}: {s['metric']} against each knob (lower is better)")
