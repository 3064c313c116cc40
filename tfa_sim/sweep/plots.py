"""Sweep-report pictures: one panel per shape, so no shape's winner hides another's.

A *shape axis* is a varied ``case.*`` or ``hardware.*`` axis (S1, S0, head,
preset…): points of different shapes solve different problems, so each
combination of shape-axis values gets its own panel, titled with it, and its
own colour scale.  Inside a panel the metric of each cell (or line point) is
the best over the remaining varied axes, and the panel's best point is
marked and named in its title.  :func:`heatmap_panels` and
:func:`preload_panels` compute what is drawn (also recorded in
``report.json``); :func:`draw` renders it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tfa_sim.sweep.points import SHAPE_SECTIONS
from tfa_sim.sweep.results import write_atomic
from tfa_sim.sweep.spec import METRICS

MAX_PANELS = 48
PRELOAD, SERIES = "schedule.qk_preload", "tiling.tile_s1"


def split_axes(ok: list[dict[str, Any]], axes: list[str]) -> tuple[list[str], list[str]]:
    """The varied axes among ``ok`` rows: (shape axes, schedule/tiling axes), in sweep order."""
    varied = [a for a in axes if len({repr(r["overrides"].get(a)) for r in ok}) > 1]
    shape = [a for a in varied if a.split(".")[0] in SHAPE_SECTIONS]
    return shape, [a for a in varied if a not in shape]


def order(value: Any) -> tuple:
    """Sort key for axis values: numbers by value, then anything else by text."""
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _short(axis: str) -> str:
    return axis.split(".", 1)[1]


def _groups(ok: list[dict[str, Any]], shape_axes: list[str]) -> list[tuple[dict[str, Any], list[dict]]]:
    """Rows per combination of shape-axis values, in sorted order."""
    groups: dict[tuple, list[dict]] = {}
    for r in ok:
        groups.setdefault(tuple(r["overrides"][a] for a in shape_axes), []).append(r)
    return [(dict(zip(shape_axes, values)), rows) for values, rows in
            sorted(groups.items(), key=lambda kv: [order(v) for v in kv[0]])]


def _best_by(rows: list[dict[str, Any]], keys: list[str], metric: str) -> dict[tuple, float]:
    """The best metric for each combination of ``keys`` values, over all other axes."""
    pick, out = METRICS[metric], {}
    for r in rows:
        k = tuple(r["overrides"][a] for a in keys)
        out[k] = r[metric] if k not in out else pick(out[k], r[metric])
    return out


def _panel(where: dict[str, Any], cells: dict[tuple, float], keys: list[str], metric: str) -> dict[str, Any]:
    """A panel record: title (the shape values), the cells, and the best cell."""
    best = (min if METRICS[metric] is min else max)(cells, key=cells.__getitem__)
    title = ", ".join(f"{_short(a)} = {v}" for a, v in where.items()) or "all points"
    return {"title": title, "where": where, "keys": keys, "cells": cells,
            "best": {"overrides": dict(zip(keys, best)), "value": cells[best]}}


def heatmap_panels(ok: list[dict[str, Any]], axes: list[str], metric: str) -> list[dict[str, Any]]:
    """Per shape: the metric over the first two varied schedule/tiling axes ([] if fewer vary)."""
    shape_axes, other = split_axes(ok, axes)
    if len(other) < 2:
        return []
    keys = other[:2]
    return [_panel(where, _best_by(rows, keys, metric), keys, metric) for where, rows in _groups(ok, shape_axes)]


def preload_panels(ok: list[dict[str, Any]], axes: list[str], metric: str) -> list[dict[str, Any]]:
    """Per shape: the metric against qk_preload, one line per tile_s1 if it varies ([] if preload does not)."""
    shape_axes, other = split_axes(ok, axes)
    if PRELOAD not in other:
        return []
    keys = [SERIES, PRELOAD] if SERIES in other else [PRELOAD]
    return [_panel(where, _best_by(rows, keys, metric), keys, metric) for where, rows in _groups(ok, shape_axes)]


def label_color(rgba: tuple[float, ...]) -> str:
    """Black or white text, whichever contrasts more with a cell of colour ``rgba`` (WCAG luminance)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.179 else "white"


def _figure(n: int, size: tuple[float, float]) -> tuple[Any, list[Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 2 if n <= 4 else 3)
    rows = math.ceil(n / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in grid.flat[n:]:
        ax.set_visible(False)
    return fig, list(grid.flat[:n])


def _save(fig: Any, path: Path, suptitle: str) -> None:
    import io

    import matplotlib.pyplot as plt

    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def _values(panel: dict[str, Any], i: int) -> list[Any]:
    return sorted({k[i] for k in panel["cells"]}, key=order)


def _draw_heatmap(ax: Any, panel: dict[str, Any], metric: str) -> None:
    import matplotlib
    import numpy as np

    ys, xs = _values(panel, 0), _values(panel, 1)
    grid = np.full((len(ys), len(xs)), np.nan)
    for (y, x), v in panel["cells"].items():
        grid[ys.index(y), xs.index(x)] = v
    cmap = matplotlib.colormaps["viridis_r" if METRICS[metric] is min else "viridis"].with_extremes(bad="lightgray")
    im = ax.imshow(grid, cmap=cmap, aspect="auto")
    for i, j in np.ndindex(grid.shape):
        if not np.isnan(grid[i, j]):
            ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=7,
                    color=label_color(cmap(im.norm(grid[i, j]))))
    by, bx = panel["best"]["overrides"].values()
    ax.add_patch(matplotlib.patches.Rectangle((xs.index(bx) - 0.5, ys.index(by) - 0.5), 1, 1, fill=False,
                                              edgecolor="red", linewidth=2))
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(_short(panel["keys"][1]))
    ax.set_ylabel(_short(panel["keys"][0]))
    ax.figure.colorbar(im, ax=ax, label=metric)
    ax.set_title(f"{panel['title']}\nbest {by}, {bx}: {panel['best']['value']:.4g}", fontsize=9)


def _draw_lines(ax: Any, panel: dict[str, Any], metric: str) -> None:
    series: dict[Any, dict[Any, float]] = {}
    for k, v in panel["cells"].items():
        series.setdefault(k[0] if len(k) == 2 else "all", {})[k[-1]] = v
    for name, by_preload in sorted(series.items(), key=lambda kv: order(kv[0])):
        xs = sorted(by_preload, key=order)
        label = f"{_short(SERIES)} = {name}" if len(panel["keys"]) == 2 else "all"
        ax.plot(xs, [by_preload[x] for x in xs], marker="o", label=label)
    best = panel["best"]
    ax.plot([best["overrides"][PRELOAD]], [best["value"]], marker="*", markersize=14, color="red",
            linestyle="none", label="best")
    ax.set_xlabel(_short(PRELOAD))
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    named = ", ".join(f"{_short(a)} {v}" for a, v in best["overrides"].items())
    ax.set_title(f"{panel['title']}\nbest {named}: {best['value']:.4g}", fontsize=9)


def draw(out: Path, ok: list[dict[str, Any]], axes: list[str], metric: str) -> list[dict[str, Any]]:
    """Write ``heatmap.png`` and ``plot_preload.png`` where they apply; their panel records."""
    shape_axes, other = split_axes(ok, axes)
    per = f"one panel per {', '.join(_short(a) for a in shape_axes)}" if shape_axes else "one shape"
    better = "lower" if METRICS[metric] is min else "higher"
    written = []
    for name, panels, drawer, size in (("heatmap.png", heatmap_panels(ok, axes, metric), _draw_heatmap, (6, 4.5)),
                                       ("plot_preload.png", preload_panels(ok, axes, metric), _draw_lines, (6, 4))):
        if not panels:
            continue
        record = {"file": str(out / name), "panels": [{k: p[k] for k in ("title", "where", "best")}
                                                       for p in panels]}
        if len(panels) > MAX_PANELS:
            written.append({**record, "file": None, "skipped": f"{len(panels)} panels > {MAX_PANELS}"})
            continue
        fig, cells = _figure(len(panels), size)
        for ax, panel in zip(cells, panels):
            drawer(ax, panel, metric)
        rest = [_short(a) for a in other if a not in panels[0]["keys"]]
        _save(fig, out / name, f"{metric} ({better} is better); {per}; "
              + (f"each cell/point: best over {', '.join(rest)}" if rest else "every point shown"))
        written.append(record)
    return written
