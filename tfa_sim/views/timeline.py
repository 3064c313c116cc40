"""``tfa-sim timeline``: Gantt charts of a run (SVG written as plain text by :mod:`tfa_sim.views.svg_timeline`, PNG with
matplotlib, interactive HTML with plotly), laid out by the shared rules of :mod:`tfa_sim.views.gantt`.

Lanes are grouped by core; one colour per stage (QK, P, PV, GU); bars carry
their logical tile number; the time axis is in cycles (bottom) and µs (top);
the makespan from ``summary.json`` is drawn and printed.  ``--by pipe`` gives
one lane per pipe (MTE2, MTE1, M, FIX / MTE2, V, MTE3), ``--by stage`` one
band per stage and unit as engineers draw them by hand, ``--by unit`` one
lane per cube or vector core, QK/P in its upper and PV/GU in its lower half
(the default beyond 4 cores, for 24-core runs).
"""
from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfa_sim.rundir.outputs import read_events, read_summary
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.extras import require
from tfa_sim.spec.safety import show
from tfa_sim.spec.units import TRACKS, parse_unit
from tfa_sim.views.figures import span
from tfa_sim.views.gantt import (
    MAX_OUTLINED,
    STAGES,
    Bar,
    RunView,
    axis_limits,
    band,
    bar_span,
    labelled,
    makespan_drawn,
    shown_arrows,
)
from tfa_sim.views.svg_timeline import write_svg
from tfa_sim.views.trace import unit_kind, unit_order

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: More bars than this in one HTML file make browsers crawl: narrow with --cores/--tiles.
MAX_HTML_BARS = 60_000


#: Core numbers --cores accepts (no chip has more), and lanes one figure can hold.
MAX_CORE = 9999
MAX_LANES = 1500


def parse_cores(text: str | None) -> set[int] | None:
    """``0,2,5-7`` → {0, 2, 5, 6, 7}."""
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*([0-9]{1,4})\s*(?:-\s*([0-9]{1,4})\s*)?", part)
        if m is None or int(m[2] or m[1]) < int(m[1]) or int(m[2] or m[1]) > MAX_CORE:
            raise InputError(f"--cores {show(text)}: expected core numbers like 0,2,5-7 (ranges low-high, at "
                             f"most {MAX_CORE})")
        out.update(range(int(m[1]), int(m[2] or m[1]) + 1))
    return out


def load_view(run_dir: str | Path, by: str | None, cores: set[int] | None, tiles: tuple[int, int] | None,
              arrows: bool = False) -> RunView:
    """One run's view from its directory (summary.json and the event log, both checked as they are read)."""
    run_dir = Path(run_dir)
    return make_view(run_dir.name, read_summary(run_dir), read_events(run_dir, cores, tiles), by, cores, tiles,
                     arrows)


def make_view(name: str, summary: dict[str, Any], events: Iterable[Any], by: str | None = None,
              cores: set[int] | None = None, tiles: tuple[int, int] | None = None, arrows: bool = False) -> RunView:
    """Select, lay out and label one run's events."""
    events = [e for e in events if (cores is None or parse_unit(e.unit).core in cores)
              and (tiles is None or tiles[0] <= e.tile < tiles[1])]
    if not any(span(e.start, e.end) for e in events):
        raise InputError(f"{name}: no instructions left after --cores/--tiles; widen the selection")
    shown = {parse_unit(e.unit).core for e in events}
    by = by or ("pipe" if len(shown) <= 4 else "unit")
    lanes, bars = _lanes_and_bars(events, by)
    if len(lanes) > MAX_LANES:
        raise InputError(f"{name}: {len(lanes)} lanes are more than a figure holds ({MAX_LANES}); narrow with "
                         f"--cores or use --by unit")
    flows = _arrows(events, by) if arrows else []
    return RunView(name, summary, lanes, bars, flows, whole=tiles is None)


def planned(view_summary: dict[str, Any], events: list, schedule: list[tuple[int, float, float]]) -> tuple:
    """Events moved to a plan's times, and a summary whose makespan is the plan's."""
    times = {i: (a, b) for i, a, b in schedule}
    moved = [e._replace(start=times[e.id][0], end=times[e.id][1]) for e in events if e.id in times]
    end = max(b for _, _, b in schedule)
    return {**view_summary, "total_cycles": end, "time_us": end / view_summary["clock_mhz"]}, moved


def _lane(e: Any, by: str) -> str:
    if by == "pipe":
        return f"{e.unit} {e.pipe}"
    if by == "stage":
        return f"{e.unit} {STAGES[e.stage][0]}"
    return e.unit


def _lanes_and_bars(events: list, by: str) -> tuple[list[str], list[Bar]]:
    if by not in ("pipe", "stage", "unit"):
        raise InputError(f"--by {by!r}: use pipe, stage or unit")
    units = sorted({e.unit for e in events}, key=unit_order)
    if by == "pipe":
        lanes = [f"{u} {p}" for u in units for p in TRACKS[unit_kind(u)]]
    elif by == "stage":
        per_unit = {"cube": ("dispatch", "QK", "PV", "end"), "vec": ("P", "GU", "end", "combine")}
        present = {_lane(e, by) for e in events if e.end > e.start}  # zero-length handshakes draw nothing
        lanes = [f"{u} {s}" for u in units for s in per_unit[unit_kind(u)] if f"{u} {s}" in present]
    else:
        lanes = units
    if by == "pipe":
        bars = [Bar(_lane(e, by), e.start, e.end, e.stage, e.tile,
                    f"{e.kind}<br>{e.stage} block {e.block} tile {e.tile} #{e.sub}<br>"
                    f"{e.start:.0f}–{e.end:.0f} ({e.end - e.start:.0f} cycles) {e.nbytes} B")
                for e in events if e.end > e.start]
        return lanes, bars
    spans: dict[tuple, list[float]] = {}
    for e in events:  # one bar per (lane, stage, block, tile): first start to last end
        if e.end <= e.start:
            continue
        key = (_lane(e, by), e.stage, e.block, e.tile)
        span = spans.setdefault(key, [e.start, e.end])
        span[0], span[1] = min(span[0], e.start), max(span[1], e.end)
    bars = [Bar(lane, lo, hi, stage, tile, f"{stage} block {block} tile {tile}<br>{lo:.0f}–{hi:.0f} "
                f"({hi - lo:.0f} cycles)") for (lane, stage, block, tile), (lo, hi) in spans.items()]
    return lanes, bars


def _arrows(events: list, by: str) -> list[tuple[str, float, str, float]]:
    """FIFO hand-offs between units: from the producer's end to the start of the instruction it released."""
    by_id = {e.id: e for e in events}
    out = []
    for e in events:
        for pred_id, _cause, _lat, via in e.deps:
            p = by_id.get(pred_id)
            if p is not None and via and p.unit != e.unit and e.end > e.start:
                out.append((_lane(p, by), p.end, _lane(e, by), e.start))
    return out


#: The figure formats: each suffix → the optional module that draws it (None: tfa-sim writes the SVG itself).
DRAWN_BY = {".svg": None, ".png": "matplotlib", ".html": "plotly"}


def check_output(out: Path) -> str:
    """The figure format of ``-o out`` (its suffix), once its drawing library is known to be installed."""
    suffix = out.suffix.lower()
    if suffix not in DRAWN_BY:
        raise InputError(f"-o {out}: use a .svg, .png or .html file name")
    module = DRAWN_BY[suffix]
    if module is not None:
        require(f"-o {out.name}", module)
    return suffix


def render(views: list[RunView], out: Path, arrows: bool = False) -> None:
    """Write ``out`` (.svg, .png or .html) with the runs stacked on one time axis."""
    suffix = check_output(out)
    tmp = out.with_name(f".{out.stem}.partial{suffix}")
    if suffix == ".svg":
        write_svg(views, tmp, arrows)
    elif suffix == ".png":
        _render_matplotlib(views, tmp, arrows)
    else:
        _render_html(views, tmp)
    os.replace(tmp, out)


def _render_matplotlib(views: list[RunView], out: Path, arrows: bool) -> None:
    """The PNG figure, drawn by matplotlib."""
    figure(views, arrows).savefig(out, dpi=110)


def figure(views: list[RunView], arrows: bool = False) -> Figure:
    """The runs' Gantt chart as a matplotlib Figure, stacked on one time axis (made without pyplot, so that
    neither a GUI backend nor a notebook's figure manager is touched)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    heights = [max(2.0, 0.28 * len(v.lanes) + 1.2) for v in views]
    fig = Figure(figsize=(16, sum(heights) + 0.6))
    axes = fig.subplots(len(views), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    begin, end = bar_span(views)
    for ax, view in zip(axes[:, 0], views):
        _draw(ax, view, begin, end, arrows)
    axes[-1, 0].set_xlabel("cycles")
    clock = views[0].clock_mhz
    top = axes[0, 0].secondary_xaxis("top", functions=(lambda c: c / clock, lambda u: u * clock))
    top.set_xlabel(f"µs at {clock:.0f} MHz")
    handles = [Patch(color=colour, label=name) for name, colour in STAGES.values()]
    fig.legend(handles=handles, loc="upper right", ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def _draw(ax: Any, view: RunView, begin: float, end: float, arrows: bool) -> None:
    """One view's panel on matplotlib axes ``ax``, by the layout rules of :mod:`tfa_sim.views.gantt`."""
    row = {lane: i for i, lane in enumerate(view.lanes)}
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for b in view.bars:
        groups[(b.lane, b.stage)].append((b.start, b.end - b.start))
    many = len(view.bars) > 20_000
    for (lane, stage), spans in groups.items():
        top, height = band(stage, view.per_unit)
        ax.broken_barh(spans, (row[lane] + top, height), facecolors=STAGES[stage][1], edgecolor="white",
                       linewidth=0.3 if len(view.bars) < MAX_OUTLINED else 0, rasterized=many)
    for b in labelled(view, begin, end):
        ax.text((b.start + b.end) / 2, row[b.lane], str(b.tile), ha="center", va="center", fontsize=7,
                color="white")
    for lane_a, t_a, lane_b, t_b in shown_arrows(view, arrows):
        ax.annotate("", xy=(t_b, row[lane_b]), xytext=(t_a, row[lane_a]),
                    arrowprops={"arrowstyle": "->", "color": "#444444", "lw": 0.6, "alpha": 0.6})
    ax.set_yticks(range(len(view.lanes)), view.lanes, fontsize=7)
    ax.set_ylim(len(view.lanes) - 0.5, -0.5)
    lo, hi = axis_limits(begin, end)
    ax.set_xlim(lo, hi)
    if makespan_drawn(view, hi):
        ax.axvline(view.summary["total_cycles"], color="black", lw=1, ls="--")
    ax.set_title(view.panel_title, fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)


def _render_html(views: list[RunView], out: Path) -> None:
    """The self-contained interactive page, drawn by plotly (no arrows: hover shows each bar's details)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    total = sum(len(v.bars) for v in views)
    if total > MAX_HTML_BARS:
        raise InputError(f"{total} bars are too many for an interactive page (limit {MAX_HTML_BARS}); narrow "
                         f"with --cores 0-1 or --tiles 0:16, or write .png/.svg")
    fig = make_subplots(rows=len(views), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[f"{v.title}<br>{v.makespan}" for v in views],
                        row_heights=[len(v.lanes) for v in views])
    for r, view in enumerate(views, start=1):
        for stage, (short, colour) in STAGES.items():
            bars = [b for b in view.bars if b.stage == stage]
            if not bars:
                continue
            fig.add_trace(go.Bar(orientation="h", y=[b.lane for b in bars], x=[b.end - b.start for b in bars],
                                 base=[b.start for b in bars], marker_color=colour, name=short,
                                 legendgroup=short, showlegend=r == 1, text=[str(b.tile) for b in bars],
                                 textposition="inside", insidetextanchor="middle",
                                 hovertext=[b.text for b in bars], hoverinfo="text"), row=r, col=1)
        if makespan_drawn(view, math.inf):
            fig.add_vline(x=view.summary["total_cycles"], line_dash="dash", row=r, col=1)
        fig.update_yaxes(categoryorder="array", categoryarray=view.lanes[::-1], row=r, col=1)
    fig.update_xaxes(title_text="cycles", row=len(views), col=1)
    fig.update_layout(barmode="overlay", height=180 + 22 * sum(len(v.lanes) for v in views),
                      title=f"tfa-sim timeline ({views[0].clock_mhz:.0f} MHz: µs = cycles / "
                            f"{views[0].clock_mhz:.0f})", dragmode="zoom")
    fig.write_html(str(out), include_plotlyjs=True, full_html=True)
