"""``tfa-sim sweep-report``: best point per shape, ranking, Pareto fronts, speed-up, plots."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfa_sim.errors import InputError
from tfa_sim.sweep.execute import read_results, run_point
from tfa_sim.sweep.spec import METRICS, SHAPE_KEYS, point_key


# ---- report ------------------------------------------------------------------------------------
def shape_of(row: dict[str, Any]) -> tuple:
    c = row["config"]
    return tuple(c["case"][k] for k in SHAPE_KEYS) + (c["hardware"]["preset"], c["hardware"]["cores"])


def shape_label(shape: tuple) -> str:
    head, s0, s1, causal, batch, heads, kv, preset, cores = shape
    extra = (" causal" if causal else "") + (f" batch {batch} heads {heads}/{kv}" if (batch, heads) != (1, 1) else "")
    return f"H{head} S0={s0} S1={s1}{extra} on {preset}" + (f" ({cores} cores)" if cores else "")


def pareto(rows: list[dict[str, Any]], metric: str, other: str) -> list[dict[str, Any]]:
    """Points no other point beats on both the metric and ``other`` (bytes)."""
    better = METRICS[metric]
    sign = 1 if better is min else -1
    ordered = sorted(rows, key=lambda r: (r[other], sign * r[metric]))
    front, best = [], None
    for r in ordered:
        if best is None or sign * r[metric] < best:
            front.append(r)
            best = sign * r[metric]
    return front


def default_metric(row: dict[str, Any], metric: str, cache: dict) -> float | str:
    """The metric of the kernel's default tiling and schedule for the row's shape (simulated if absent)."""
    shape = shape_of(row)
    if shape not in cache:
        base = {"case": row["config"]["case"], "hardware": row["config"]["hardware"],
                "numerics": {"enabled": False}}
        result = run_point({"key": point_key(base), "overrides": {}, "config": base}, (), metric)
        cache[shape] = result.get("metric", f"defaults {result['status']}: {result.get('message', '')}")
    return cache[shape]


def sweep_report(out_dir: str | Path, plots: bool = True) -> dict[str, Any]:
    out = Path(out_dir)
    meta_path = out / "sweep.json"
    if not meta_path.is_file():
        raise InputError(f"{out} is not a sweep directory (no sweep.json); give the --out of tfa-sim sweep")
    meta = json.loads(meta_path.read_text())
    metric = meta["metric"]
    rows = read_results(out / "results.jsonl")
    ok = [r for r in rows if r["status"] == "ok"]
    status = {s: sum(r["status"] == s for r in rows) for s in ("ok", "illegal", "excluded", "schedule_error")}
    better = METRICS[metric]
    shapes: dict[tuple, list] = {}
    for r in ok:
        shapes.setdefault(shape_of(r), []).append(r)
    cache: dict = {}
    per_shape = []
    for shape, rs in sorted(shapes.items()):
        ranked = sorted(rs, key=lambda r: r[metric], reverse=better is max)
        best = ranked[0]
        ref = default_metric(best, metric, cache)
        speedup = None
        if isinstance(ref, float):
            speedup = (ref / best[metric]) if better is min else (best[metric] / ref)
        per_shape.append({"shape": shape_label(shape), "best": best, "default_metric": ref, "speedup": speedup,
                          "ranked": ranked[:10], "pareto_ub": pareto(rs, metric, "ub_bytes"),
                          "pareto_l1": pareto(rs, metric, "l1_bytes")})
    report = {"metric": metric, "points": len(rows), "status": status, "shapes": per_shape,
              "plots": _plots(out, ok, meta["axes"], metric) if plots and ok else []}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report


def format_sweep_report(report: dict[str, Any]) -> str:
    m = report["metric"]
    lines = [f"sweep report: {report['points']} points ({', '.join(f'{k} {v}' for k, v in report['status'].items())})"
             f"; metric {m} ({'lower' if METRICS[m] is min else 'higher'} is better)"]
    for s in report["shapes"]:
        best = s["best"]
        sp = f"{s['speedup']:.2f}× vs the kernel defaults ({s['default_metric']:.4g})" if s["speedup"] else \
            f"no default to compare ({s['default_metric']})"
        lines.append(f"{s['shape']}: best {m} {best[m]:.4g} with {best['overrides']} — {sp}")
        lines.append(f"  {'rank':>4s} {m:>12s} {'bound':>10s} {'UB B':>7s} {'L1 B':>7s}  point")
        for i, r in enumerate(s["ranked"], 1):
            lines.append(f"  {i:4d} {r[m]:12.4g} {r['bound_pipe']:>10s} {r['ub_bytes']:7d} {r['l1_bytes']:7d}  "
                         f"{r['overrides']}")
        front = ", ".join(f"{r[m]:.4g}@{r['ub_bytes']}B" for r in s["pareto_ub"])
        lines.append(f"  Pareto front {m} vs UB bytes: {front}")
    for p in report["plots"]:
        lines.append(f"plot: {p}")
    return "\n".join(lines)


def _plots(out: Path, ok: list[dict], axes: list[str], metric: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    written = []
    varied = [a for a in axes if len({json.dumps(r["overrides"].get(a)) for r in ok}) > 1]
    if "schedule.qk_preload" in varied:
        series_key = "tiling.tile_s1" if "tiling.tile_s1" in varied else None
        fig, ax = plt.subplots(figsize=(8, 5))
        groups: dict[Any, dict[int, list[float]]] = {}
        for r in ok:
            g = groups.setdefault(r["overrides"].get(series_key) if series_key else "all", {})
            g.setdefault(r["overrides"]["schedule.qk_preload"], []).append(r[metric])
        pick = METRICS[metric]
        for name, by_p in sorted(groups.items(), key=lambda kv: str(kv[0])):
            xs = sorted(by_p)
            ax.plot(xs, [pick(by_p[x]) for x in xs], marker="o", label=f"tile_s1 = {name}" if series_key else name)
        ax.set_xlabel("qk_preload")
        ax.set_ylabel(f"{metric} ({pick.__name__} over the other axes)")
        ax.set_title(f"{metric} vs qk_preload")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "plot_preload.png", dpi=100)
        plt.close(fig)
        written.append(str(out / "plot_preload.png"))
    if len(varied) >= 2:
        a, b = varied[0], varied[1]
        xa = sorted({r["overrides"][a] for r in ok})
        xb = sorted({r["overrides"][b] for r in ok})
        grid = np.full((len(xa), len(xb)), np.nan)
        pick = METRICS[metric]
        for r in ok:
            i, j = xa.index(r["overrides"][a]), xb.index(r["overrides"][b])
            grid[i, j] = r[metric] if np.isnan(grid[i, j]) else pick(grid[i, j], r[metric])
        fig, ax = plt.subplots(figsize=(8, 6))
        im = ax.imshow(grid, cmap="viridis_r" if pick is min else "viridis", aspect="auto")
        ax.set_xticks(range(len(xb)), [str(v) for v in xb])
        ax.set_yticks(range(len(xa)), [str(v) for v in xa])
        ax.set_xlabel(b)
        ax.set_ylabel(a)
        for i in range(len(xa)):
            for j in range(len(xb)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=7, color="white")
        fig.colorbar(im, label=f"{metric} ({pick.__name__} over the other axes)")
        ax.set_title(f"{metric}: {a} × {b}")
        fig.tight_layout()
        fig.savefig(out / "heatmap.png", dpi=100)
        plt.close(fig)
        written.append(str(out / "heatmap.png"))
    return written

