"""The Gantt figure every timeline renderer draws: stages and their colours, bars, one run's view, and the
layout rules they share (time range, bar bands, tile labels, arrows, titles), so SVG and PNG agree."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfa_sim.views.figures import finite, label, limits, span

STAGES = {"compute_qk": ("QK", "#4C72B0"), "compute_p": ("P", "#DD8452"), "compute_pv": ("PV", "#55A868"),
          "compute_gu": ("GU", "#C44E52"), "epilogue": ("end", "#8C8C8C"),
          "dispatch": ("dispatch", "#BBBBBB"), "combine": ("combine", "#8172B3")}
#: Views with more bars than this carry no tile numbers (they would overlap into noise).
MAX_LABELS = 600
#: More FIFO hand-off arrows than this are left out (they would hide the bars).
MAX_ARROWS = 400
#: Bars get a thin white outline (to tell neighbours apart) below this many per view; beyond, it hides them.
MAX_OUTLINED = 2000
#: The time axis runs this share of the drawn span beyond the first and the last bar.
MARGIN = 0.02
#: A bar carries its tile number when at least this share of the drawn span wide.
MIN_LABEL_WIDTH = 0.012
#: The stages drawn in the upper half of a ``--by unit`` lane (the rest go below).
UPPER_STAGES = ("compute_qk", "compute_p")


@dataclass(frozen=True)
class Bar:
    lane: str
    start: float
    end: float
    stage: str
    tile: int
    text: str  # hover / tooltip


@dataclass
class RunView:
    """What one run contributes to a figure."""

    name: str
    summary: dict[str, Any]
    lanes: list[str]
    bars: list[Bar]
    arrows: list[tuple[str, float, str, float]]  # (lane from, time, lane to, time)
    whole: bool = True  # every tile shown (no --tiles window): the run's end belongs on the axis

    def __post_init__(self) -> None:
        """Only what can be drawn (:mod:`tfa_sim.views.figures`): bars with finite ends and a length, arrows
        between finite times; every renderer draws these."""
        self.bars = [b for b in self.bars if span(b.start, b.end) is not None]
        self.arrows = [a for a in self.arrows if finite(a[1]) is not None and finite(a[3]) is not None]

    @property
    def clock_mhz(self) -> float:
        return self.summary["clock_mhz"]

    @property
    def title(self) -> str:
        c = self.summary["config"]
        s, t = c["schedule"], c["tiling"]
        return (f"{self.summary['case']} on {self.summary['hardware']} — qk_preload {s['qk_preload']}, "
                f"cv_fifo_size {s['cv_fifo_size']}, period {s['cv_fifo_cons_sync_period']}, "
                f"CUBE_S0 {t['cube_s0']} TILE_S1 {t['tile_s1']}")

    @property
    def makespan(self) -> str:
        return (f"makespan {label(self.summary['total_cycles'], '.0f')} cycles = "
                f"{label(self.summary['time_us'])} µs")

    @property
    def panel_title(self) -> str:
        """The two lines above the view's panel: the configuration, then the makespan and the first bar."""
        first = min((b.start for b in self.bars), default=None)
        return (f"{self.title}\n{self.makespan}; first bar at cycle {label(first, '.0f')} (core starts and block "
                f"dispatch drawn; the stream's launch gap before cycle 0 is not)")

    @property
    def per_unit(self) -> bool:
        """True for ``--by unit`` lanes (no pipe or stage after the unit), which split into two halves."""
        return all(" " not in lane for lane in self.lanes)


def bar_span(views: list[RunView]) -> tuple[float, float]:
    """The first bar's start and the last bar's end over stacked views, or a view's makespan when it shows every
    tile — the kernel ends when the AIC sees the block-end flag, ``sync.flag_latency`` after the last bar (one
    shared time axis; the stream's launch gap before the first bar is not drawn)."""
    starts = [b.start for v in views for b in v.bars]
    ends = [b.end for v in views for b in v.bars]
    ends += [end for v in views if v.whole and (end := finite(v.summary.get("total_cycles"))) is not None]
    return limits(min(starts, default=None), max(ends, default=None))


def axis_limits(begin: float, end: float) -> tuple[float, float]:
    """The drawn cycles: the bars' span with a margin either side (finite and increasing, whatever the span)."""
    begin, end = limits(begin, end)
    margin = (end - begin) * MARGIN
    return limits(begin - margin, end + margin)


def band(stage: str, per_unit: bool) -> tuple[float, float]:
    """A bar's top and height in lane units, relative to its lane's centre: the whole lane, or under
    ``--by unit`` the upper half for QK/P and the lower half for the rest."""
    if not per_unit:
        return -0.4, 0.8
    return (-0.4, 0.4) if stage in UPPER_STAGES else (0.0, 0.4)


def labelled(view: RunView, begin: float, end: float) -> list[Bar]:
    """The bars wide enough, against the span ``begin``…``end`` of all bars drawn, to carry their tile number
    (none in crowded views; a dispatch belongs to no tile)."""
    if len(view.bars) > MAX_LABELS:
        return []
    min_width = (end - begin) * MIN_LABEL_WIDTH
    return [b for b in view.bars if b.end - b.start >= min_width and b.tile >= 0]


def shown_arrows(view: RunView, arrows: bool) -> list[tuple[str, float, str, float]]:
    """The hand-off arrows to draw: all of them when asked for and not too many, else none."""
    return view.arrows if arrows and len(view.arrows) <= MAX_ARROWS else []


def makespan_drawn(view: RunView, hi: float) -> bool:
    """True when the view's makespan lies within the drawn cycles (up to ``hi``), where it gets its dashed line."""
    end = finite(view.summary.get("total_cycles"))
    return end is not None and end <= hi
