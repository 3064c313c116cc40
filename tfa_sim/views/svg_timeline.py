"""``timeline.svg`` as plain SVG text: the Gantt figure of :mod:`tfa_sim.views.timeline` (lanes, bars coloured by
stage, tile numbers, arrows, cycles below and µs above, makespan, titles, legend) without matplotlib, whose
import and drawing took most of a small ``tfa-sim run``."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from html import escape  # not xml.sax.saxutils: it imports urllib.request, http and ssl
from pathlib import Path

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

WIDTH = 1600  # px, whatever the run
ROW = 20  # px per lane
RIGHT = 24  # px right of the plot
LINE = 14  # px per line of text
CHAR = 5.6  # px per character of a 9 px lane label, about (DejaVu Sans): sizes the left margin
TICKS = 8  # ticks per axis, about
#: Views with more bars than this get no tooltips (they would double the file for a figure nobody hovers).
MAX_TOOLTIPS = 5000
#: Characters XML 1.0 does not allow, even escaped (control characters, lone surrogates from a JSON file);
#: listed rather than negated, which is 10× cheaper to compile (11 ms).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ARROWHEAD = ('<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" '
              'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#444444"/>'
              '</marker></defs>')


@dataclass(frozen=True)
class Axis:
    """The shared time axis: cycles ``lo``…``hi`` onto pixels ``left``…``right``."""

    lo: float
    hi: float
    left: float
    right: float

    @property
    def scale(self) -> float:
        """Pixels per cycle."""
        return (self.right - self.left) / (self.hi - self.lo)

    def x(self, cycle: float) -> float:
        return self.left + (cycle - self.lo) * self.scale


def write_svg(views: list[RunView], out: Path, arrows: bool = False) -> None:
    """Write the runs' Gantt figure, stacked on one time axis, to ``out`` as SVG."""
    out.write_bytes(svg_text(views, arrows).encode("utf-8"))


def svg_text(views: list[RunView], arrows: bool = False) -> str:
    """The figure as an SVG document: legend, then each view's title and panel, µs above the first panel and
    cycles below the last; the same input gives the same text."""
    begin, end = bar_span(views)
    left = max(60.0, 16 + CHAR * max(len(lane) for v in views for lane in v.lanes))
    axis = Axis(*axis_limits(begin, end), left, WIDTH - RIGHT)
    body, y = _legend(), 2.5 * LINE
    for i, view in enumerate(views):
        body.append(_title(view.panel_title, axis.left, y))
        y += 2 * LINE + 6
        if i == 0:
            y += 2 * LINE + 8
            body += _us_axis(axis, view.clock_mhz, y)
        body += _panel(view, axis, y, begin, end, arrows)
        y += ROW * len(view.lanes) + LINE
    body += _cycle_axis(axis, y - LINE)
    height = math.ceil(y + 2.5 * LINE)
    head = (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
            f'height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Arial, Helvetica, '
            f'sans-serif" font-size="10">\n{_ARROWHEAD}\n<rect width="100%" height="100%" fill="white"/>')
    return "\n".join([head, *body, "</svg>\n"])


def nice_ticks(lo: float, hi: float, count: int = TICKS) -> list[float]:
    """About ``count`` round values in ``lo``…``hi``, a 1, 2 or 5 × 10^k step apart."""
    raw = (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def tick_label(value: float, ticks: list[float]) -> str:
    """``value`` with as many decimals as the step between ``ticks`` needs (none for steps of 1 or more)."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    return f"{value:.{max(0, -math.floor(math.log10(step)))}f}"


def _panel(view: RunView, axis: Axis, top: float, begin: float, end: float, arrows: bool) -> list[str]:
    """One view's plot at ``top``: grid, lane labels, bars, tile numbers, arrows, makespan and frame; the group
    carries its scale (``data-cycle0``, ``data-x0``, ``data-scale``: x = x0 + (cycle − cycle0) · scale)."""
    rows = {lane: top + (i + 0.5) * ROW for i, lane in enumerate(view.lanes)}
    bottom = top + ROW * len(view.lanes)
    out = [f'<g class="panel" data-cycle0="{axis.lo!r}" data-x0="{axis.left!r}" data-scale="{axis.scale!r}">',
           *_grid(axis, top, bottom), *_lane_labels(rows, axis.left),
           *_bars(view, axis, rows), *_tile_labels(labelled(view, begin, end), axis, rows, view.per_unit)]
    out += _arrows(shown_arrows(view, arrows), axis, rows)
    if makespan_drawn(view, axis.hi):
        x = _n(axis.x(view.summary["total_cycles"]))
        out.append(f'<line class="makespan" x1="{x}" y1="{_n(top)}" x2="{x}" y2="{_n(bottom)}" stroke="black" '
                   f'stroke-width="1" stroke-dasharray="5 3"/>')
    out.append(f'<rect class="frame" x="{_n(axis.left)}" y="{_n(top)}" width="{_n(axis.right - axis.left)}" '
               f'height="{_n(bottom - top)}" fill="none" stroke="black" stroke-width="0.8"/>')
    return [*out, "</g>"]


def _bars(view: RunView, axis: Axis, rows: dict[str, float]) -> list[str]:
    """A ``<rect class="bar">`` per bar, in its lane's band, with its details as tooltip in smaller views."""
    outline = ' stroke="white" stroke-width="0.4"' if len(view.bars) < MAX_OUTLINED else ""
    tooltips, per_unit = len(view.bars) <= MAX_TOOLTIPS, view.per_unit
    out = [f'<g class="bars"{outline}>']
    for b in view.bars:
        offset, height = band(b.stage, per_unit)
        rect = (f'<rect class="bar" x="{_n(axis.x(b.start))}" y="{_n(rows[b.lane] + offset * ROW)}" '
                f'width="{_n((b.end - b.start) * axis.scale)}" height="{_n(height * ROW)}" '
                f'fill="{STAGES[b.stage][1]}"')
        out.append(f"{rect}><title>{_tooltip(b)}</title></rect>" if tooltips else f"{rect}/>")
    return [*out, "</g>"]


def _tooltip(bar: Bar) -> str:
    """A bar's details, a line each, as XML character data."""
    return _text(bar.text.replace("<br>", "\n"))


def _tile_labels(bars: list[Bar], axis: Axis, rows: dict[str, float], per_unit: bool) -> list[str]:
    """Each bar's tile number in white, centred on the bar."""
    out = ['<g class="tiles" font-size="8" fill="white" text-anchor="middle">']
    for b in bars:
        offset, height = band(b.stage, per_unit)
        y = rows[b.lane] + (offset + height / 2) * ROW
        out.append(f'<text x="{_n(axis.x((b.start + b.end) / 2))}" y="{_n(y)}" dy="0.35em">{b.tile}</text>')
    return [*out, "</g>"]


def _arrows(arrows: list[tuple[str, float, str, float]], axis: Axis, rows: dict[str, float]) -> list[str]:
    """FIFO hand-offs: a line with an arrowhead from the producer's lane and end to the consumer's start."""
    out = ['<g class="arrows" stroke="#444444" stroke-width="0.6" opacity="0.6">']
    out += [f'<line x1="{_n(axis.x(t_a))}" y1="{_n(rows[lane_a])}" x2="{_n(axis.x(t_b))}" y2="{_n(rows[lane_b])}" '
            f'marker-end="url(#head)"/>' for lane_a, t_a, lane_b, t_b in arrows]
    return [*out, "</g>"]


def _grid(axis: Axis, top: float, bottom: float) -> list[str]:
    """Light vertical lines at the cycle ticks."""
    out = ['<g class="grid" stroke="#b0b0b0" stroke-opacity="0.3" stroke-width="0.8">']
    out += [f'<line x1="{_n(axis.x(t))}" y1="{_n(top)}" x2="{_n(axis.x(t))}" y2="{_n(bottom)}"/>'
            for t in nice_ticks(axis.lo, axis.hi)]
    return [*out, "</g>"]


def _lane_labels(rows: dict[str, float], left: float) -> list[str]:
    """The lane names, right-aligned left of the plot, one per row."""
    out = ['<g class="lanes" font-size="9" text-anchor="end">']
    out += [f'<text x="{_n(left - 6)}" y="{_n(y)}" dy="0.35em">{_text(lane)}</text>' for lane, y in rows.items()]
    return [*out, "</g>"]


def _cycle_axis(axis: Axis, bottom: float) -> list[str]:
    """Tick marks and values in cycles below the last panel, named "cycles"."""
    ticks = nice_ticks(axis.lo, axis.hi)
    return _ticks(axis, "cycles", [(axis.x(t), tick_label(t, ticks)) for t in ticks], bottom, 1, "cycles")


def _us_axis(axis: Axis, clock_mhz: float, top: float) -> list[str]:
    """Tick marks and values in µs (cycles / clock) above the first panel."""
    ticks = nice_ticks(axis.lo / clock_mhz, axis.hi / clock_mhz)
    return _ticks(axis, "us", [(axis.x(t * clock_mhz), tick_label(t, ticks)) for t in ticks], top, -1,
                  f"µs at {clock_mhz:.0f} MHz")


def _ticks(axis: Axis, name: str, ticks: list[tuple[float, str]], edge: float, side: int, title: str) -> list[str]:
    """An axis along the plot's edge at ``edge``: tick marks pointing away from it (``side`` +1 down, −1 up),
    their values, then the axis title, centred."""
    values = edge + (LINE if side > 0 else -8)
    out = [f'<g class="axis {name}" text-anchor="middle">']
    for x, label in ticks:
        out.append(f'<line x1="{_n(x)}" y1="{_n(edge)}" x2="{_n(x)}" y2="{_n(edge + 4 * side)}" stroke="black" '
                   f'stroke-width="0.8"/>')
        out.append(f'<text x="{_n(x)}" y="{_n(values)}">{_text(label)}</text>')
    out.append(f'<text x="{_n((axis.left + axis.right) / 2)}" y="{_n(values + side * (LINE + 4))}" '
               f'font-size="11">{_text(title)}</text>')
    return [*out, "</g>"]


def _title(text: str, left: float, top: float) -> str:
    """A panel's title, its lines left-aligned with the plot."""
    lines = "".join(f'<tspan x="{_n(left)}" y="{_n(top + (i + 1) * LINE)}">{_text(line)}</tspan>'
                    for i, line in enumerate(text.split("\n")))
    return f'<text class="title" font-size="11">{lines}</text>'


def _legend() -> list[str]:
    """One colour swatch and name per stage, in a row at the top right."""
    widths = [34 + 5.8 * len(name) for name, _ in STAGES.values()]
    x = WIDTH - RIGHT - sum(widths)
    out = ['<g class="legend">']
    for (name, colour), width in zip(STAGES.values(), widths):
        out.append(f'<rect x="{_n(x)}" y="8" width="14" height="10" fill="{colour}"/>'
                   f'<text x="{_n(x + 18)}" y="17">{_text(name)}</text>')
        x += width
    return [*out, "</g>"]


def _n(value: float) -> str:
    """A coordinate in pixels, to 1/100 px."""
    return f"{value:.2f}"


def _text(value: str) -> str:
    """``value`` as XML character data (characters XML cannot hold become U+FFFD)."""
    return escape(_NOT_XML.sub("\ufffd", value), quote=False)  # &, <, > as in XML
