"""``tfa-sim calibrate``: fit the timing model's free parameters to measured launches of one kernel revision.

Fitted (:data:`FITTED`, each physical and bounded, docs/calibration.md): the chip's L2 bandwidth and the
cross-core flag latency, searched; the stagger between core starts and each host class's launch gap, which
enter a launch's time (almost) linearly and are solved by a linear program for every searched candidate.
Everything else in a preset is a documented figure.

A point (:class:`Point`, one CSV row) says what it measured: ``timing`` ``kernel`` (an in-kernel counter: the
kernel time), ``task`` (msprof's Task Duration, which the model's kernel time stands for: docs/timing.md) or
``stream`` (the mean period of back-to-back launches: kernel time plus the launch gap of its ``host`` class), and
which ``kernel`` revision ran.  One fit describes one revision: a file mixing revisions
needs ``--kernel``.

The search is deterministic and starts from no preset value: a log-spaced grid over the two searched
parameters' bounds (the core stagger solved linearly with the gaps), then a finer grid around the best node
with that stagger inside the simulations, each searched parameter then polished between its fine neighbours
(Brent's method).  Each node simulates every distinct launch once (cached); the gaps
are solved per node; the node whose errors are all within :data:`MAX_ERROR` (when any is) with the lowest mean
absolute percentage error wins, and its predictions are the full model's.
Cross-validation (:func:`cross_validate`) is k-fold by shape: every point of a shape (both hosts) is left out
together and predicted by the same search run on the other shapes; the simulations are shared, so a fold costs
little more than the nodes the full fit did not visit.
"""
from __future__ import annotations

import csv
import dataclasses
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.config import CONFIG_DIR, Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import HOSTS, Hardware, load_hardware, preset_names
from tfa_sim.spec.load import build_config

POINTS_FILE = CONFIG_DIR / "calibration" / "points.csv"
#: The fit keeps every point's error within this when it can (then minimises the MAPE).
MAX_ERROR = 0.199
#: Nodes per searched parameter: the coarse grid over the bounds, then the fine grid around its best node.
COARSE, FINE = 9, 5
TIMINGS = ("kernel", "task", "stream")
#: Launches of more block-tiles than this are folded (tfa_sim.sim.fold) rather than simulated in full.
FOLD_ABOVE = 4096


@dataclass(frozen=True)
class Param:
    """A fitted parameter: its preset key, bounds (cycles or bytes per cycle) and meaning."""

    key: str
    low: float
    high: float
    meaning: str


SEARCHED = (
    Param("gm.l2_bandwidth", 888.9, 6144.0,
          "bytes per cycle the chip's L2 serves all cores together, shared by the transfers in flight in "
          "proportion to their path rates; at least the HBM's 1.6 TB/s, at most 24 cores' 256 B/cycle ports"),
    Param("sync.flag_latency", 10.0, 2000.0,
          "cycles from a cross-core set_flag to the waiting core seeing it; about 1 µs at most"),
)
LINEAR = (
    Param("overhead.core_stagger", 0.0, 2000.0,
          "cycles between the starts of consecutive cores of a launch: the device starts its blocks one after "
          "another; at most about 1 µs each"),
    *(Param(f"launch.gap_{host}", 0.0, 36000.0,
            f"cycles from one launch's end to the next one's first block on a full stream driven by an {host} "
            f"host (runtime launch path, device start); at most 20 µs") for host in HOSTS),
)
FITTED = SEARCHED + LINEAR


@dataclass(frozen=True)
class Point:
    """One measured launch (a CSV row; :data:`COLUMNS` with their defaults)."""

    preset: str
    kernel: str
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

    def config(self, **hardware: Any) -> Config:
        return build_config({"case": {"head": self.head, "s0": self.s0, "s1": self.s1, "causal": self.causal},
                             "tiling": {"cube_s0": self.cube_s0, "cube_s1": self.cube_s1, "tile_s1": self.tile_s1},
                             "schedule": {"qk_preload": self.qk_preload, "cv_fifo_size": self.cv_fifo_size,
                                          "cv_fifo_cons_sync_period": self.sync_period},
                             "hardware": {"preset": self.preset, "cores": self.cores, **hardware},
                             "numerics": {"enabled": False}})

    @property
    def blocks(self) -> int:
        return self.s0 // self.cube_s0

    @property
    def shape(self) -> tuple:
        """What the simulation depends on: everything but the host and the measurement."""
        return (self.preset, self.head, self.s0, self.s1, self.cube_s0, self.cube_s1, self.tile_s1,
                self.qk_preload, self.cv_fifo_size, self.sync_period, self.causal, self.cores)

    @property
    def label(self) -> str:
        host = f" {self.host}" if self.host else ""
        return f"{self.preset} {self.timing}{host} S0={self.s0} S1={self.s1}"


#: Columns a points CSV may have: None marks the required ones, else the default.
COLUMNS: dict[str, Any] = {"preset": None, "kernel": None, "timing": None, "host": "", "blocks": None,
                           "head": None, "s0": None, "s1": None, "cube_s0": 128, "cube_s1": 128, "tile_s1": 256,
                           "qk_preload": 4, "cv_fifo_size": 8, "sync_period": 4, "causal": "false",
                           "time_us": None, "cores": 0}


def _typed(text: Any, kind: str) -> Any:
    """A CSV cell as its column's type (a default is already typed text)."""
    text = str(text)
    return text.lower() == "true" if kind == "bool" else float(text) if kind == "float" else \
        int(text) if kind == "int" else text


def _parse_row(row: dict[str, str], where: str) -> Point:
    required = ", ".join(k for k, d in COLUMNS.items() if d is None)
    values: dict[str, Any] = {}
    for name, default in COLUMNS.items():
        text = (row.get(name) or "").strip()
        if not text and default is None:
            raise InputError(f"{where}: column {name} is empty or missing; a point needs {required}")
        values[name] = text or default
    try:
        point = Point(*(_typed(values[f.name], str(f.type)) for f in dataclasses.fields(Point)))
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: {exc}; numbers where numbers are due") from None
    if point.timing not in TIMINGS:
        raise InputError(f"{where}: timing {point.timing!r} must be one of {', '.join(TIMINGS)}")
    if point.host not in ("", *HOSTS) or (point.timing == "stream" and not point.host):
        raise InputError(f"{where}: host {point.host!r}: a stream-timed point names its host class "
                         f"({', '.join(HOSTS)})")
    if int(values["blocks"]) != point.blocks:
        raise InputError(f"{where}: blocks {values['blocks']} is not S0/CUBE_S0 = {point.blocks}")
    if not (math.isfinite(point.time_us) and point.time_us > 0):
        raise InputError(f"{where}: time {point.time_us} µs; times must be > 0")
    point.config()  # a point the model cannot run is refused here, with the rule it breaks
    return point


def load_points(path: str | Path = POINTS_FILE, kernel: str | None = None) -> list[Point]:
    """The points of a CSV (``#`` lines are comments) of one kernel revision (``kernel``: select one)."""
    path = Path(path)
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"calibration points {path} cannot be read ({exc}); give a CSV with columns "
                         f"{','.join(COLUMNS)}") from None
    points = [_parse_row(row, f"calibration points {path} row {i}")
              for i, row in enumerate(csv.DictReader(lines), start=1)]
    revisions = sorted({p.kernel for p in points})
    if kernel is not None:
        points = [p for p in points if p.kernel == kernel]
        if not points:
            raise InputError(f"calibration points {path}: no point of kernel {kernel!r}; it has "
                             f"{', '.join(revisions) or 'none'}")
    elif len(revisions) > 1:
        raise InputError(f"calibration points {path} mix kernel revisions {', '.join(revisions)}: one fit "
                         f"describes one revision; choose with --kernel NAME")
    if not points:
        raise InputError(f"calibration points {path} holds no rows; add measured points under the header")
    return points


def select_points(path: str | None, exclude: Sequence[int] = (), kernel: str | None = None) -> list[Point]:
    """The points of ``path`` (default: the shipped set) without the 1-based data rows ``exclude``."""
    points = load_points(path or POINTS_FILE, kernel)
    bad = [row for row in exclude if not 1 <= row <= len(points)]
    if bad:
        raise InputError(f"--exclude {bad[0]}: rows are 1…{len(points)} (the data rows of the points file)")
    kept = [p for i, p in enumerate(points, start=1) if i not in set(exclude)]
    if not kept:
        raise InputError("--exclude leaves no point to fit; exclude fewer rows")
    return kept


@cache
def base_preset(name: str) -> Hardware:
    return load_hardware(build_config({"hardware": {"preset": name}}).hardware)


# ---- the model's times ------------------------------------------------------------------------------------
class Simulator:
    """Kernel times (µs) of the points' launches for given parameter values, each launch simulated once."""

    def __init__(self) -> None:
        self.cache: dict[tuple, tuple[float, int]] = {}

    def kernel(self, p: Point, values: dict[str, float]) -> tuple[float, int]:
        """(kernel time µs, index of the last core that starts) of ``p`` with ``values``."""
        key = (p.shape, tuple(sorted(values.items())))
        if key not in self.cache:
            hw = base_preset(p.preset).with_values(values)
            large = p.blocks * (p.s1 // p.tile_s1) > FOLD_ABOVE  # folding a small launch costs more than it saves
            sim = simulate(p.config(), hw.with_cores(p.cores) if p.cores else hw, None, log_events=False, fold=large)
            self.cache[key] = (sim.time_us, sim.cores_used - 1)
        return self.cache[key]


def predicted(p: Point, kernel_us: float, values: dict[str, float]) -> float:
    """What ``p`` measures given the model's kernel time: the kernel time (also msprof's task), or it plus the
    host's gap."""
    if p.timing in ("kernel", "task"):
        return kernel_us
    return kernel_us + values[f"launch.gap_{p.host}"] / base_preset(p.preset).clock_mhz


def solve_linear(points: Sequence[Point], raw: np.ndarray, last_core: np.ndarray | None) -> tuple[dict[str, float],
                                                                                                 np.ndarray]:
    """The :data:`LINEAR` parameters minimising the MAPE of raw + last core·stagger (+ the host's gap for stream
    points), every error within :data:`MAX_ERROR` when possible: a linear program.  ``last_core`` None: the
    stagger is inside ``raw`` already and only the gaps are solved.  Returns them and the predictions; a host
    class without points takes the mean of the others' gaps, or the preset's gap when no point measured one."""
    from scipy.optimize import linprog

    hosts = [h for h in HOSTS if any(p.host == h and p.timing == "stream" for p in points)]
    columns = [par for par in LINEAR[1:] if par.key.endswith(tuple(hosts))]
    if last_core is not None:
        columns.insert(0, LINEAR[0])
    n, m = len(points), len(columns)
    y = np.array([p.time_us for p in points])
    a = np.zeros((n, m))
    keys = [c.key for c in columns]
    for i, p in enumerate(points):
        clock = base_preset(p.preset).clock_mhz
        if last_core is not None:
            a[i, 0] = last_core[i] / clock
        if p.timing == "stream":
            a[i, keys.index(f"launch.gap_{p.host}")] = 1 / clock
    cost = np.concatenate([np.zeros(m), 1 / y])
    upper = np.block([[a, -np.eye(n)], [-a, -np.eye(n)]])
    rhs = np.concatenate([y - raw, raw - y])
    bounds = [(par.low, par.high) for par in columns]
    res = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds + [(0, MAX_ERROR * yi) for yi in y], method="highs")
    if res.status != 0:  # no solution keeps every error within MAX_ERROR: minimise the MAPE alone
        res = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds + [(0, None)] * n, method="highs")
    values = {par.key: float(v) for par, v in zip(columns, res.x[:m])}
    gaps = [values[k] for k in values if k.startswith("launch.")]
    for par in LINEAR[1:]:
        values.setdefault(par.key, float(np.mean(gaps)) if gaps else base_preset(points[0].preset).value(par.key))
    return values, raw + a @ res.x[:m]


def objective(errors: np.ndarray) -> float:
    """What the search minimises: every error within :data:`MAX_ERROR` first (a node that cannot keep them all
    scores 1 + its worst error), then the MAPE."""
    worst = float(np.max(np.abs(errors)))
    return float(np.mean(np.abs(errors))) if worst <= MAX_ERROR + 1e-6 else 1.0 + worst


# ---- the fit ----------------------------------------------------------------------------------------------
@dataclass
class Fit:
    """A fitted parameter set and how it does on its points."""

    values: dict[str, float]
    points: list[Point]
    predicted: np.ndarray = field(default_factory=lambda: np.zeros(0))
    seconds: float = 0.0

    @property
    def measured(self) -> np.ndarray:
        return np.array([p.time_us for p in self.points])

    @property
    def errors(self) -> np.ndarray:
        return self.predicted / self.measured - 1

    @property
    def mape(self) -> float:
        return float(np.mean(np.abs(self.errors)))


def _evaluate(points: Sequence[Point], searched: dict[str, float], sim: Simulator,
              stagger: float | None) -> tuple[float, dict[str, float], np.ndarray]:
    """(objective, all fitted values, predictions) of one node of the search.  ``stagger`` None: the core
    stagger is solved with the gaps, linearly on runs without it (the coarse search's surrogate); else runs
    include it and only the gaps are solved (the model itself)."""
    within = {**searched, "overhead.core_stagger": stagger or 0.0}
    runs = [sim.kernel(p, within) for p in points]
    raw = np.array([r[0] for r in runs])
    values, pred = solve_linear(points, raw, np.array([r[1] for r in runs]) if stagger is None else None)
    if stagger is not None:
        values["overhead.core_stagger"] = stagger
    return objective(pred / np.array([p.time_us for p in points]) - 1), {**searched, **values}, pred


def _grid(low: float, high: float, nodes: int) -> list[float]:
    return [float(v) for v in np.exp(np.linspace(math.log(low), math.log(high), nodes))]


def _search(points: Sequence[Point], axes: list[list[float]], sim: Simulator,
            stagger: float | None) -> tuple[float, dict[str, float], np.ndarray]:
    """The best node of a grid (``axes``: the values of each :data:`SEARCHED` parameter)."""
    names = [p.key for p in SEARCHED]
    return min((_evaluate(points, dict(zip(names, node)), sim, stagger) for node in itertools.product(*axes)),
               key=lambda r: r[0])


def fit(points: list[Point], sim: Simulator | None = None) -> Fit:
    """Fit :data:`FITTED` to ``points`` (module docstring): a coarse grid over the searched parameters' bounds
    with the stagger solved linearly, then a fine grid around its best node with that stagger inside the runs,
    so that the chosen node's predictions are the model's own."""
    began = time.perf_counter()
    sim = sim or Simulator()
    axes = [_grid(par.low, par.high, COARSE) for par in SEARCHED]
    coarse = _search(points, axes, sim, None)[1]
    fine = []
    for par, axis in zip(SEARCHED, axes):
        step = math.log(axis[1] / axis[0])
        centre = coarse[par.key]
        fine.append(_grid(max(par.low, centre * math.exp(-step)), min(par.high, centre * math.exp(step)), FINE))
    stagger = coarse["overhead.core_stagger"]
    _, values, pred = _search(points, fine, sim, stagger)
    for par, axis in zip(SEARCHED, fine):  # polish each between its fine neighbours (Brent, in log space)
        values, pred = _polish(points, par, axis, values, sim, stagger)
    result = Fit(values, list(points), pred)
    result.seconds = time.perf_counter() - began
    return result


def _polish(points: Sequence[Point], par: Param, axis: list[float], values: dict[str, float], sim: Simulator,
            stagger: float) -> tuple[dict[str, float], np.ndarray]:
    """``values`` with ``par`` moved to its best value between the fine grid nodes next to it."""
    from scipy.optimize import minimize_scalar

    here = axis.index(values[par.key]) if values[par.key] in axis else len(axis) // 2
    low, high = axis[max(0, here - 1)], axis[min(len(axis) - 1, here + 1)]
    searched = {p.key: values[p.key] for p in SEARCHED}

    def score(log_value: float) -> float:
        return _evaluate(points, {**searched, par.key: math.exp(log_value)}, sim, stagger)[0]

    res = minimize_scalar(score, bounds=(math.log(low), math.log(high)), method="bounded",
                          options={"xatol": 0.01, "maxiter": 12})
    best = _evaluate(points, {**searched, par.key: math.exp(res.x)}, sim, stagger)
    current = _evaluate(points, searched, sim, stagger)
    return (best[1], best[2]) if best[0] < current[0] else (current[1], current[2])


def cross_validate(points: list[Point], sim: Simulator | None = None) -> np.ndarray:
    """Each point's prediction (µs) by a fit to the points of every other shape (k-fold by shape)."""
    sim = sim or Simulator()
    shapes = sorted({p.shape for p in points}, key=str)
    if len(shapes) < 2:
        raise InputError("cross-validation needs points of at least two shapes")
    out = np.zeros(len(points))
    for shape in shapes:
        rest = [p for p in points if p.shape != shape]
        f = fit(rest, sim)
        searched = {k: v for k, v in f.values.items() if not k.startswith("launch.")}
        for i, p in enumerate(points):
            if p.shape == shape:
                out[i] = predicted(p, sim.kernel(p, searched)[0], f.values)
    return out


def half_width(points: Sequence[Point], held_out: np.ndarray) -> float:
    """90 % of the cross-validated relative errors' magnitudes (the preset's interval half-width)."""
    errors = np.abs(held_out / np.array([p.time_us for p in points]) - 1)
    return float(np.quantile(errors, 0.9))


# ---- the report -------------------------------------------------------------------------------------------
def sensitivity(f: Fit, sim: Simulator) -> dict[str, tuple[float, float]]:
    """MAPE change when each fitted value is moved −10 % and +10 % (one at a time, full model)."""
    out: dict[str, tuple[float, float]] = {}
    measured = np.array([p.time_us for p in f.points])
    for par in FITTED:
        changes = []
        for factor in (0.9, 1.1):
            values = {**f.values, par.key: f.values[par.key] * factor}
            searched = {k: v for k, v in values.items() if not k.startswith("launch.")}
            pred = np.array([predicted(p, sim.kernel(p, searched)[0], values) for p in f.points])
            changes.append(float(np.mean(np.abs(pred / measured - 1))) - f.mape)
        out[par.key] = (changes[0], changes[1])
    return out


def parameter_rows(f: Fit, sens: dict[str, tuple[float, float]] | None) -> list[dict[str, Any]]:
    """One row per fitted value: value, bounds, whether it sits at a bound, ±10 % effect, meaning."""
    rows = []
    for par in FITTED:
        value = f.values[par.key]
        at = "low" if value <= par.low + 1e-9 * max(1.0, par.high) else "high" if value >= par.high * 0.999 else ""
        rows.append({"param": par.key, "value": value, "low": par.low, "high": par.high, "at_bound": at,
                     "mape_minus10": sens[par.key][0] if sens else None,
                     "mape_plus10": sens[par.key][1] if sens else None, "meaning": par.meaning})
    return rows


def calibration_record(f: Fit, held_out: np.ndarray | None, sens: dict[str, tuple[float, float]] | None
                       ) -> dict[str, Any]:
    """What calibration.json holds: the points with their errors, the parameters, the summary figures."""
    table = [{**dataclasses.asdict(p), "predicted_us": float(q), "error": float(e),
              **({"held_out_us": float(held_out[i]), "held_out_error": float(held_out[i] / p.time_us - 1)}
                 if held_out is not None else {})}
             for i, (p, q, e) in enumerate(zip(f.points, f.predicted, f.errors))]
    record: dict[str, Any] = {"kernel": f.points[0].kernel, "points": table, "parameters": parameter_rows(f, sens),
                              "mape": f.mape, "max_abs_error": float(np.max(np.abs(f.errors))),
                              "fit_seconds": f.seconds}
    if held_out is not None:
        err = held_out / np.array([p.time_us for p in f.points]) - 1
        record.update(cv_mape=float(np.mean(np.abs(err))), cv_max_abs_error=float(np.max(np.abs(err))),
                      half_width=half_width(f.points, held_out))
    return record


def format_report(f: Fit, held_out: np.ndarray | None = None,
                  sens: dict[str, tuple[float, float]] | None = None) -> str:
    lines = [f"fit: {len(f.points)} points of kernel {f.points[0].kernel}, {len(FITTED)} fitted values, "
             f"{f.seconds:.0f} s", "in-sample (full model)" + (", and each shape left out (k-fold by shape):"
                                                                if held_out is not None else ":"),
             "  preset timing host     blocks     s1  measured µs  predicted µs   error"
             + ("   left out  error" if held_out is not None else "")]
    for i, (p, q, e) in enumerate(zip(f.points, f.predicted, f.errors)):
        row = (f"  {p.preset:6s} {p.timing:6s} {p.host or '-':8s} {p.blocks:6d} {p.s1:6d} {p.time_us:12.3f} "
               f"{q:13.3f} {e:+7.1%}")
        if held_out is not None:
            row += f" {held_out[i]:10.3f} {held_out[i] / p.time_us - 1:+6.1%}"
        lines.append(row)
    lines.append(f"in-sample MAPE {f.mape:.1%}, max |error| {np.max(np.abs(f.errors)):.1%}")
    if held_out is not None:
        err = held_out / np.array([p.time_us for p in f.points]) - 1
        lines.append(f"held out (k-fold by shape): MAPE {np.mean(np.abs(err)):.1%}, max |error| "
                     f"{np.max(np.abs(err)):.1%}; 90 % of |error| within {half_width(f.points, held_out):.1%} "
                     f"(the presets' interval half-width)")
    lines.append("parameters (value, bounds, at a bound, MAPE change at −10 % / +10 %):")
    for r in parameter_rows(f, sens):
        effect = f"{r['mape_minus10']:+.2%} / {r['mape_plus10']:+.2%}" if r["mape_minus10"] is not None else ""
        lines.append(f"  {r['param']:24s} {r['value']:11.4g}  [{r['low']:g}, {r['high']:g}] {r['at_bound'] or '-':4s}"
                     f" {effect}")
    return "\n".join(lines)


# ---- presets ----------------------------------------------------------------------------------------------
def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _rewrite_preset(source: Path, path: Path, values: dict[str, Any], note: str) -> None:
    """``source``'s text with ``values`` (dotted keys) put in, every comment and other number kept."""
    section = None
    out = []
    for line in source.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and "]" in stripped:
            section = stripped[1:stripped.index("]")]
        key = stripped.split("=", 1)[0].strip() if "=" in stripped else None
        if key and f"{section}.{key}" in values:
            comment = line[line.index("#"):] if "#" in line else ""
            line = f"{key} = {_toml(values[f'{section}.{key}'])}".ljust(22) + (" " + comment if comment else "")
        out.append(line)
    out = [ln for ln in out if not ln.startswith("# Calibrated")]
    out.insert(2, f"# Calibrated: {note}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def domain(points: Sequence[Point], width: float) -> dict[str, Any]:
    """The [calibration] values a fit to ``points`` writes (hardware.CalibrationInfo)."""
    def seen(attr: str) -> list[int]:
        return sorted({getattr(p, attr) for p in points})

    return {"calibration.kernel": points[0].kernel, "calibration.points": len(points),
            "calibration.half_width": round(width, 4), "calibration.blocks_max": max(p.blocks for p in points),
            "calibration.s1": seen("s1"), "calibration.head": seen("head"), "calibration.cube_s0": seen("cube_s0"),
            "calibration.cube_s1": seen("cube_s1"), "calibration.tile_s1": seen("tile_s1"),
            "calibration.qk_preload": seen("qk_preload"), "calibration.cv_fifo_size": seen("cv_fifo_size"),
            "calibration.cv_fifo_cons_sync_period": seen("sync_period")}


def write_presets(f: Fit, width: float, directory: Path | None, note: str) -> list[Path]:
    """Fitted presets for every shipped chip into ``directory`` (None: the shipped configs/hw).

    The boards with measured points get the fitted values (one set: the micro-architecture is shared); the
    others take them too, marked ``measured = false`` (wider intervals), 910b4 with half the L2 bandwidth, as
    its GM (docs/timing.md, "Hardware figures").
    """
    boards = {p.preset for p in f.points}
    written = []
    for name in preset_names():
        values: dict[str, Any] = {**f.values, **domain(f.points, width), "calibration.measured": name in boards}
        if name == "910b4" and name not in boards:
            values["gm.l2_bandwidth"] /= 2
        path = (directory or CONFIG_DIR / "hw") / f"{name}.toml"
        _rewrite_preset(Path(base_preset(name).source), path, values,
                        note + ("" if name in boards else " (no measured points of this board: the fitted values "
                                                          "of " + ", ".join(sorted(boards)) + ")"))
        written.append(path)
    return written
