"""Sweep-report pictures: one panel per shape, so no shape's winner hides another's.

A *shape axis* is a varied ``case.*`` or ``hardware.*`` axis (S1, S0, head,
preset…): points of different shapes solve different problems, so each
combination of shape-axis values gets its own panel, titled with it, and its
own scale.  Inside a panel the metric of each cell (or line point) is the
best over the remaining varied axes; the panel's best point is marked, and
its title names it and how far the worst cell is from it (autoscaled axes
make small differences look large).  Axis values that never ran legally stay
visible as grey cells.  :func:`heatmap_panels` and :func:`preload_panels`
compute what is drawn (also recorded in ``report.json``); :func:`draw`
renders it.
"""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.points import is_shape
from tfa_sim.explore.sweep.results import write_atomic
from tfa_sim.explore.sweep.spec import METRICS
from tfa_sim.spec.extras import missing
from tfa_sim.views.figures import finite, grid, label, limits, points

MAX_PANELS = 48
PRELOAD, SERIES = "schedule.qk_preload", "tiling.tile_s1"


def order(value: Any) -> tuple:
    """Sort key for axis values: numbers by value, then anything else by text."""
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _short(axis: str) -> str:
    return axis.split(".", 1)[1]


def _ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["status"] == "ok"]


def split_axes(ok: list[dict[str, Any]], axes: list[str]) -> tuple[list[str], list[str]]:
    """The axes varied among ``ok`` rows: (shape axes, schedule/tiling axes), in sweep order."""
    varied = [a for a in axes if len({repr(r["overrides"].get(a)) for r in ok}) > 1]
    shape = [a for a in varied if is_shape(a)]
    return shape, [a for a in varied if a not in shape]


def _groups(rows: list[dict[str, Any]], shape_axes: list[str]) -> list[tuple[dict[str, Any], list[dict]]]:
    """Rows per combination of shape-axis values, in sorted order."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r["overrides"].get(a) for a in shape_axes), []).append(r)
    return [(dict(zip(shape_axes, values)), group) for values, group in
            sorted(groups.items(), key=lambda kv: [order(v) for v in kv[0]])]


def _best_by(ok: list[dict[str, Any]], keys: list[str], metric: str) -> dict[tuple, float]:
    """The best metric for each combination of ``keys`` values, over all other axes."""
    pick = METRICS[metric]
    out: dict[tuple, float] = {}
    for r in ok:
        k = tuple(r["overrides"][a] for a in keys)
        out[k] = r[metric] if k not in out else pick(out[k], r[metric])
    return out


def _panels(rows: list[dict[str, Any]], axes: list[str], metric: str, keys: list[str]) -> list[dict[str, Any]]:
    """One record per shape with ok points: title (its shape values), ``values`` of each key over all its
    rows (ok or not), the best metric per cell, and the best cell."""
    shape_axes, _ = split_axes(_ok(rows), axes)
    out = []
    for where, group in _groups(rows, shape_axes):
        cells = _best_by(_ok(group), keys, metric)
        if not cells:
            continue
        best = (min if METRICS[metric] is min else max)(cells, key=cells.__getitem__)
        values = {k: sorted({r["overrides"][k] for r in group if k in r["overrides"]}, key=order) for k in keys}
        out.append({"title": ", ".join(f"{_short(a)} = {v}" for a, v in where.items()) or "all points",
                    "where": where, "keys": keys, "values": values, "cells": cells,
                    "best": {"overrides": dict(zip(keys, best)), "value": cells[best]}})
    return out


def heatmap_panels(rows: list[dict[str, Any]], axes: list[str], metric: str) -> list[dict[str, Any]]:
    """Per shape: the metric over the first two varied schedule/tiling axes ([] if fewer vary)."""
    _, other = split_axes(_ok(rows), axes)
    return _panels(rows, axes, metric, other[:2]) if len(other) >= 2 else []


def preload_panels(rows: list[dict[str, Any]], axes: list[str], metric: str) -> list[dict[str, Any]]:
    """Per shape: the metric against qk_preload, one line per tile_s1 if it varies ([] if preload does not)."""
    _, other = split_axes(_ok(rows), axes)
    if PRELOAD not in other:
        return []
    return _panels(rows, axes, metric, [SERIES, PRELOAD] if SERIES in other else [PRELOAD])


#: The cell luminance L above which black text contrasts more than white: (L + 0.05) / 0.05 = 1.05 / (L + 0.05)
#: (WCAG contrast); 0.17913, not the rounded 0.179, under which cells of L 0.179–0.17913 took the weaker black.
BLACK_ABOVE = math.sqrt(1.05 * 0.05) - 0.05


def label_color(rgba: tuple[float, ...]) -> str:
    """Black or white text, whichever contrasts more with a cell of colour ``rgba`` (WCAG luminance)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > BLACK_ABOVE else "white"


def _best_title(panel: dict[str, Any]) -> str:
    """The panel title: its shape, the best point, and how far the worst cell is from it."""
    best = panel["best"]
    values = [v for v in map(finite, panel["cells"].values()) if v is not None]
    value = finite(best["value"])
    named = ", ".join(f"{_short(a)} {v}" for a, v in best["overrides"].items())
    if value is None or not values:
        return f"{panel['title']}\nbest {named}: {label(best['value'], '.4g')}"
    worst = max(values) if value == min(values) else min(values)
    spread = abs(worst - value) / abs(value) if value else 0.0
    return f"{panel['title']}\nbest {named}: {value:.4g} (worst {label(spread, '.1%')} off)"


def _draw_heatmap(ax: Any, panel: dict[str, Any], metric: str) -> None:
    import matplotlib
    import numpy as np

    (ky, kx), values = panel["keys"], panel["values"]
    ys, xs = values[ky], values[kx]
    cells = grid([[panel["cells"].get((y, x)) for x in xs] for y in ys])  # absent and non-finite: NaN, grey
    shown = cells[~np.isnan(cells)]
    low, high = limits(shown.min() if shown.size else None, shown.max() if shown.size else None)
    cmap = matplotlib.colormaps["viridis_r" if METRICS[metric] is min else "viridis"].with_extremes(bad="lightgray")
    im = ax.imshow(cells, cmap=cmap, aspect="auto", vmin=low, vmax=high)
    for i, j in np.ndindex(cells.shape):
        if not np.isnan(cells[i, j]):
            ax.text(j, i, f"{cells[i, j]:.3g}", ha="center", va="center", fontsize=7,
                    color=label_color(cmap(im.norm(cells[i, j]))))
    best = panel["best"]["overrides"]
    if finite(panel["best"]["value"]) is not None:
        ax.add_patch(matplotlib.patches.Rectangle((xs.index(best[kx]) - 0.5, ys.index(best[ky]) - 0.5), 1, 1,
                                                  fill=False, edgecolor="red", linewidth=2))
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(_short(kx))
    ax.set_ylabel(_short(ky))
    ax.figure.colorbar(im, ax=ax, label=metric)
    ax.set_title(_best_title(panel), fontsize=9, y=1.0)  # y given: no search for top tick labels to clear


def _draw_lines(ax: Any, panel: dict[str, Any], metric: str) -> None:
    """Metric against qk_preload; each tile_s1 keeps its colour in every panel (absent values leave gaps)."""
    keys, values = panel["keys"], panel["values"]
    series: dict[Any, dict[Any, float]] = {}
    for k, v in panel["cells"].items():
        series.setdefault(k[0] if len(keys) == 2 else None, {})[k[-1]] = v
    for name, by_preload in sorted(series.items(), key=lambda kv: order(kv[0])):
        xs, ys = points((x, by_preload[x]) for x in sorted(by_preload, key=order))
        color = f"C{values[SERIES].index(name) % 10}" if name is not None else "C0"
        ax.plot(xs, ys, marker="o", color=color, label=f"{_short(SERIES)} = {name}" if name is not None else None)
    best = panel["best"]
    xs, ys = points([(best["overrides"][PRELOAD], best["value"])])
    ax.plot(xs, ys, marker="*", markersize=14, color="red", linestyle="none", label="best")
    ax.set_xticks(values[PRELOAD], [str(v) for v in values[PRELOAD]])
    ax.set_xlabel(_short(PRELOAD))
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # nothing drawn, nothing to name
        ax.legend(fontsize=7)
    ax.set_title(_best_title(panel), fontsize=9, y=1.0)  # y given: no search for top tick labels to clear


def _render(path: Path, panels: list[dict[str, Any]], drawer: Any, size: tuple[float, float], metric: str,
            suptitle: str) -> None:
    """Draw ``panels`` in a grid (2 or 3 columns) and write the PNG whole."""
    write_atomic(path, figure_png(panels, drawer, size, metric, suptitle))


def figure_png(panels: list[dict[str, Any]], drawer: Any, size: tuple[float, float], metric: str,
               suptitle: str) -> bytes:
    """``drawer(ax, panel, metric)`` for each panel in a grid of 2 or 3 columns, ``size`` inches each: PNG bytes."""
    from matplotlib.figure import Figure

    cols = min(len(panels), 2 if len(panels) <= 4 else 3)
    rows = math.ceil(len(panels) / cols)
    width, height = size[0] * cols, size[1] * rows + 0.4
    # fixed margins in inches (tight_layout would measure every label: most of the drawing time); made without
    # pyplot (no backend chosen, no figure manager: a notebook's state is left alone, and pyplot's import saved)
    fig = Figure(figsize=(width, height))
    grid = fig.subplots(rows, cols, squeeze=False, gridspec_kw={
        "left": 0.8 / width, "right": 1 - 0.2 / width, "bottom": 0.55 / height, "top": 1 - 0.95 / height,
        "wspace": 0.35, "hspace": 1.4 / size[1]})
    for ax in grid.flat[len(panels):]:
        ax.set_visible(False)
    for ax, panel in zip(grid.flat, panels):
        drawer(ax, panel, metric)
    fig.suptitle(suptitle, fontsize=10, y=1 - 0.15 / height)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def draw(out: Path, rows: list[dict[str, Any]], axes: list[str], metric: str) -> list[dict[str, Any]]:
    """Write ``heatmap.png`` and ``plot_preload.png`` where they apply; their panel records."""
    shape_axes, other = split_axes(_ok(rows), axes)
    per = f"one panel per {', '.join(_short(a) for a in shape_axes)}" if shape_axes else "one shape"
    better = "lower" if METRICS[metric] is min else "higher"
    written: list[dict[str, Any]] = []
    for name, panels, drawer, size, note in (
            ("heatmap.png", heatmap_panels(rows, axes, metric), _draw_heatmap, (6, 4.5), "; grey: no ok point"),
            ("plot_preload.png", preload_panels(rows, axes, metric), _draw_lines, (6, 4), "")):
        if not panels:
            continue
        record = {"file": str(out / name), "panels": [{k: p[k] for k in ("title", "where", "best")}
                                                       for p in panels]}
        skipped = f"{len(panels)} panels > {MAX_PANELS}" if len(panels) > MAX_PANELS else missing(name, "matplotlib")
        if skipped:  # too many panels to read, or no matplotlib (the sweep's report stands without its plots)
            written.append({**record, "file": None, "skipped": skipped})
            continue
        rest = [_short(a) for a in other if a not in panels[0]["keys"]]
        _render(out / name, panels, drawer, size, metric, f"{metric} ({better} is better); {per}; "
                + (f"each value: best over {', '.join(rest)}" if rest else "every point shown") + note)
        written.append(record)
    return written
