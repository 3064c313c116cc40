"""The roofline chart: runs and their stages as points under the chip's limits (``tfa-sim roofline``).

Log-log axes: the x axis is a point's operational intensity, operations per byte moved to or from GM (every such
byte passes the L2); the y axis its achieved rate, tera-operations per second at the run's clock.  The cube's
points (the run's, ``compute_qk``'s, ``compute_pv``'s) count FLOPs (two per MAC), the vector pipe's (the run's,
``compute_p``'s, ``compute_gu``'s, ``combine``'s) 32-bit element operations (``tfa_sim.spec.work``).  A stage's
rate is its work over the whole kernel time (the stages overlap; their rates add up to the run's).  The ceilings
are the limits of :mod:`tfa_sim.spec.limits` for the units the run used: the cube's peak, the vector classes'
peaks (classes of equal peak on one line), and two slopes, the L2's bandwidth and the cores' GM paths together
(each path's rate × the units that have it).  A point under a roof is as far from it as the gap shows.

Every number is read from ``summary.json``'s ``roofline`` table and goes through :mod:`tfa_sim.views.figures`
(absent values are no point, axis limits always finite).  ``.svg`` is written here as plain text (the core
install); ``.png`` is drawn by matplotlib (the ``plots`` extra), ``.html`` by plotly (``html``).
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from tfa_sim.spec.limits import GM_PIPES, VECTOR_CLASSES
from tfa_sim.views.figures import finite, label, limits

#: Which stages are the cube's and which the vector pipe's.
CUBE_STAGES = ("compute_qk", "compute_pv")
VECTOR_STAGES = ("compute_p", "compute_gu", "combine")
#: A marker per point: the run as a whole, then each stage.
MARKERS = {"run": "o", "compute_qk": "s", "compute_pv": "D", "compute_p": "^", "compute_gu": "v", "combine": "P"}
#: A colour per run (cycled), and the ceilings'.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
ROOF = "#555555"
WIDTH, HEIGHT = 960, 600  # px of the SVG
LEFT, RIGHT, TOP, BOTTOM = 70, 310, 40, 50  # its margins: the legend and the ceilings' names on the right


@dataclass(frozen=True)
class Point:
    """One point: ``run``'s ``stage`` (``run`` for the whole run) on the ``kind`` axis (``cube``: FLOPs,
    ``vector``: element operations) at ``intensity`` operations per GM byte and ``tops`` tera-operations/s."""

    run: str
    stage: str
    kind: str
    intensity: float
    tops: float
    colour: str

    @property
    def text(self) -> str:
        unit = "FLOP" if self.kind == "cube" else "vector element op"
        return (f"{self.run}: {self.stage} ({self.kind}) {self.tops:.3g} T{unit}/s at {self.intensity:.3g} "
                f"{unit}/GM byte")


@dataclass(frozen=True)
class Ceiling:
    """A roof: flat at ``tops`` (a compute peak) or, with ``slope``, ``tops`` tera-bytes/s times the intensity;
    drawn from intensity ``lo`` to ``hi`` (a slope up to its set's highest peak, a peak from its set's steepest
    slope on: the roofline's shape)."""

    name: str
    tops: float
    slope: bool
    lo: float = 0.0
    hi: float = math.inf

    def at(self, intensity: float) -> float:
        return self.tops * intensity if self.slope else self.tops

    def xs(self, x0: float, x1: float, n: int = 64) -> list[float]:
        """Intensities along the roof within the axis limits ``x0``…``x1`` (none where it lies outside)."""
        lo, hi = max(x0, self.lo), min(x1, self.hi)
        return [lo * (hi / lo) ** (k / n) for k in range(n + 1)] if hi > lo else []


@dataclass(frozen=True)
class Chart:
    title: str
    points: list[Point]
    ceilings: list[Ceiling]

    def axes(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(x limits, y limits) in decades around the points and the ceilings' ridge points, all finite."""
        xs = [p.intensity for p in self.points] + [c.tops / s.tops for c in self.ceilings if not c.slope
                                                   for s in self.ceilings if s.slope]
        ys = [p.tops for p in self.points] + [c.tops for c in self.ceilings if not c.slope]
        x = limits(min(xs, default=None), max(xs, default=None), (0.1, 1000.0))
        y = limits(min(ys, default=None), max(ys, default=None), (0.01, 1000.0))
        return ((10 ** math.floor(math.log10(x[0] / 2)), 10 ** math.ceil(math.log10(x[1] * 2))),
                (10 ** math.floor(math.log10(y[0] / 2)), 10 ** math.ceil(math.log10(y[1] * 1.5))))


def _tops(per_cycle: Any, clock_mhz: float) -> float | None:
    value = finite(per_cycle)
    return None if value is None else value * clock_mhz * 1e6 / 1e12


def run_points(name: str, table: dict[str, Any], colour: str, cycles: float | None = None) -> list[Point]:
    """The run's points and its stages' from its ``roofline`` table (``cycles``: another time for the same work,
    a board's)."""
    time, clock = cycles or table["cycles"], table["clock_mhz"]
    out = []
    groups = [("run", table["resources"])] + [(stage, rows) for stage, rows in (table.get("stages") or {}).items()]
    for stage, rows in groups:
        gm = finite((rows.get("gm.L2") or {}).get("work"))
        for kind, ops in (("cube", _ops(rows, "cube.M", 2)), ("vector", _ops(rows, "vec.V", 1))):
            if stage != "run" and stage not in (CUBE_STAGES if kind == "cube" else VECTOR_STAGES):
                continue
            rate = _tops(None if ops is None or not time else ops / time, clock)
            if ops and gm and rate:
                out.append(Point(name, stage, kind, ops / gm, rate, colour))
    return out


def _ops(rows: dict[str, Any], name: str, per: int) -> float | None:
    work = finite((rows.get(name) or {}).get("work"))
    return None if work is None else work * per


def ceilings(table: dict[str, Any]) -> list[Ceiling]:
    """The roofs of one run's limits (module docstring), named with the units they are for."""
    res, clock, units = table["resources"], table["clock_mhz"], table["units"]
    where = f"{table['hardware']}, {units['cube']} AIC / {units['vec']} AIV"
    out = []
    cube = _tops(2 * (finite(res["cube.M"]["limit_per_cycle"]) or 0), clock)
    if cube:
        out.append(Ceiling(f"cube peak {cube:.3g} TFLOP/s ({where})", cube, False))
    peaks: dict[float, list[str]] = {}
    for cls in VECTOR_CLASSES:
        value = _tops((res.get(f"vec.V.{cls}") or {}).get("limit_per_cycle"), clock)
        if value:
            peaks.setdefault(value, []).append(cls)
    for value, classes in sorted(peaks.items(), reverse=True):
        out.append(Ceiling(f"vector {'/'.join(classes)} {value:.3g} Tel/s", value, False))
    l2 = _tops(res["gm.L2"]["limit_per_cycle"], clock)
    paths = _tops(sum(finite(res[p]["limit_per_cycle"]) or 0 for p in GM_PIPES), clock)
    for name, value in (("L2", l2), (f"GM paths of {units['cube']} cores", paths)):
        if value:
            out.append(Ceiling(f"{name} {value:.3g} TB/s", value, True))
    top_flat = max((c.tops for c in out if not c.slope), default=math.inf)
    top_slope = max((c.tops for c in out if c.slope), default=0.0)
    return [Ceiling(c.name, c.tops, c.slope, 0.0, top_flat / c.tops) if c.slope else
            Ceiling(c.name, c.tops, c.slope, c.tops / top_slope if top_slope else 0.0) for c in out]


def chart(runs: list[tuple[str, dict[str, Any]]], boards: Sequence[tuple[str, dict[str, Any], float]] = ()) -> Chart:
    """The chart of ``runs`` (name, roofline table) and ``boards`` (name, the model's table, the board's cycles):
    the points of each, the ceilings of every distinct set of limits."""
    points: list[Point] = []
    roofs: dict[str, Ceiling] = {}
    for i, (name, table) in enumerate(runs):
        points += run_points(name, table, COLOURS[i % len(COLOURS)])
        roofs.update((c.name, c) for c in ceilings(table))
    for i, (name, table, cycles) in enumerate(boards, start=len(runs)):
        points += [p for p in run_points(name, table, COLOURS[i % len(COLOURS)], cycles) if p.stage == "run"]
    names = ", ".join([name for name, _ in runs] + [name for name, _, _ in boards])
    return Chart(f"roofline: {names}", points, list(roofs.values()))


def render(c: Chart, out: Path) -> None:
    """Write ``out`` (.svg, .png or .html; the format checked by :func:`tfa_sim.views.timeline.check_output`)."""
    from tfa_sim.views.timeline import check_output

    suffix = check_output(out)
    tmp = out.with_name(f".{out.stem}.partial{suffix}")
    if suffix == ".svg":
        tmp.write_text(svg(c), encoding="utf-8")
    elif suffix == ".png":
        figure(c).savefig(tmp, dpi=110)
    else:
        _html(c, tmp)
    os.replace(tmp, out)


def svg(c: Chart) -> str:
    """The chart as plain SVG text (no matplotlib)."""
    (x0, x1), (y0, y1) = c.axes()
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + w * (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))

    def py(y: float) -> float:
        return TOP + h * (1 - (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'font-family="DejaVu Sans, sans-serif" font-size="11">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{LEFT}" y="22" font-size="13">{escape(c.title)}</text>',
             f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#000"/>']
    parts += _grid(x0, x1, y0, y1, px, py)
    for i, roof in enumerate(c.ceilings):
        pts = [(px(x), py(roof.at(x))) for x in roof.xs(x0, x1) if y0 <= roof.at(x) <= y1]
        if len(pts) > 1:
            dash = ' stroke-dasharray="6,4"' if roof.slope else ""
            parts.append(f'<polyline fill="none" stroke="{ROOF}" stroke-width="1.2"{dash} points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        parts.append(f'<text x="{LEFT + w + 8}" y="{TOP + 14 + 14 * i}" fill="{ROOF}">'
                     f'{"╱" if roof.slope else "—"} {escape(roof.name)}</text>')
    for p in c.points:
        x, y = px(p.intensity), py(p.tops)
        parts.append(f'<g>{_marker(MARKERS.get(p.stage, "o"), x, y, p.colour)}<title>{escape(p.text)}</title></g>')
    parts += _legend(c, LEFT + w + 8, TOP + 14 * (len(c.ceilings) + 2))
    parts.append(f'<text x="{LEFT + w / 2}" y="{HEIGHT - 12}" text-anchor="middle">operational intensity '
                 f'(operations per GM byte)</text>')
    parts.append(f'<text transform="translate(18,{TOP + h / 2}) rotate(-90)" text-anchor="middle">'
                 f'tera-operations per second (FLOP for the cube, elements for the vector pipe)</text>')
    return "\n".join(parts + ["</svg>\n"])


def _grid(x0: float, x1: float, y0: float, y1: float, px: Any, py: Any) -> list[str]:
    """Decade grid lines and their labels."""
    out = []
    for e in range(round(math.log10(x0)), round(math.log10(x1)) + 1):
        x = px(10.0 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" stroke="#ddd"/>'
                   f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{10.0 ** e:g}</text>')
    for e in range(round(math.log10(y0)), round(math.log10(y1)) + 1):
        y = py(10.0 ** e)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0 ** e:g}</text>')
    return out


def _marker(shape: str, x: float, y: float, colour: str) -> str:
    """An SVG marker of matplotlib's ``shape`` letter at (x, y)."""
    r = 5
    corners = {"s": [(-r, -r), (r, -r), (r, r), (-r, r)], "D": [(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
               "^": [(0, -r - 1), (r, r), (-r, r)], "v": [(0, r + 1), (r, -r), (-r, -r)],
               "P": [(-2, -r), (2, -r), (2, -2), (r, -2), (r, 2), (2, 2), (2, r), (-2, r), (-2, 2), (-r, 2),
                     (-r, -2), (-2, -2)]}.get(shape)
    if corners is None:
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{colour}" stroke="#000" stroke-width="0.5"/>'
    return (f'<polygon fill="{colour}" stroke="#000" stroke-width="0.5" points="'
            + " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in corners) + '"/>')


def _legend(c: Chart, x: float, y: float) -> list[str]:
    """The runs' colours and the stages' markers."""
    runs = list(dict.fromkeys((p.run, p.colour) for p in c.points))
    stages = list(dict.fromkeys(p.stage for p in c.points))
    out = []
    for i, (run, colour) in enumerate(runs):
        out.append(f'<rect x="{x}" y="{y + 14 * i - 9}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 16}" y="{y + 14 * i}">{escape(run[:40])}</text>')
    y += 14 * len(runs) + 8
    for i, stage in enumerate(stages):
        out.append(_marker(MARKERS.get(stage, "o"), x + 5, y + 14 * i - 4, "#bbbbbb")
                   + f'<text x="{x + 16}" y="{y + 14 * i}">{escape(stage)}</text>')
    return out


def figure(c: Chart) -> Any:
    """The chart as a matplotlib Figure (made without pyplot)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 6.5))
    ax = fig.subplots()
    from matplotlib.lines import Line2D

    (x0, x1), (y0, y1) = c.axes()
    for roof in c.ceilings:
        xs = roof.xs(x0, x1)
        ax.plot(xs, [roof.at(x) for x in xs], color=ROOF, lw=1.2, ls="--" if roof.slope else "-", label=roof.name)
    for p in c.points:
        ax.scatter([p.intensity], [p.tops], color=p.colour, marker=MARKERS.get(p.stage, "o"), edgecolor="black",
                   linewidth=0.5, zorder=3)
    proxies = [Line2D([], [], ls="", marker="o", color=colour, label=run)
               for run, colour in dict.fromkeys((p.run, p.colour) for p in c.points)]
    proxies += [Line2D([], [], ls="", marker=MARKERS.get(stage, "o"), color="#bbbbbb", markeredgecolor="black",
                       label=stage) for stage in dict.fromkeys(p.stage for p in c.points)]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel("operational intensity (operations per GM byte)")
    ax.set_ylabel("tera-operations per second")
    ax.set_title(c.title, fontsize=10, loc="left")
    ax.grid(which="major", alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + proxies, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def _html(c: Chart, out: Path) -> None:
    """The self-contained interactive page, drawn by plotly."""
    import plotly.graph_objects as go

    fig = go.Figure()
    (x0, x1), (y0, y1) = c.axes()
    for roof in c.ceilings:
        xs = roof.xs(x0, x1)
        fig.add_trace(go.Scatter(x=xs, y=[roof.at(x) for x in xs], mode="lines", name=roof.name,
                                 line={"color": ROOF, "dash": "dash" if roof.slope else "solid"}))
    symbols = {"o": "circle", "s": "square", "D": "diamond", "^": "triangle-up", "v": "triangle-down", "P": "cross"}
    for p in c.points:
        fig.add_trace(go.Scatter(x=[p.intensity], y=[p.tops], mode="markers", name=f"{p.run}: {p.stage}",
                                 hovertext=[p.text], hoverinfo="text",
                                 marker={"color": p.colour, "size": 10, "line": {"width": 0.5},
                                         "symbol": symbols[MARKERS.get(p.stage, "o")]}))
    fig.update_xaxes(type="log", range=[math.log10(x0), math.log10(x1)],
                     title_text="operational intensity (operations per GM byte)")
    fig.update_yaxes(type="log", range=[math.log10(y0), math.log10(y1)], title_text="tera-operations per second")
    fig.update_layout(title=c.title, height=650)
    fig.write_html(str(out), include_plotlyjs=True, full_html=True)


def format_table(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What ``tfa-sim roofline`` prints: each run's fraction of limit per resource, nearest first."""
    lines = []
    for name, table in runs:
        res = table["resources"]
        ranked = table["nearest"] + [n for n in ("cube.M", "vec.V", "cube.MTE2", "cube.MTE1", "cube.FIX",
                                                 "vec.MTE2", "vec.MTE3", "gm.L2", "gm.HBM")
                                     if n not in table["nearest"]]
        cells = [f"{n} {label(res[n]['fraction_of_limit'], '.1%')}" for n in ranked if n in res]
        lines.append(f"{name}: " + "  ".join(cells))
        if table.get("missing"):
            lines.append(f"  {table['missing']}")
    return lines


#: The keys of a ``roofline`` table the chart reads (a summary from before issue 51 has none).
TABLE_KEYS = ("cycles", "clock_mhz", "hardware", "units", "resources", "stages", "nearest", "missing")


def load_run(run_dir: str | Path) -> tuple[str, dict[str, Any]]:
    """(the run's name, its ``roofline`` table) from ``run_dir``'s summary.json; one InputError line otherwise."""
    from tfa_sim.rundir.outputs import read_summary
    from tfa_sim.spec.errors import InputError
    from tfa_sim.spec.safety import check_path

    path = check_path(run_dir, "RUN_DIR")
    table = read_summary(path).get("roofline")
    if not isinstance(table, dict) or any(key not in table for key in TABLE_KEYS):
        raise InputError(f"{path / 'summary.json'} has no roofline table (written by a tfa-sim before it): rerun "
                         f"tfa-sim run with this version to write one")
    return path.resolve().name, table
