"""``tfa-sim calibrate``: fit the timing model's free parameters to measured launches of the kernel's builds.

Fitted (:data:`FITTED`, each physical and bounded, docs/calibration.md): the chip's L2 bandwidth, the cycles of
its cross-core sync unit per flag message and the flag latency, searched; the stagger between core starts,
each host class's launch gap and the host's launch-and-synchronise overhead, which enter a launch's time
(almost) linearly and are solved by a linear program for every searched candidate.  Everything else in a
preset is a documented figure.  The points (:mod:`tfa_sim.explore.points`) may mix the builds: they differ
in mechanisms, not in fitted values, so one fit describes a card.

The search is deterministic and starts from no preset value: a log-spaced grid over the searched parameters'
bounds (the core stagger solved linearly with the launch values), the same grid with that stagger inside the
simulations, then a finer grid around its best node, each searched parameter then polished between its fine
neighbours and the stagger within half and twice its estimate (Brent's method).  Each node simulates every
distinct launch once (cached; long launches folded, their samples shared between launches of one program,
:func:`tfa_sim.sim.fold.folded_cycles`; the nodes' launches split between two processes where a CPU is free);
the node whose errors are all within :data:`MAX_ERROR`
(when any is) with the lowest mean absolute percentage error wins, and its predictions are the full model's.
Cross-validation (:func:`cross_validate`) leaves each shape out (both hosts, both timings of it) and predicts
it from a refit to the rest among the nodes the full fit visited, so a fold costs one simulation.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.explore.points import Point, base_preset, choice_words, measured_as, predicted
from tfa_sim.sim.fold import foldable, folded_cycles
from tfa_sim.sim.parallel import Forked, can_fork
from tfa_sim.sim.simulation import launches, simulate
from tfa_sim.spec.builds import SHIPPED
from tfa_sim.spec.config import CONFIG_DIR
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import HOSTS, preset_names

#: The fit keeps every point's error within this when it can (then minimises the MAPE).
MAX_ERROR = 0.199
#: Nodes of the coarse grid per searched parameter, and of the fine grid around its best node.
COARSE = {"gm.l2_bandwidth": 5, "sync.ffts_service": 6, "sync.flag_latency": 3}
FINE = 3
#: Launches of more block-tiles than this are folded (tfa_sim.sim.fold) rather than simulated in full: the
#: shipped points fold only the dsl build's long launches (within 0.05 %, benchmarks/README.md); the manual
#: build's 16384² (8192) runs in full, as it did when the fold sampled the first waves and erred by 3–4 % there.
FOLD_ABOVE = 8192


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
    Param("sync.ffts_service", 1.0, 200.0,
          "cycles of the chip's cross-core sync unit (FFTS) per flag message, all cores' messages served one at a "
          "time; at least a cycle, at most about 0.1 µs"),
    Param("sync.flag_latency", 10.0, 2000.0,
          "cycles from the sync unit serving a set_flag to the waiting core seeing it; about 1 µs at most"),
)
LINEAR = (
    Param("overhead.core_stagger", 0.0, 2000.0,
          "cycles between the starts of consecutive cores of a launch: the device starts its blocks one after "
          "another; at most about 1 µs each"),
    *(Param(f"launch.gap_{host}", 0.0, 36000.0,
            f"cycles from one launch's end to the next one's first block on a full stream driven by an {host} "
            f"host (runtime launch path, device start); at most 20 µs") for host in HOSTS),
    Param("launch.host_sync", 0.0, 180000.0,
          "cycles a host-synchronised launch adds to the kernel (the host's launch call, the device's start, the "
          "synchronise's return); at most 100 µs"),
)
FITTED = SEARCHED + LINEAR


# ---- the model's times ------------------------------------------------------------------------------------
def kernel_time(p: Point, values: dict[str, float], memo: dict[Hashable, float]) -> tuple[float, int]:
    """(kernel time µs, index of the last core that starts) of ``p`` with ``values``; a launch of more than
    :data:`FOLD_ABOVE` block-tiles folded, its samples kept in ``memo``."""
    plan = p.plan(values)
    kernels = launches(plan, None)
    cores = plan.geometry.main.cores
    if sum(b.tiles for b in plan.geometry.blocks) > FOLD_ABOVE and foldable(kernels) is None:
        s = plan.config.schedule
        cycles = folded_cycles(kernels, plan.hw, s.qk_preload, s.cv_fifo_cons_sync_period, 0.0, memo)
        return cycles / plan.hw.clock_mhz, cores - 1
    sim = simulate(plan, None, log_events=False, kernels=kernels)
    return sim.time_us, sim.cores_used - 1


def _node_key(values: dict[str, float]) -> tuple:
    return tuple(sorted(values.items()))


def _times(tasks: list[tuple[Point, dict[str, float]]], memo: dict[Hashable, float]
           ) -> tuple[list[tuple[float, int]], dict[Hashable, float]]:
    """The kernel times of ``tasks``, and the fold samples simulated for them."""
    before = set(memo)
    out = [kernel_time(p, values, memo) for p, values in tasks]
    return out, {k: v for k, v in memo.items() if k not in before}


class Simulator:
    """Kernel times (µs) of the points' launches for given parameter values, each launch simulated once."""

    def __init__(self, parallel: bool | None = None) -> None:
        self.cache: dict[tuple, tuple[float, int]] = {}
        self.memo: dict[Hashable, float] = {}  # fold samples' cycles (tfa_sim.sim.fold.sample_key)
        self.parallel = can_fork() if parallel is None else parallel
        self.visited: list[tuple[dict[str, float], float | None]] = []  # the search's nodes (searched, stagger)

    def kernel(self, p: Point, values: dict[str, float]) -> tuple[float, int]:
        """(kernel time µs, index of the last core that starts) of ``p`` with ``values``."""
        key = (p.shape, _node_key(values))
        if key not in self.cache:
            self.prime([p], [values])
        return self.cache[key]

    def prime(self, points: Sequence[Point], nodes: Sequence[dict[str, float]]) -> None:
        """Simulate every launch of ``points`` at every node not simulated yet; with a CPU to spare a forked
        process takes every other long launch."""
        todo: dict[tuple, tuple[Point, dict[str, float]]] = {}
        for values in nodes:
            for p in points:
                key = (p.shape, _node_key(values))
                if key not in self.cache:
                    todo.setdefault(key, (p, values))
        keys = sorted(todo, key=lambda k: -todo[k][0].row_blocks * todo[k][0].s1)  # longest first, dealt in turn
        there = keys[1::2] if self.parallel and len(keys) > 1 else []
        helper = Forked(_times, [todo[k] for k in there], self.memo) if there else None
        try:
            here = [k for k in keys if k not in set(there)]
            self.cache.update(zip(here, _times([todo[k] for k in here], self.memo)[0]))
            away = helper.result() if helper else None
        finally:
            if helper:
                helper.close()
        if there:
            times, samples = away if away is not None else _times([todo[k] for k in there], self.memo)
            self.cache.update(zip(there, times))
            self.memo.update(samples)


def solve_linear(points: Sequence[Point], raw: np.ndarray, last_core: np.ndarray | None) -> tuple[dict[str, float],
                                                                                                 np.ndarray]:
    """The :data:`LINEAR` parameters minimising the MAPE of raw + last core·stagger (+ the host's gap for stream
    points, + the host's synchronise overhead for sync points), every error within :data:`MAX_ERROR` when
    possible: a linear program.  ``last_core`` None: the stagger is inside ``raw`` already and only the launch
    values are solved.  Returns them and the predictions.  A point of several possible timings is compared with
    the one nearest its time, chosen at the preset's launch values and chosen again at the solved ones."""
    preset = {par.key: base_preset(points[0].preset).value(par.key) for par in LINEAR}
    hows = [measured_as(p, r, preset) for p, r in zip(points, raw)]
    values, pred = _solve(points, hows, raw, last_core)
    again = [measured_as(p, r, values) for p, r in zip(points, raw)]
    return _solve(points, again, raw, last_core) if again != hows else (values, pred)


def _solve(points: Sequence[Point], hows: list[str], raw: np.ndarray, last_core: np.ndarray | None
           ) -> tuple[dict[str, float], np.ndarray]:
    """:func:`solve_linear` with each point's timing given (``hows``); a value no point measures keeps the
    others' mean gap or the preset's."""
    from scipy.optimize import linprog

    columns = _columns(points, hows, last_core is not None)
    keys = [c.key for c in columns]
    n, m = len(points), len(columns)
    y = np.array([p.time_us for p in points])
    a = np.zeros((n, m))
    for i, (p, how) in enumerate(zip(points, hows)):
        clock = base_preset(p.preset).clock_mhz
        if last_core is not None:
            a[i, 0] = last_core[i] / clock
        if how == "stream":
            hosts = (p.host,) if p.host else HOSTS  # a stream of an unnamed host: the mean of the gaps
            for h in hosts:
                a[i, keys.index(f"launch.gap_{h}")] = 1 / clock / len(hosts)
        elif how == "sync":
            a[i, keys.index("launch.host_sync")] = 1 / clock
    cost = np.concatenate([np.zeros(m), 1 / y])
    upper = np.block([[a, -np.eye(n)], [-a, -np.eye(n)]])
    rhs = np.concatenate([y - raw, raw - y])
    bounds = [(par.low, par.high) for par in columns]
    res = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds + [(0, MAX_ERROR * yi) for yi in y], method="highs")
    if res.status != 0:  # no solution keeps every error within MAX_ERROR: minimise the MAPE alone
        res = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds + [(0, None)] * n, method="highs")
    values = {par.key: float(v) for par, v in zip(columns, res.x[:m])}
    gaps = [values[k] for k in values if k.startswith("launch.gap_")]
    for par in LINEAR[1:]:
        default = float(np.mean(gaps)) if gaps and par.key.startswith("launch.gap_") else \
            base_preset(points[0].preset).value(par.key)
        values.setdefault(par.key, default)
    return values, raw + a @ res.x[:m]


def _columns(points: Sequence[Point], hows: list[str], stagger: bool) -> list[Param]:
    """The linear parameters some point measures (the stagger first when solved)."""
    stream_hosts = {h for p, how in zip(points, hows) if how == "stream" for h in ((p.host,) if p.host else HOSTS)}
    used = [par for par in LINEAR[1:] if par.key.removeprefix("launch.gap_") in stream_hosts
            or (par.key == "launch.host_sync" and "sync" in hows)]
    return ([LINEAR[0]] if stagger else []) + used


def ab_pairs(points: Sequence[Point]) -> list[tuple[int, int]]:
    """Index pairs of points that differ only in the consumer sync period: an A/B (same card, launch, timing),
    whose ratio is measured better than either time, since what the two launches share cancels."""
    arms: dict[Point, list[int]] = {}
    for i, p in enumerate(points):
        arms.setdefault(dataclasses.replace(p, sync_period=0, time_us=0.0, source=""), []).append(i)
    return [pair for idx in arms.values() for pair in itertools.combinations(idx, 2)]


def pair_errors(points: Sequence[Point], pred: np.ndarray) -> np.ndarray:
    """Each A/B pair's predicted ratio against its measured one, minus 1 (:func:`ab_pairs`)."""
    t = np.array([p.time_us for p in points])
    return np.array([(pred[a] / pred[b]) / (t[a] / t[b]) - 1 for a, b in ab_pairs(points)])


def objective(errors: np.ndarray) -> float:
    """What the search minimises over the points' errors and the A/B pairs' ratio errors: every error within
    :data:`MAX_ERROR` first (a node that cannot keep them all scores 1 + its worst error), then their mean
    absolute value."""
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
    stagger is solved with the launch values, linearly on runs without it (the coarse search's surrogate);
    else runs include it and only the launch values are solved (the model itself)."""
    within = _within(searched, stagger)
    if (searched, stagger) not in sim.visited:
        sim.visited.append((dict(searched), stagger))
    runs = [sim.kernel(p, within) for p in points]
    raw = np.array([r[0] for r in runs])
    values, pred = solve_linear(points, raw, np.array([r[1] for r in runs]) if stagger is None else None)
    if stagger is not None:
        values["overhead.core_stagger"] = stagger
    errors = np.concatenate([pred / np.array([p.time_us for p in points]) - 1, pair_errors(points, pred)])
    return objective(errors), {**searched, **values}, pred


def _within(searched: dict[str, float], stagger: float | None) -> dict[str, float]:
    """The values a node's simulations run with."""
    return {**searched, "overhead.core_stagger": stagger or 0.0}


def _grid(low: float, high: float, nodes: int) -> list[float]:
    return [float(v) for v in np.exp(np.linspace(math.log(low), math.log(high), nodes))]


def _ranked(points: Sequence[Point], axes: list[list[float]], sim: Simulator,
            stagger: float | None) -> list[tuple[float, dict[str, float], np.ndarray]]:
    """The nodes of a grid (``axes``: the values of each :data:`SEARCHED` parameter), best first."""
    names = [p.key for p in SEARCHED]
    nodes = [dict(zip(names, node)) for node in itertools.product(*axes)]
    sim.prime(points, [_within(n, stagger) for n in nodes])
    return sorted((_evaluate(points, n, sim, stagger) for n in nodes), key=lambda r: r[0])


def _coarse_axes() -> list[list[float]]:
    return [_grid(par.low, par.high, COARSE[par.key]) for par in SEARCHED]


def _fine_axes(coarse: dict[str, float]) -> list[list[float]]:
    """Around the coarse best node: half a coarse step either way, :data:`FINE` nodes per parameter."""
    fine = []
    for par, axis in zip(SEARCHED, _coarse_axes()):
        step = math.log(axis[1] / axis[0]) / 2
        centre = coarse[par.key]
        fine.append(_grid(max(par.low, centre * math.exp(-step)), min(par.high, centre * math.exp(step)), FINE))
    return fine


def _grids(points: Sequence[Point], sim: Simulator) -> tuple[float, dict[str, float], np.ndarray, list[list[float]]]:
    """The coarse search, which estimates the core stagger; the coarse grid again with that stagger inside the
    simulations (the stagger spreads the cores' flag messages, so the sync unit's cycles show only with it);
    then the fine grid around its best node: (objective, values, predictions, fine axes)."""
    stagger = _ranked(points, _coarse_axes(), sim, None)[0][1]["overhead.core_stagger"]
    coarse = _ranked(points, _coarse_axes(), sim, stagger)[0][1]
    fine = _fine_axes(coarse)
    score, values, pred = _ranked(points, fine, sim, stagger)[0]
    return score, values, pred, fine


def fit(points: list[Point], sim: Simulator | None = None) -> Fit:
    """Fit :data:`FITTED` to ``points`` (module docstring)."""
    began = time.perf_counter()
    sim = sim or Simulator()
    _, values, pred, fine = _grids(points, sim)
    stagger = values["overhead.core_stagger"]
    for par, axis in zip(SEARCHED, fine):  # polish each between its fine neighbours (Brent, in log space)
        values, pred = _polish(points, par, axis, values, sim, stagger)
    values, pred = _polish_stagger(points, values, sim)
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
                          options={"xatol": 0.01, "maxiter": 10})
    best = _evaluate(points, {**searched, par.key: math.exp(res.x)}, sim, stagger)
    current = _evaluate(points, searched, sim, stagger)
    return (best[1], best[2]) if best[0] < current[0] else (current[1], current[2])


def _polish_stagger(points: Sequence[Point], values: dict[str, float], sim: Simulator
                    ) -> tuple[dict[str, float], np.ndarray]:
    """``values`` with the core stagger — so far the coarse search's linear estimate — moved to its best value
    within half and twice it, simulated (Brent)."""
    from scipy.optimize import minimize_scalar

    searched = {p.key: values[p.key] for p in SEARCHED}
    par, now = LINEAR[0], values["overhead.core_stagger"]
    low, high = max(par.low, now / 2), min(par.high, max(2 * now, par.high / 20))
    res = minimize_scalar(lambda x: _evaluate(points, searched, sim, float(x))[0], bounds=(low, high),
                          method="bounded", options={"xatol": 5.0, "maxiter": 10})
    best, current = (_evaluate(points, searched, sim, s) for s in (float(res.x), now))
    return (best[1], best[2]) if best[0] < current[0] else (current[1], current[2])


def cross_validate(points: list[Point], sim: Simulator | None = None) -> np.ndarray:
    """Each point's prediction (µs) by a refit to the points of every other shape (leave one shape out: both
    hosts, both timings of a launch).  A fold chooses, by the fit's objective on its points, among the nodes the
    full fit's search visited (the coarse grid, the fine grid, the polish: no new simulation of its points,
    ``sim`` holds them; a fresh ``sim`` runs the fit first), with its own launch values, and predicts the shape
    left out by simulating it at that node."""
    sim = sim or Simulator()
    shapes = sorted({p.shape for p in points}, key=str)
    if len(shapes) < 2:
        raise InputError("cross-validation needs points of at least two shapes")
    if not sim.visited:
        fit(points, sim)
    out = np.zeros(len(points))
    for shape in shapes:
        rest = [p for p in points if p.shape != shape]
        _, values, _ = min((_evaluate(rest, searched, sim, stagger) for searched, stagger in list(sim.visited)),
                           key=lambda r: r[0])
        searched = {k: v for k, v in values.items() if k.startswith(("gm.", "sync."))}
        for i, p in enumerate(points):
            if p.shape == shape:
                out[i] = predicted(p, sim.kernel(p, _within(searched, values["overhead.core_stagger"]))[0], values)
    return out


def half_width(points: Sequence[Point], held_out: np.ndarray) -> float:
    """The preset's interval half-width: of the n cross-validated relative errors' magnitudes, the
    ⌈0.9·(n + 1)⌉-th smallest (the largest when n < 9) — split-conformal prediction's 90 % bound, which a
    launch exchangeable with the measured ones exceeds with probability at most 10 %; the errors' 90th
    percentile, from a few dozen points, falls short of that."""
    errors = np.sort(np.abs(held_out / np.array([p.time_us for p in points]) - 1))
    return float(errors[conformal_rank(len(errors)) - 1])


def conformal_rank(n: int) -> int:
    """Which of n sorted error magnitudes bounds 90 % of a new one's (:func:`half_width`)."""
    return min(math.ceil(0.9 * (n + 1)), n)


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
    record: dict[str, Any] = {"builds": builds(f.points), "points": table, "parameters": parameter_rows(f, sens),
                              "mape": f.mape, "max_abs_error": float(np.max(np.abs(f.errors))),
                              "fit_seconds": f.seconds}
    if held_out is not None:
        err = held_out / np.array([p.time_us for p in f.points]) - 1
        record.update(cv_mape=float(np.mean(np.abs(err))), cv_max_abs_error=float(np.max(np.abs(err))),
                      half_width=half_width(f.points, held_out), cv_by_build=by_build(f.points, err))
    return record


def builds(points: Sequence[Point]) -> list[str]:
    """The builds among ``points`` (their names in reports), the shipped ones first in the order of
    :data:`~tfa_sim.spec.builds.SHIPPED`, then the others as they come."""
    names = list(dict.fromkeys(p.build for p in points))
    return [b for b in SHIPPED if b in names] + [b for b in names if b not in SHIPPED]


def by_build(points: Sequence[Point], errors: np.ndarray) -> dict[str, dict[str, float]]:
    """Per build: its points, their MAPE and largest |error| (``errors``: relative, one per point)."""
    out = {}
    for b in builds(points):
        mine = np.abs(np.array([e for p, e in zip(points, errors) if p.build == b]))
        out[b] = {"points": len(mine), "mape": float(np.mean(mine)), "max_abs_error": float(np.max(mine))}
    return out


def format_report(f: Fit, held_out: np.ndarray | None = None,
                  sens: dict[str, tuple[float, float]] | None = None) -> str:
    lines = [f"fit: {len(f.points)} points of the builds {', '.join(builds(f.points))}, {len(FITTED)} fitted "
             f"values, {f.seconds:.0f} s", "in-sample (full model)" + (", and each shape left out:"
                                                                       if held_out is not None else ":"),
             "  preset build  timing          host     blocks     s1  period  measured µs  predicted µs   error"
             + ("   left out  error" if held_out is not None else "")]
    for i, (p, q, e) in enumerate(zip(f.points, f.predicted, f.errors)):
        timing = f"{p.timing}→{p.timing_evidence}" if p.timing == "unknown" else p.timing
        row = (f"  {p.preset:6s} {p.build:6s} {timing:15s} {p.host or '-':8s} {p.row_blocks:6d} {p.s1:6d} "
               f"{p.sync_period:7d} {p.time_us:12.3f} {q:13.3f} {e:+7.1%}")
        if held_out is not None:
            row += f" {held_out[i]:10.3f} {held_out[i] / p.time_us - 1:+6.1%}"
        lines.append(row)
    lines.append(f"in-sample MAPE {f.mape:.1%}, max |error| {np.max(np.abs(f.errors)):.1%}")
    for (a, b), e in zip(ab_pairs(f.points), pair_errors(f.points, f.predicted)):
        pa, pb = f.points[a], f.points[b]
        lines.append(f"A/B {pa.kernel} S1 {pa.s1}, sync period {pa.sync_period} over {pb.sync_period}: measured "
                     f"{pa.time_us / pb.time_us:.3f}, predicted {f.predicted[a] / f.predicted[b]:.3f} ({e:+.1%})")
    if held_out is not None:
        err = held_out / np.array([p.time_us for p in f.points]) - 1
        lines.append(f"held out (each shape left out): MAPE {np.mean(np.abs(err)):.1%}, max |error| "
                     f"{np.max(np.abs(err)):.1%}; the presets' interval half-width "
                     f"{half_width(f.points, held_out):.1%} (the {conformal_rank(len(err))}th smallest |error|: "
                     f"split-conformal 90 %)")
        lines += [f"  {b}: {r['points']} points, held-out MAPE {r['mape']:.1%}, max |error| {r['max_abs_error']:.1%}"
                  for b, r in by_build(f.points, err).items()]
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
        return "[" + ", ".join(_toml(v) for v in value) + "]"
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

    launched = [p.launch for p in points]
    local = sorted({p.config().schedule.local_slot_num for p in points})
    return {"calibration.builds": builds(points), "calibration.choices": choice_words(points),
            "calibration.points": len(points),
            "calibration.half_width": round(width, 4), "calibration.blocks_max": max(g.units for g in launched),
            "calibration.waves_max": max(g.waves for g in launched),
            "calibration.s1": seen("s1"), "calibration.head": seen("head"), "calibration.cube_s0": seen("cube_s0"),
            "calibration.cube_s1": seen("cube_s1"), "calibration.tile_s1": seen("tile_s1"),
            "calibration.qk_preload": seen("qk_preload"), "calibration.cv_fifo_size": seen("cv_fifo_size"),
            "calibration.cv_fifo_cons_sync_period": seen("sync_period"), "calibration.s1_split": seen("s1_split"),
            "calibration.local_slot_num": local}


def write_presets(f: Fit, width: float, directory: Path | None, note: str) -> list[Path]:
    """Fitted presets for every shipped chip into ``directory`` (None: the shipped configs/hw).

    The boards with measured points get the fitted values (one set: the micro-architecture is shared); the
    others take them too, marked ``measured = false`` (wider intervals), their L2 bandwidth scaled by their own
    ``chip.gm_scale`` (910b4: 0.5, half the GM bandwidth of the others; docs/timing.md, "Hardware figures").
    """
    boards = {p.preset for p in f.points}
    written = []
    for name in preset_names():
        values: dict[str, Any] = {**f.values, **domain(f.points, width), "calibration.measured": name in boards}
        if name not in boards:
            values["gm.l2_bandwidth"] *= base_preset(name).gm_scale
        path = (directory or CONFIG_DIR / "hw") / f"{name}.toml"
        _rewrite_preset(Path(base_preset(name).source), path, values,
                        note + ("" if name in boards else " (no measured points of this board: the fitted values "
                                                          "of " + ", ".join(sorted(boards)) + ")"))
        written.append(path)
    return written
