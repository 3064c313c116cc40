"""``tfa-sim calibrate``: fit the timing model's free parameters to measured kernel times.

Eight parameters are fitted, each with a physical meaning and bounds (:data:`FITTED`,
docs/calibration.md); everything else in a preset is a documented figure.  The fit
keeps every point's error within :data:`MAX_ERROR` when it can and then minimises the
mean absolute percentage error (MAPE) of simulated against measured kernel times, in
three steps none of which starts from the presets' current values:

1. *pipeline* — ``vector.repeat_scale`` and ``sync.flag_latency`` from the points
   that run one block per core on at most 8 cores (no shared-L2 pressure).  Each
   candidate simulates their per-core work once, without the overheads; the
   overheads then enter exactly linearly (time = raw + kernel_start +
   blocks·block_dispatch + last core·core_stagger) and are solved by a linear
   program (scipy's HiGHS).  A global search (DIRECT) over their bounds in log space,
   polished by Nelder–Mead, finds the two (the objective has several basins).
2. *L2* — ``gm.l2_bandwidth`` from all points by Brent's method in log space; the
   many-block points are simulated wave by wave (one full wave, then the partial
   last wave: the waves of identical blocks that start together are alike) and the
   linear parameters solved again for each candidate.
3. *confirm* — every point simulated in full with the fitted parameters: the
   reported errors are these, not the surrogates'.

``--leave-one-out`` refits once per point without it and reports its error.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.config import CONFIG_DIR, Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import Hardware, load_hardware, preset_names
from tfa_sim.spec.load import build_config

POINTS_FILE = CONFIG_DIR / "calibration" / "points.csv"
#: Points with more cores than this feel the shared L2; step 1 leaves them to step 2.
UNCONTENDED_CORES = 8
#: The fit keeps every point's error within this when it can (then minimises the MAPE).
MAX_ERROR = 0.199
#: Evaluations of step 1's global search (DIRECT) before Nelder–Mead polishes its best point.
GLOBAL_EVALUATIONS = 100


@dataclass(frozen=True)
class Param:
    """A fitted parameter: its preset key, whether each measured board has its own, bounds and meaning."""

    key: str
    per_board: bool
    low: float
    high: float
    meaning: str


FITTED = (
    Param("vector.repeat_scale", False, 0.125, 1.0,
          "cycles of one 256-byte vector repeat relative to the per-repeat figures of docs/timing.md; 1 is the "
          "figure itself, 1/8 a repeat per 1/8 of the listed cycles"),
    Param("sync.flag_latency", False, 10.0, 2000.0,
          "cycles from a cross-core set_flag to the waiting core seeing it; about 1 µs at most"),
    Param("gm.l2_bandwidth", False, 888.9, 6144.0,
          "bytes per cycle the chip's L2 serves to all cores together; at least the HBM's 1.6 TB/s, at most "
          "all 24 cores' 256 B/cycle load paths"),
    Param("overhead.kernel_start", True, 0.0, 100000.0,
          "cycles from the device starting a launch to its first core starting: the runtime's device-side "
          "launch (argument and code fetch); measured in the kernel time, unlike the host's launch"),
    Param("overhead.block_dispatch", False, 0.0, 40000.0,
          "cycles from a core's start (or its previous block's end) to the block's first instruction: scalar "
          "set-up, flags, the cross-core comm slot; the same micro-architecture on every board"),
    Param("overhead.core_stagger", True, 0.0, 20000.0,
          "cycles between the starts of consecutive cores: the device starts its cores one after another"),
)
PIPELINE = ("vector.repeat_scale", "sync.flag_latency")
LINEAR = ("overhead.kernel_start", "overhead.block_dispatch", "overhead.core_stagger")


@dataclass(frozen=True)
class Point:
    preset: str
    cores: int
    head: int
    s0: int
    s1: int
    cube_s0: int
    cube_s1: int
    tile_s1: int
    qk_preload: int
    time_us: float

    def config(self, s0: int | None = None) -> Config:
        return build_config({"case": {"head": self.head, "s0": s0 or self.s0, "s1": self.s1},
                             "tiling": {"cube_s0": self.cube_s0, "cube_s1": self.cube_s1, "tile_s1": self.tile_s1},
                             "schedule": {"qk_preload": self.qk_preload},
                             "hardware": {"preset": self.preset, "cores": self.cores},
                             "numerics": {"enabled": False}})

    @property
    def blocks(self) -> int:
        return self.s0 // self.cube_s0

    @property
    def label(self) -> str:
        return f"{self.preset} {self.cores} cores S0={self.s0} S1={self.s1}"

    def critical_core(self) -> tuple[int, int, int]:
        """The coefficients of (kernel_start, block_dispatch, core_stagger) in the time of the core that ends
        last when all blocks take alike (the last of those with the most blocks): raw + kernel_start +
        blocks·dispatch + index·stagger."""
        waves = -(-self.blocks // self.cores)
        return 1, waves, (self.blocks - 1) % self.cores if self.blocks > self.cores else self.blocks - 1


def load_points(path: str | Path = POINTS_FILE) -> list[Point]:
    """The measured points of a CSV with the columns of :class:`Point` (``#`` lines are comments)."""
    path = Path(path)
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"calibration points {path} cannot be read ({exc}); give a CSV with columns "
                         f"{','.join(f.name for f in dataclasses.fields(Point))}") from None
    types = {f.name: str(f.type) for f in dataclasses.fields(Point)}
    convert: dict[str, Callable[[str], Any]] = {"float": float, "int": int, "str": str}
    try:
        points = [Point(*[convert[kind](row[name]) for name, kind in types.items()]) for row in csv.DictReader(lines)]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"calibration points {path}: bad row ({exc}); columns must be {','.join(types)}") from None
    if not points:
        raise InputError(f"calibration points {path} holds no rows; add measured points under the header")
    for p in points:
        if not (math.isfinite(p.time_us) and p.time_us > 0):
            raise InputError(f"calibration points {path}: {p.label} has time {p.time_us} µs; times must be > 0")
        p.config()  # a point the model cannot run is refused here, with the rule it breaks
    return points


def select_points(path: str | None, exclude: Sequence[int] = ()) -> list[Point]:
    """The points of ``path`` (default: the shipped set) without the 1-based data rows ``exclude``."""
    points = load_points(path) if path else load_points()
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


# ---- simulation: full, per-core and wave by wave -----------------------------------------------------
def run_us(config: Config, hw: Hardware) -> float:
    return simulate(config, hw, None, log_events=False).time_us


def full_time(p: Point, hw: Hardware) -> float:
    """The model's kernel time of point ``p`` on ``hw`` (the presets' dispatch and stagger included)."""
    return run_us(p.config(), hw.with_cores(p.cores))


def raw_time(p: Point, hw: Hardware) -> float:
    """Without dispatch and stagger; blocks on more than one wave are simulated a wave at a time."""
    hw = hw.with_values(dict.fromkeys(LINEAR, 0.0))
    if p.cores <= UNCONTENDED_CORES and p.blocks <= p.cores:  # no shared pressure: one core's block
        return run_us(p.config(s0=p.cube_s0), hw.with_cores(1))
    full, rest = divmod(p.blocks, p.cores)
    total = full * run_us(p.config(s0=p.cores * p.cube_s0), hw.with_cores(p.cores)) if full else 0.0
    return total + (run_us(p.config(s0=rest * p.cube_s0), hw.with_cores(p.cores)) if rest else 0.0)


# ---- the linear parameters --------------------------------------------------------------------------
@dataclass(frozen=True)
class Linear:
    """The linear parameters of a fit (cycles): shared values, each board's own, and the predictions (µs)."""

    shared: dict[str, float]
    boards: dict[str, dict[str, float]]
    predicted: np.ndarray


def solve_linear(points: Sequence[Point], raw: np.ndarray) -> Linear:
    """The :data:`LINEAR` parameters (shared, or one per board) minimising the MAPE of raw +
    kernel_start + blocks·dispatch + index·stagger: a linear program in cycles."""
    from scipy.optimize import linprog

    boards = sorted({p.preset for p in points})
    columns = [(par, b) for par in _linear_params() for b in (boards if par.per_board else [None])]
    n, m = len(points), len(columns)
    y = np.array([p.time_us for p in points])
    a = np.zeros((n, m))
    for i, p in enumerate(points):
        coefficient = dict(zip(LINEAR, p.critical_core()))
        clock = base_preset(p.preset).clock_mhz
        for j, (par, board) in enumerate(columns):
            if board in (None, p.preset):
                a[i, j] = coefficient[par.key] / clock  # µs per cycle of the parameter
    # variables: [x (cycles per column) | e (absolute error per point, µs)]; minimise Σ e_i / y_i
    cost = np.concatenate([np.zeros(m), 1 / y])
    upper = np.block([[a, -np.eye(n)], [-a, -np.eye(n)]])
    rhs = np.concatenate([y - raw, raw - y])
    bounds = [(par.low, par.high) for par, _ in columns]
    res = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds + [(0, MAX_ERROR * yi) for yi in y], method="highs")
    if res.status != 0:  # no solution keeps every error within MAX_ERROR: minimise the MAPE alone
        res = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds + [(0, None)] * n, method="highs")
    x = res.x[:m]
    shared = {par.key: float(v) for (par, board), v in zip(columns, x) if board is None}
    per_board = {b: {par.key: float(v) for (par, board), v in zip(columns, x) if board == b} for b in boards}
    return Linear(shared, per_board, raw + a @ x)


def _linear_params() -> list[Param]:
    return [next(p for p in FITTED if p.key == key) for key in LINEAR]


# ---- the fit ------------------------------------------------------------------------------------------
@dataclass
class Fit:
    """A fitted parameter set and how it does on its points."""

    shared: dict[str, float]
    boards: dict[str, dict[str, float]]
    points: list[Point]
    predicted: np.ndarray = field(default_factory=lambda: np.zeros(0))
    seconds: float = 0.0

    def preset(self, board: str) -> Hardware:
        return base_preset(board).with_values({**self.shared, **self.boards[board]})

    @property
    def errors(self) -> np.ndarray:
        return self.predicted / np.array([p.time_us for p in self.points]) - 1

    @property
    def mape(self) -> float:
        return float(np.mean(np.abs(self.errors)))


def _mape(pred: np.ndarray, points: Sequence[Point]) -> float:
    return float(np.mean(np.abs(pred / np.array([p.time_us for p in points]) - 1)))


def _objective(errors: np.ndarray) -> float:
    """What the searches minimise, in the linear program's order: every error within :data:`MAX_ERROR` first
    (a fit that cannot keep them all scores 1 + its worst error), then the MAPE."""
    worst = float(np.max(np.abs(errors)))
    return float(np.mean(np.abs(errors))) if worst <= MAX_ERROR + 1e-6 else 1.0 + worst


def _pipeline_step(points: list[Point], shared: dict[str, float]) -> dict[str, float]:
    """Step 1: the pipeline parameters from the uncontended one-wave points.

    The objective is piecewise linear with narrow valleys and more than one basin (docs/calibration.md,
    "Start dependence"), so a deterministic global search over the bounds (DIRECT, in log space) finds the
    valley and Nelder–Mead polishes it: no start point, so every subset of points is fitted alike.
    """
    from scipy.optimize import direct, minimize

    quiet = [p for p in points if p.cores <= UNCONTENDED_CORES and p.blocks <= p.cores]
    if not quiet:
        return shared
    params = [next(p for p in FITTED if p.key == key) for key in PIPELINE]
    bounds = [(math.log(p.low), math.log(p.high)) for p in params]

    # a quiet point's raw time is one block on one core: points that differ only in their core count share it
    alike = {p: dataclasses.replace(p, cores=1, s0=p.cube_s0, time_us=1.0) for p in quiet}
    measured = np.array([p.time_us for p in quiet])

    def objective(x: Sequence[float]) -> float:
        values = {**shared, **{p.key: float(math.exp(np.clip(v, *b))) for p, v, b in zip(params, x, bounds)}}
        one = {q: raw_time(q, base_preset(q.preset).with_values(values)) for q in set(alike.values())}
        errors = solve_linear(quiet, np.array([one[alike[p]] for p in quiet])).predicted / measured - 1
        return _objective(errors)

    coarse = direct(objective, bounds, maxfun=GLOBAL_EVALUATIONS, locally_biased=True)
    best = minimize(objective, coarse.x, method="Nelder-Mead", bounds=bounds,
                    options={"xatol": 0.01, "fatol": 2e-4, "maxiter": 120})
    return {**shared, **{p.key: float(math.exp(v)) for p, v in zip(params, best.x)}}


def _l2_step(points: list[Point], shared: dict[str, float], offsets: np.ndarray | None = None,
             span: float | None = None) -> tuple[dict[str, float], np.ndarray]:
    """Step 2: the L2 bandwidth from all points, the linear parameters solved for each candidate.

    ``offsets`` correct the surrogate raw times (what the full model showed they miss); ``span`` narrows the
    search to ±span (relative) around the current value.
    """
    from scipy.optimize import minimize_scalar

    l2 = next(p for p in FITTED if p.key == "gm.l2_bandwidth")
    low, high = math.log(l2.low), math.log(l2.high)
    if span is not None:
        here = math.log(shared[l2.key])
        low, high = max(low, here - span), min(high, here + span)
    shift = np.zeros(len(points)) if offsets is None else offsets
    quiet = {i for i, p in enumerate(points) if p.cores <= UNCONTENDED_CORES and p.blocks <= p.cores}
    fixed = {i: raw_time(p, base_preset(p.preset).with_values(shared)) for i, p in enumerate(points) if i in quiet}

    def raw_for(log_bw: float) -> np.ndarray:
        values = {**shared, l2.key: math.exp(log_bw)}
        return shift + np.array([fixed[i] if i in quiet else raw_time(p, base_preset(p.preset).with_values(values))
                                 for i, p in enumerate(points)])

    if len(quiet) == len(points):
        return shared, raw_for(math.log(shared[l2.key]))
    measured = np.array([p.time_us for p in points])
    res = minimize_scalar(lambda v: _objective(solve_linear(points, raw_for(v)).predicted / measured - 1),
                          bounds=(low, high), method="bounded", options={"xatol": 0.005})
    best = {**shared, l2.key: float(math.exp(res.x))}
    return best, raw_for(res.x)


def fit(points: list[Point]) -> Fit:
    """Fit :data:`FITTED` to ``points`` (steps in the module docstring); predictions from the full model.

    Each step searches its parameters' whole bounds, so the result does not depend on the presets' current
    values and a fit to a subset (a leave-one-out fold) sees no other point.  Only a parameter the points
    cannot fit keeps its preset value: the pipeline pair without one-wave points, the L2 bandwidth with
    nothing but one-wave points.
    """
    began = time.perf_counter()
    first = base_preset(points[0].preset)
    shared = {p.key: float(first.value(p.key)) for p in FITTED if not p.per_board}
    shared = _pipeline_step(points, shared)
    shared, raw = _l2_step(points, shared)
    linear = solve_linear(points, raw)
    result = Fit({**shared, **linear.shared}, linear.boards, points)
    result.predicted = np.array([full_time(p, result.preset(p.preset)) for p in points])
    # one correction: what the surrogates missed, as a shift of each point's raw time; search L2 again nearby
    shared, raw = _l2_step(points, shared, offsets=result.predicted - linear.predicted, span=0.1)
    linear = solve_linear(points, raw)
    result = Fit({**shared, **linear.shared}, linear.boards, points)
    result.predicted = np.array([full_time(p, result.preset(p.preset)) for p in points])
    result.seconds = time.perf_counter() - began
    return result


def _fold(args: tuple[list[Point], int]) -> tuple[float, float]:
    """One leave-one-out fold: (predicted µs of the point left out, fit seconds)."""
    points, i = args
    rest = points[:i] + points[i + 1:]
    if points[i].preset not in {p.preset for p in rest}:
        raise InputError(f"leave-one-out: {points[i].label} is the only point of its board; its board parameters "
                         f"cannot be fitted without it")
    f = fit(rest)
    return full_time(points[i], f.preset(points[i].preset)), f.seconds


def leave_one_out(points: list[Point], jobs: int = 2) -> np.ndarray:
    """The out-of-sample prediction (µs) of every point, each from a fit to all the others."""
    tasks = [(points, i) for i in range(len(points))]
    if jobs <= 1:
        return np.array([_fold(t)[0] for t in tasks])
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return np.array([r[0] for r in pool.map(_fold, tasks)])


# ---- the report ---------------------------------------------------------------------------------------
def sensitivity(f: Fit) -> dict[str, tuple[float, float]]:
    """MAPE change when each fitted value is moved −10 % and +10 % (one at a time, full model)."""
    base = f.mape
    out: dict[str, tuple[float, float]] = {}
    for par in FITTED:
        changes = []
        for factor in (0.9, 1.1):
            shared = dict(f.shared)
            boards = {b: dict(v) for b, v in f.boards.items()}
            if par.per_board:
                for values in boards.values():
                    values[par.key] *= factor
            else:
                shared[par.key] *= factor
            moved = Fit(shared, boards, f.points)
            pred = np.array([full_time(p, moved.preset(p.preset)) for p in f.points])
            changes.append(_mape(pred, f.points) - base)
        out[par.key] = (changes[0], changes[1])
    return out


def parameter_rows(f: Fit, sens: dict[str, tuple[float, float]] | None) -> list[dict[str, Any]]:
    """One row per fitted value: board (or all), value, bounds, whether it sits at a bound, ±10 % effect."""
    rows = []
    for par in FITTED:
        where = list(f.boards) if par.per_board else ["all"]
        for board in where:
            value = f.boards[board][par.key] if par.per_board else f.shared[par.key]
            at = "low" if value <= par.low * 1.001 else "high" if value >= par.high * 0.999 else ""
            rows.append({"param": par.key, "board": board, "value": value, "low": par.low, "high": par.high,
                         "at_bound": at, "mape_minus10": sens[par.key][0] if sens else None,
                         "mape_plus10": sens[par.key][1] if sens else None, "meaning": par.meaning})
    return rows


def calibration_record(f: Fit, loo: np.ndarray | None, sens: dict[str, tuple[float, float]] | None
                       ) -> dict[str, Any]:
    """What calibration.json holds: the points with their errors, the parameters, the summary figures."""
    table = [{**dataclasses.asdict(p), "predicted_us": float(q), "error": float(e),
              **({"left_out_us": float(loo[i]), "left_out_error": float(loo[i] / p.time_us - 1)}
                 if loo is not None else {})}
             for i, (p, q, e) in enumerate(zip(f.points, f.predicted, f.errors))]
    record: dict[str, Any] = {"points": table, "parameters": parameter_rows(f, sens), "mape": f.mape,
                              "max_abs_error": float(np.max(np.abs(f.errors))), "fit_seconds": f.seconds}
    if loo is not None:
        err = loo / np.array([p.time_us for p in f.points]) - 1
        record.update(loo_mape=float(np.mean(np.abs(err))), loo_max_abs_error=float(np.max(np.abs(err))))
    return record


def format_report(f: Fit, loo: np.ndarray | None = None, sens: dict[str, tuple[float, float]] | None = None) -> str:
    lines = [f"fit: {len(f.points)} points, {sum(len(r) for r in f.boards.values()) + len(f.shared)} fitted values, "
             f"{f.seconds:.0f} s", "in-sample (full model):",
             "  preset cores    s0     s1  measured µs  predicted µs   error" + ("   left out  error" if loo is not None
                                                                               else "")]
    for i, (p, q, e) in enumerate(zip(f.points, f.predicted, f.errors)):
        row = f"  {p.preset:6s} {p.cores:5d} {p.s0:5d} {p.s1:6d} {p.time_us:12.3f} {q:13.3f} {e:+7.1%}"
        if loo is not None:
            row += f" {loo[i]:10.3f} {loo[i] / p.time_us - 1:+6.1%}"
        lines.append(row)
    lines.append(f"in-sample MAPE {f.mape:.1%}, max |error| {np.max(np.abs(f.errors)):.1%}")
    if loo is not None:
        err = loo / np.array([p.time_us for p in f.points]) - 1
        lines.append(f"leave-one-out MAPE {np.mean(np.abs(err)):.1%}, max |error| {np.max(np.abs(err)):.1%}")
    lines.append("parameters (value, bounds, at a bound, MAPE change at −10 % / +10 %):")
    for r in parameter_rows(f, sens):
        effect = (f"{r['mape_minus10']:+.2%} / {r['mape_plus10']:+.2%}" if r["mape_minus10"] is not None else "")
        lines.append(f"  {r['param']:24s} {r['board']:6s} {r['value']:11.4g}  [{r['low']:g}, {r['high']:g}]"
                     f" {r['at_bound'] or '-':4s} {effect}")
    return "\n".join(lines)


# ---- presets ------------------------------------------------------------------------------------------
def _rewrite_preset(hw: Hardware, path: Path, note: str) -> None:
    """Write ``hw``'s fitted values into its preset TOML text, keeping every comment and other number."""
    keys = {p.key for p in FITTED}
    section = None
    out = []
    for line in Path(hw.source).read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and "]" in stripped:
            section = stripped[1:stripped.index("]")]
        key = stripped.split("=", 1)[0].strip() if "=" in stripped else None
        if key and f"{section}.{key}" in keys:
            comment = line[line.index("#"):] if "#" in line else ""
            line = f"{key} = {hw.value(f'{section}.{key}'):.6g}".ljust(22) + " " + comment
        out.append(line)
    out = [ln for ln in out if not ln.startswith("# Calibrated")]
    out.insert(2, f"# Calibrated: {note}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def write_presets(f: Fit, directory: Path | None, note: str) -> list[Path]:
    """Fitted presets for every shipped chip into ``directory`` (None: the shipped configs/hw).

    Boards without measured points take 910b2's values (or the first fitted board's); 910b4 halves the L2
    bandwidth, as its HBM (docs/timing.md, "Hardware figures").
    """
    donor = "910b2" if "910b2" in f.boards else next(iter(f.boards))
    written = []
    for name in preset_names():
        board = name if name in f.boards else donor
        values = {**f.shared, **f.boards[board]}
        if name == "910b4" and name not in f.boards:
            values["gm.l2_bandwidth"] /= 2
        path = (directory or CONFIG_DIR / "hw") / f"{name}.toml"
        _rewrite_preset(base_preset(name).with_values(values), path,
                        note + ("" if name in f.boards else f" (no measured points: values of {donor})"))
        written.append(path)
    return written
