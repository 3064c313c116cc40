"""Measured launches: the points ``tfa-sim calibrate`` fits to, and what the model predicts for each.

A point (:class:`Point`, one CSV row) says which build of the kernel ran (``kernel``: a shipped build, ``manual``,
``jit`` or ``dsl``, or the path of a bundle file, relative to the CSV; docs/kernel.md, "Builds") with which design
choices (the bundle's, or a column named after a choice, ``stage_order`` say, where one differs), on which board
(``preset``), its shape and schedule, and what was measured (``timing``, docs/calibration.md, "What a measurement
includes"):

* ``kernel`` — an in-kernel counter, first block's start to last block's end: the model's kernel time;
* ``task`` — msprof's Task Duration, which the kernel time stands for (docs/timing.md);
* ``stream`` — the mean period of back-to-back launches on one stream: the kernel time plus the launch gap of
  the ``host`` class driving it (the mean of both classes' gaps when the source does not name the host);
* ``sync`` — the host clock around one launch and a device synchronise: the kernel time plus the host's
  launch-and-synchronise overhead (``launch.host_sync``);
* ``unknown`` — the source does not say; ``timing_evidence`` names the timing the evidence points to, or
  the timings it leaves possible (``kernel|stream``), of which the fit compares with the one nearer the
  measured time (docs/calibration.md, "Rows of unknown timing").

The builds share one parameter set: they differ in mechanisms (launch grid, prefetch, stage order), not in
fitted values, so one fit takes the points of all of them.  A point is identified by its resolved choices, not by
its build's name: a user's own bundle calibrates as a shipped one does.

A CSV may also be in the board tables' own columns (``card`` for ``preset``, ``units`` and ``grid`` for
``blocks``, ``s1_split``; :func:`_from_table`): a card names its preset (:data:`CARD_PRESETS`), ``units`` must be
the launch's work units (S0/CUBE_S0 · s1_split) and ``grid`` its Block Dim, and a row of unknown timing with no
``timing_evidence`` may have measured any figure such a table reports (:data:`TABLE_EVIDENCE`).
"""
from __future__ import annotations

import csv
import dataclasses
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tfa_sim.spec.builds import build_defaults, is_path, load_bundle
from tfa_sim.spec.choices import spell
from tfa_sim.spec.config import CHOICE_KEYS, CONFIG_DIR, Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.geometry import Dispatch, Geometry
from tfa_sim.spec.hardware import HOSTS, Hardware, load_hardware, preset_names
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import KernelPlan, kernel_plan

#: The shipped points: the JIT build's one-wave launches and the three builds on the full chip.
POINTS_FILES = (CONFIG_DIR / "calibration" / "points.csv", CONFIG_DIR / "calibration" / "points_fullchip.csv")
#: What a point may have measured; ``unknown`` needs ``timing_evidence`` (one of the others).
TIMINGS = ("kernel", "task", "stream", "sync", "unknown")
#: Board-table cards that are not preset names: the DSL README's "A3-class, 24 cube cores" reference card runs
#: on the 910b2 preset (24 cube cores at 1.8 GHz, like the 910B2 rows of the same port; one preset per card).
CARD_PRESETS = {"a3_24": "910b2"}
#: What a board-table row of unknown timing may have measured when it names no evidence: any of its timings
#: (the fit compares with the figure nearest the measured time, and the report names it).
TABLE_EVIDENCE = "kernel|stream|sync"


@dataclass(frozen=True)
class Point:
    """One measured launch (a CSV row; :data:`COLUMNS` with their defaults)."""

    preset: str
    kernel: str  # the build that ran: a shipped build's name or a bundle file's resolved path
    timing: str
    host: str
    head: int
    s0: int
    s1: int
    cube_s0: int
    cube_s1: int
    tile_s1: int
    qk_preload: int
    cv_fifo_size: int
    sync_period: int
    causal: bool
    time_us: float
    cores: int = 0  # 0: all of the preset's
    timing_evidence: str = ""  # an unknown timing: what the source's evidence points to (a|b: either)
    source: str = ""  # where the row comes from (reports only)
    s1_split: int = 1  # S1 chunks per row block (the port's KV_SPLIT), merged by a second launch
    choices: tuple[tuple[str, Any], ...] = ()  # every design choice it ran with (the bundle's, or its columns')

    def config(self, **hardware: Any) -> Config:
        return build_config({"case": {"head": self.head, "s0": self.s0, "s1": self.s1, "causal": self.causal},
                             "tiling": {"cube_s0": self.cube_s0, "cube_s1": self.cube_s1, "tile_s1": self.tile_s1},
                             "schedule": {"qk_preload": self.qk_preload, "cv_fifo_size": self.cv_fifo_size,
                                          "cv_fifo_cons_sync_period": self.sync_period,
                                          "s1_split": self.s1_split},
                             "hardware": {"preset": self.preset, "cores": self.cores, **hardware},
                             "kernel": {"build": self.kernel, **dict(self.choices)}, "numerics": {"enabled": False}})

    def plan(self, values: dict[str, float] | None = None) -> KernelPlan:
        """The point's kernel plan on its preset (with fitted ``values``), its cores applied."""
        return kernel_plan(self.config(), base_preset(self.preset).with_values(values or {}))

    @property
    def launch(self) -> Dispatch:
        """The point's launch (its units, cores and waves: the plan's geometry)."""
        return geometry_of(self).main

    @property
    def row_blocks(self) -> int:
        """The launch's row blocks (S0/CUBE_S0 for one head: its units over the S1 chunks)."""
        geometry = geometry_of(self)
        return geometry.main.units // geometry.chunks

    @property
    def build(self) -> str:
        """The build's name in reports: a shipped build's, or its bundle file's stem."""
        return Path(self.kernel).stem if is_path(self.kernel) else self.kernel

    @property
    def timings(self) -> tuple[str, ...]:
        """The timings the point may have measured: ``timing``, or for an unknown one its evidence's."""
        return tuple(self.timing_evidence.split("|")) if self.timing == "unknown" else (self.timing,)

    @property
    def shape(self) -> tuple:
        """What the simulation depends on: everything but the host and the measurement."""
        return (self.preset, self.kernel, self.choices, self.head, self.s0, self.s1, self.cube_s0, self.cube_s1,
                self.tile_s1, self.qk_preload, self.cv_fifo_size, self.sync_period, self.causal, self.cores,
                self.s1_split)

    @property
    def label(self) -> str:
        host = f" {self.host}" if self.host else ""
        timing = f"{self.timing}→{self.timing_evidence}" if self.timing == "unknown" else self.timing
        split = f" split {self.s1_split}" if self.s1_split != 1 else ""
        return f"{self.preset} {self.build} {timing}{host} S0={self.s0} S1={self.s1}{split}"


@cache
def geometry_of(point: Point) -> Geometry:
    """The launch geometry of ``point`` on its preset (cached: reports and the fit's order read it often)."""
    return point.plan().geometry


#: Columns a points CSV may have: None marks the required ones, else the default (the manual build's; for the
#: columns of :data:`BUILD_COLUMNS` an empty cell takes the row's build's, as its config would); besides these, a
#: column named after a design choice (:data:`~tfa_sim.spec.config.CHOICE_KEYS`) sets it where its cell is not empty.
COLUMNS: dict[str, Any] = {"preset": None, "kernel": None, "timing": None, "host": "", "blocks": None,
                           "head": None, "s0": None, "s1": None, "cube_s0": 128, "cube_s1": 128, "tile_s1": 256,
                           "qk_preload": 4, "cv_fifo_size": 8, "sync_period": 4, "causal": "false",
                           "time_us": None, "cores": 0, "timing_evidence": "", "source": "", "s1_split": 1}
#: The columns a build gives its own default for (its bundle, spec.builds), with their config keys.
BUILD_COLUMNS = {"tile_s1": ("tiling", "tile_s1"), "qk_preload": ("schedule", "qk_preload"),
                 "sync_period": ("schedule", "cv_fifo_cons_sync_period")}


@cache
def base_preset(name: str) -> Hardware:
    return load_hardware(build_config({"hardware": {"preset": name}}).hardware)


def figure(p: Point, how: str, kernel_us: float, values: dict[str, float]) -> float:
    """The model's figure for timing ``how`` of ``p`` given its kernel time and the launch values (``launch.*``,
    cycles): the kernel time, plus the host's gap (stream) or synchronise overhead (sync)."""
    clock = base_preset(p.preset).clock_mhz
    if how == "stream":
        gaps = [values[f"launch.gap_{h}"] for h in ((p.host,) if p.host else HOSTS)]
        return kernel_us + sum(gaps) / len(gaps) / clock
    if how == "sync":
        return kernel_us + values["launch.host_sync"] / clock
    return kernel_us


def measured_as(p: Point, kernel_us: float, values: dict[str, float]) -> str:
    """The timing of ``p`` the model compares with: its own, or of several possible the one whose figure is
    nearest the measured time."""
    return min(p.timings, key=lambda how: abs(figure(p, how, kernel_us, values) - p.time_us))


def predicted(p: Point, kernel_us: float, values: dict[str, float]) -> float:
    """What ``p`` measures given the model's kernel time and the launch values."""
    return figure(p, measured_as(p, kernel_us, values), kernel_us, values)


def _typed(text: Any, kind: str) -> Any:
    """A CSV cell as its column's type (a default is already typed text)."""
    text = str(text)
    return text.lower() == "true" if kind == "bool" else float(text) if kind == "float" else \
        int(text) if kind == "int" else text


def _check(point: Point, blocks: str, where: str) -> None:
    """The row's values make sense together; else one line naming the column."""
    if point.timing not in TIMINGS:
        raise InputError(f"{where}: timing {point.timing!r} must be one of {', '.join(TIMINGS)}")
    known = [t for t in TIMINGS if t != "unknown"]
    if point.timing == "unknown" and not set(point.timing_evidence.split("|")) <= set(known):
        raise InputError(f"{where}: timing unknown needs timing_evidence, the timing its source's evidence points "
                         f"to ({', '.join(known)}) or those it leaves possible, as kernel|stream")
    if point.host not in ("", *HOSTS):
        raise InputError(f"{where}: host {point.host!r} must be empty or one of {', '.join(HOSTS)}")
    if not (math.isfinite(point.time_us) and point.time_us > 0):
        raise InputError(f"{where}: time {point.time_us} µs; times must be > 0")
    if not 1 <= point.s1_split <= point.s1 // max(1, point.tile_s1):
        raise InputError(f"{where}: s1_split {point.s1_split} must be 1 … S1/TILE_S1 = "
                         f"{point.s1 // max(1, point.tile_s1)} (a chunk holds at least one tile)")


def _cell(text: str) -> Any:
    """A choice column's cell as a config value: a TOML literal (``true``, ``3``) or a bare word."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except ValueError:
        return text


def _parse_row(row: dict[str, str], where: str, here: Path | None = None) -> Point:
    """One CSV row as a :class:`Point` (``here``: the CSV's directory, which a bundle path is relative to)."""
    required = ", ".join(k for k, d in COLUMNS.items() if d is None)
    values: dict[str, Any] = {}
    for name, default in COLUMNS.items():
        text = (row.get(name) or "").strip()
        if not text and default is None:
            raise InputError(f"{where}: column {name} is empty or missing; a point needs {required}")
        values[name] = text or default
    if is_path(values["kernel"]) and here is not None and not Path(values["kernel"]).is_absolute():
        values["kernel"] = str((here / values["kernel"]).resolve())
    s1 = values["s1"]
    if s1.isdigit():
        try:
            built = build_defaults({"kernel": {"build": values["kernel"]}, "case": {"s1": int(s1)}})
        except InputError as exc:
            raise InputError(f"{where}: {str(exc).removeprefix('config error: ')}") from None
        for name, key in BUILD_COLUMNS.items():
            if not (row.get(name) or "").strip() and key in built:
                values[name] = built[key]
    given = tuple((key, _cell(row[key].strip())) for key in CHOICE_KEYS if (row.get(key) or "").strip())
    try:
        fields = {f.name: _typed(values[f.name], str(f.type)) for f in dataclasses.fields(Point) if f.name != "choices"}
        point = Point(**fields, choices=given)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: {exc}; numbers where numbers are due") from None
    _check(point, values["blocks"], where)
    try:
        config = point.config()  # a point the model cannot run is refused here, with the rule it breaks
    except InputError as exc:
        raise InputError(f"{where}: {str(exc).removeprefix('config error: ')}") from None
    point = dataclasses.replace(point, choices=tuple((key, getattr(config.kernel, key)) for key in CHOICE_KEYS))
    if values["blocks"] != str(point.row_blocks):
        raise InputError(f"{where}: blocks {values['blocks']} is not S0/CUBE_S0 = {point.row_blocks} (the "
                         f"launch's row blocks)")
    return point


def choice_words(points: Sequence[Point]) -> list[str]:
    """The design choices' values among ``points``, as ``key=value`` (a preset's ``calibration.choices``)."""
    return sorted({f"{key}={spell(value)}" for p in points for key, value in p.choices})


def _from_table(row: dict[str, str], where: str) -> dict[str, str]:
    """A board-table row (``card``, ``units``, ``grid``, ``s1_split``) as a points row: the card's preset, the
    row blocks ``units / s1_split``, and :data:`TABLE_EVIDENCE` for an unknown timing that names none."""
    card = (row.get("card") or "").strip()
    preset = CARD_PRESETS.get(card, card)
    if preset not in preset_names():
        raise InputError(f"{where}: card {card!r} has no preset; cards are {', '.join(preset_names())} and "
                         f"{', '.join(CARD_PRESETS)}, or name the preset in a preset column")
    units, split = ((row.get(name) or "").strip() for name in ("units", "s1_split"))
    split = split or "1"
    if not (units.isdigit() and split.isdigit() and int(split) >= 1 and int(units) % int(split) == 0):
        raise InputError(f"{where}: units {units!r} must be a whole number of row blocks times s1_split "
                         f"{split!r} (units = S0/CUBE_S0 · s1_split)")
    out = {**row, "preset": preset, "blocks": str(int(units) // int(split)), "s1_split": split}
    if out.get("timing", "").strip() == "unknown" and not (out.get("timing_evidence") or "").strip():
        out["timing_evidence"] = TABLE_EVIDENCE
    return out


def _check_grid(point: Point, grid: str, where: str) -> None:
    """A board-table row's ``grid`` is the Block Dim the point's build launches (its launch geometry's): its work
    units, or a persistent grid's min(units, cores)."""
    launch = point.launch
    cores = launch.cores if launch.persistent else point.cores or base_preset(point.preset).cube_cores
    if grid and grid != str(launch.grid):
        how = "min(units, cores)" if launch.persistent else "one block per unit"
        raise InputError(f"{where}: grid {grid}, but kernel {point.kernel} launches {launch.grid} ({how} for "
                         f"{launch.units} units on {cores} cores); check the row's kernel, units and card")


def load_points(path: str | Path) -> list[Point]:
    """The points of a CSV (``#`` lines are comments): in :data:`COLUMNS`, or in the board tables' own
    (:func:`_from_table`)."""
    path = Path(path)
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"calibration points {path} cannot be read ({exc}); give a CSV with columns "
                         f"{','.join(COLUMNS)}") from None
    reader = csv.DictReader(lines)
    table = "card" in (reader.fieldnames or ()) and "preset" not in (reader.fieldnames or ())
    unknown = [c for c in reader.fieldnames or () if not table and c not in COLUMNS and c not in CHOICE_KEYS]
    if unknown:  # a column read by nothing would be a setting the fit never saw
        raise InputError(f"calibration points {path}: column {unknown[0]!r} is not one a points file takes (its "
                         f"columns: {', '.join(COLUMNS)}, and the design choices: {', '.join(CHOICE_KEYS)}); "
                         f"give other settings in a bundle named in the kernel column")
    points = []
    here = path.resolve().parent
    for i, row in enumerate(reader, start=1):
        where = f"calibration points {path} row {i}"
        point = _parse_row(_from_table(row, where) if table else row, where, here)
        if table:
            _check_grid(point, (row.get("grid") or "").strip(), where)
        points.append(point)
    if not points:
        raise InputError(f"calibration points {path} holds no rows; add measured points under the header")
    return points


def select_points(paths: Sequence[str | Path] = (), exclude: Sequence[int] = (),
                  kernel: str | None = None) -> list[Point]:
    """The points of ``paths`` (none given: the shipped ones, :data:`POINTS_FILES`), in order, without the
    1-based data rows ``exclude`` (counted over all the files), of build ``kernel`` when given (a shipped build's
    name or a bundle file's path: the points that ran it)."""
    points = [p for path in (paths or POINTS_FILES) for p in load_points(path)]
    bad = [row for row in exclude if not 1 <= row <= len(points)]
    if bad:
        raise InputError(f"--exclude {bad[0]}: rows are 1…{len(points)} (the data rows of the points files, in "
                         f"the order given)")
    kept = [p for i, p in enumerate(points, start=1) if i not in set(exclude)]
    if kernel is not None:
        try:
            load_bundle(kernel)  # a shipped build or a readable bundle file, else one line
        except InputError as exc:
            raise InputError(f"--kernel: {str(exc).removeprefix('config error: ')}") from None
        build = str(Path(kernel).resolve()) if is_path(kernel) else kernel
        kept = [p for p in kept if p.kernel == build]
    if not kept:
        raise InputError("no point left to fit (--exclude or --kernel took them all); exclude fewer rows")
    return kept
