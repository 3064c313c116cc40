"""A finished run in memory: :class:`Result`, what ``tfa_sim.run`` returns, and :class:`Events`, its event log;
:class:`ProfileResult`, what ``tfa_sim.profile`` returns.

Everything a run directory would hold is here without a file: the summary (``summary.json``'s dict), the
output ``o``, the event log as a table; :meth:`Result.save` writes the run directory when wanted, and a
notebook shows the headline figures and a small timeline (:meth:`Result._repr_html_`).
"""
from __future__ import annotations

from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tfa_sim.api import runner
from tfa_sim.rundir.event_table import event_table
from tfa_sim.rundir.events import EventLog
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.extras import require
from tfa_sim.views.svg_timeline import svg_text
from tfa_sim.views.timeline import figure, make_view

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from matplotlib.figure import Figure

#: The notebook view draws core 0, and only its first tiles when it has more events than this.
REPR_EVENTS = 4000
REPR_TILES = (0, 4)


def _profile_view() -> Any:
    """tfa_sim.views.profile, imported when a profile is shown: a run needs none of the board readers it brings."""
    from tfa_sim.views import profile

    return profile


class Events:
    """The event log of a run (what ``events.npz`` holds): one row per instruction group or dispatch span."""

    def __init__(self, log: EventLog) -> None:
        self.log = log  # the columnar log itself (tfa_sim.rundir.events)

    def __len__(self) -> int:
        return len(self.log)

    def to_arrow(self) -> pa.Table:
        """The events as a ``pyarrow.Table`` (the columns of :mod:`tfa_sim.rundir.event_table`, names as text)."""
        require("Events.to_arrow()", "pyarrow")
        return event_table(self.log)

    def to_pandas(self) -> pd.DataFrame:
        """The events as a pandas DataFrame, one row per event, unit, pipe, stage and kind as strings."""
        require("Events.to_pandas()", "pandas", "pyarrow")
        return event_table(self.log).to_pandas()


class Result:
    """One simulated run: its headline figures, ``summary`` (the dict of ``summary.json``), the output ``o``
    (fp32 ``[batch, heads, S0, HEAD]``; None without numerics) and ``events`` (None without the event log)."""

    def __init__(self, done: runner.Computed) -> None:
        self._done = done
        log = done.sim.stats.events
        self.events = Events(log) if log is not None else None

    @property
    def config(self) -> Config:
        return self._done.config

    @property
    def summary(self) -> dict[str, Any]:
        return self._done.summary

    @property
    def time_us(self) -> float:
        return self.summary["time_us"]

    @property
    def total_cycles(self) -> float:
        return self.summary["total_cycles"]

    @property
    def o(self) -> np.ndarray | None:
        numerics = self._done.numerics
        return numerics.out if numerics is not None else None

    @property
    def passed(self) -> bool:
        """False only when numerics ran and the output failed the kernel's comparison rule."""
        return runner.passed(self.summary)

    @property
    def out_dir(self) -> Path | None:
        """The run directory written (``out=`` or :meth:`save`), None while there is none."""
        return self._done.out_dir

    def save(self, out: str | Path) -> Path:
        """Write the run directory ``out`` (what ``tfa-sim run --out`` writes; the directory's rules,
        docs/guide/safety.md, apply) and return its path."""
        return runner.write(self._done, out)

    def timeline(self, *, by: str | None = None, cores: Iterable[int] | None = None,
                 tiles: tuple[int, int] | None = None, arrows: bool = False) -> Figure:
        """The Gantt chart of ``tfa-sim timeline`` as a matplotlib Figure: ``by`` pipe, stage or unit, only
        ``cores`` and logical tiles ``a ≤ t < b`` if given, FIFO hand-offs as ``arrows``."""
        require("Result.timeline()", "matplotlib")
        return figure([self._view(by, None if cores is None else set(cores), tiles, arrows)], arrows)

    def _view(self, by: str | None, cores: set[int] | None, tiles: tuple[int, int] | None, arrows: bool) -> Any:
        if self.events is None:
            raise InputError("the run has no event log (event_log=False): run it with the log to draw it")
        log = self.events.log
        name = self.out_dir.name if self.out_dir else self.config.name
        return make_view(name, self.summary, log.records(log.window(cores, tiles)), by, cores, tiles, arrows)

    def _repr_html_(self) -> str:
        """For notebooks: the headline figures, then the timeline of core 0."""
        s = self.summary
        golden = s.get("golden")
        rows = [("case", s["case"]), ("hardware", f"{s['hardware']}, {s['cores_used']} cores, {s['blocks']} blocks"),
                ("time", f"{s['time_us']:.2f} µs = {s['total_cycles']:.0f} cycles at {s['clock_mhz']:.0f} MHz"),
                ("TFLOPS", f"{s['tflops']:.2f} ({s['normalized_tflops']:.2f} normalised to 24 cores)"),
                ("bound pipe", s["bound_pipe"]),
                ("golden", "timing only" if golden is None else "PASS" if golden["passed"] else "FAIL")]
        table = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>"
                        f"{escape(str(v))}</td></tr>" for k, v in rows)
        html = f"<table>{table}</table>"
        if self.events is not None:
            core0 = self.events.log.window([0], None)
            view = self._view("pipe", {0}, REPR_TILES if len(core0) > REPR_EVENTS else None, False)
            svg = svg_text([view]).split("\n", 1)[1]  # without the XML declaration
            html += f"<div style='overflow-x:auto'>{svg}</div>"
        return html


class ProfileResult:
    """A board's profile beside the model (``tfa_sim.profile``): ``report`` is what profile.json holds —
    ``task_duration_us`` (the board's), ``model_us`` and ``model_interval_us``, ``pipes`` (per pipe ``board_us``,
    ``model_us``, ``ratio`` …), ``largest`` and ``findings``; ``to_pandas()`` is the table, ``figure()`` the
    per-pipe bar chart, ``save(dir)`` writes what ``tfa-sim profile`` writes; a notebook shows the table."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self.out_dir: Path | None = None

    @property
    def task_duration_us(self) -> float:
        return self.report["task_duration_us"]

    @property
    def model_us(self) -> float:
        return self.report["model_us"]

    @property
    def largest(self) -> list[str]:
        """The compared pipes, the board/model ratio furthest from 1 first."""
        return self.report["largest"]

    @property
    def findings(self) -> list[str]:
        return self.report["findings"]

    def to_pandas(self) -> pd.DataFrame:
        """The table: the task, then a row per pipe (board and model µs per core with their spread, ratio, note)."""
        require("ProfileResult.to_pandas()", "pandas")
        import pandas as pd

        return pd.DataFrame(_profile_view().table_rows(self.report)).set_index("pipe")

    def figure(self) -> Figure:
        """The per-pipe bar chart (profile.png) as a matplotlib Figure."""
        require("ProfileResult.figure()", "matplotlib")
        return _profile_view().figure(self.report)

    def save(self, out: str | Path | None) -> Path:
        """Write profile.json, profile.png and profile.svg into ``out`` (None: a new ``runs/profile-<case>-<time>``)
        by the directory rules of docs/guide/safety.md; returns the directory."""
        self.out_dir = _profile_view().write_profile(self.report, out)
        return self.out_dir

    def __repr__(self) -> str:
        return (f"ProfileResult({self.report['op_name']}: task {self.task_duration_us:.3f} µs, model "
                f"{self.model_us:.3f} µs, largest {self.largest[:3]})")

    def _repr_html_(self) -> str:
        return _profile_view().html(self.report)
