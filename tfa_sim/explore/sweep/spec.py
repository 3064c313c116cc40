"""Sweep files: ``[base]``, ``[axes]``, ``[sweep]`` → a checked :class:`Sweep`.

A sweep file is a ``[base]`` config, an ``[axes]`` table of dotted keys to
values (a list, ``{start, stop, step}`` or ``{start, stop, factor}``, both
inclusive) and an optional ``[sweep]`` table (docs/guide/sweeps.md).  Everything
that can be checked without simulating is checked here, so a bad file stops
with one :class:`~tfa_sim.spec.errors.InputError` line before any point runs:
wrong types, unknown keys, empty or endless ranges, and grids larger than
``max_points`` (counted, never built).  Values that are well-formed but that
the config rejects (``"schedule.qk_preload" = [2, "four"]``) are not errors
of the file: those points are recorded as ``illegal``.
"""
from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.constraints import parse_constraint
from tfa_sim.explore.sweep.schema import check_key, show
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import plain

#: metric → which is better (``min`` or ``max``)
METRICS = {"time_us": min, "launch_period_us": min, "host_sync_us": min, "total_cycles": min, "tflops": max,
           "normalized_tflops": max}
DEFAULT_MAX_POINTS = 100_000
SWEEP_KEYS = ("metric", "mode", "budget", "seed", "numerics", "fold", "constraints", "max_points", "point_timeout")
SCALARS = (bool, int, float, str)


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep: ``axes`` holds each dotted key with its expanded values, in file order."""

    base: dict[str, dict[str, Any]]
    axes: list[tuple[str, list[Any]]]
    metric: str = "time_us"
    mode: str = "grid"
    budget: int = 0
    seed: int = 0
    numerics: bool = False
    fold: bool = False  # timing-only points estimated from short samples (tfa_sim.sim.fold)
    constraints: tuple[str, ...] = ()
    max_points: int = DEFAULT_MAX_POINTS
    point_timeout: float = 0.0  # seconds per point, 0: no limit (local executor)

    @property
    def size(self) -> int:
        """Points of the full grid (the product of the axis lengths), counted, not built."""
        return math.prod(len(values) for _key, values in self.axes)

    def definition(self) -> dict[str, Any]:
        """What decides the points and their rows (not the limits ``max_points`` and ``point_timeout``)."""
        d = {"base": self.base, "axes": [[k, v] for k, v in self.axes], "metric": self.metric, "mode": self.mode,
             "numerics": self.numerics, "fold": self.fold, "constraints": list(self.constraints)}
        if self.mode == "random":
            d.update(budget=self.budget, seed=self.seed)
        return d

    def digest(self) -> str:
        """Hash of :meth:`definition`: two files that parse to the same sweep have the same digest."""
        text = json.dumps(self.definition(), sort_keys=True, allow_nan=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_sweep(source: str | Path | Mapping[str, Any]) -> Sweep:
    """Read and check a sweep file, or the same tables given as a mapping (one-line :class:`InputError` for
    every problem)."""
    if isinstance(source, Mapping):
        data, where = dict(source), "sweep spec"
    else:
        data, where = read_tables(Path(source)), f"sweep file {Path(source)}"
    unknown = sorted(str(k) for k in set(data) - {"base", "axes", "sweep"})
    if unknown:
        raise InputError(f"{where}: unknown table(s) {unknown}; use [base], [axes], [sweep]")
    opts = _options(data.get("sweep", {}))
    sweep = Sweep(base=_base(data.get("base", {})), axes=_axes(data.get("axes"), opts["max_points"]), **opts)
    if sweep.mode == "grid" and sweep.size > sweep.max_points:
        raise InputError(f"the grid has {sweep.size} points > [sweep] max_points = {sweep.max_points}; narrow the "
                         f"axes, raise max_points, or use mode = \"random\" with a budget")
    return sweep


def read_tables(path: Path) -> dict[str, Any]:
    """A sweep file's tables, unchecked (:func:`load_sweep` checks them)."""
    if not path.exists():
        raise InputError(f"sweep file {path} not found; give an existing .toml file (examples in configs/sweeps/)")
    if not path.is_file():
        raise InputError(f"sweep file {path} is not a regular file; give a .toml file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read sweep file {path}: {exc.strerror or exc}; check its permissions") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"sweep file {path} is not UTF-8 text (bad byte at offset {exc.start}); "
                         f"save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"sweep file {path} does not parse: {exc}") from None
    except RecursionError:
        raise InputError(f"sweep file {path} does not parse: values nested too deeply") from None


def _base(base: Any) -> dict[str, dict[str, Any]]:
    """``[base]``: config sections of known keys with scalar values (types and legality: per point)."""
    if not isinstance(base, dict):
        raise InputError(f"[base] = {show(base)} must be a table of config sections, e.g. [base.case] s0 = 128")
    for section, table in base.items():
        if not isinstance(table, dict):
            raise InputError(f"[base] {plain(section)} = {show(table)} must be a table, e.g. "
                             f"[base.{plain(section)}]")
        for key, value in table.items():
            where = f"[base.{plain(section)}] {plain(key)}"  # keys from a file may hold control characters
            check_key(f"{section}.{key}", where)
            if not isinstance(value, SCALARS) and not ((section, key) == ("kernel", "plugins") and
                                                       isinstance(value, list)):
                raise InputError(f"{where} = {show(value)}: config values are numbers, booleans or strings (and "
                                 f"kernel.plugins a list)")
    if "enabled" in base.get("numerics", {}):
        raise InputError("[base.numerics] enabled: set [sweep] numerics = true/false instead")
    return base


def _axes(table: Any, max_points: int) -> list[tuple[str, list[Any]]]:
    if not isinstance(table, dict) or not table:
        what = "is empty" if table in (None, {}) else f"= {show(table)} is not a table"
        raise InputError(f"[axes] {what}; add e.g. \"schedule.qk_preload\" = [1, 2, 4]")
    axes = []
    for key, spec in table.items():
        if "." not in key:
            raise InputError(f"sweep axis {key!r}: use a quoted section.key, e.g. \"schedule.qk_preload\"")
        check_key(key, f"sweep axis {key!r}")
        axes.append((key, axis_values(key, spec, max_points)))
    return axes


def axis_values(key: str, spec: Any, limit: int = DEFAULT_MAX_POINTS) -> list[Any]:
    """An axis spec → its values: a non-empty list of distinct scalars, or an inclusive range."""
    if isinstance(spec, list):
        return _listed(key, spec, limit)
    if isinstance(spec, dict):
        return _ranged(key, spec, limit)
    raise InputError(f"sweep axis {key} = {show(spec)}: give a non-empty list or {{start, stop, step|factor}}")


def _listed(key: str, values: list[Any], limit: int) -> list[Any]:
    if not values:
        raise InputError(f"sweep axis {key} = []: give a non-empty list or {{start, stop, step|factor}}")
    if len(values) > limit:
        raise InputError(f"sweep axis {key} has {len(values)} values > [sweep] max_points = {limit}; shorten it")
    seen = set()
    for v in values:
        if not isinstance(v, SCALARS):
            raise InputError(f"sweep axis {key}: value {show(v)} is not a number, boolean or string")
        text = json.dumps(v)
        if text in seen:
            raise InputError(f"sweep axis {key}: value {show(v)} is listed twice; list each value once")
        seen.add(text)
    return list(values)


def _ranged(key: str, spec: dict[str, Any], limit: int) -> list[Any]:
    """``{start, stop, step}`` (start + i·step) or ``{start, stop, factor}`` (start·factorⁱ), stop inclusive."""
    form = {"start", "stop", "step"} if "step" in spec else {"start", "stop", "factor"}
    if set(spec) != form:
        raise InputError(f"sweep axis {key} = {show(spec)}: give exactly {{start, stop, step}} or "
                         f"{{start, stop, factor}}")
    for name, value in spec.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"sweep axis {key}: {name} = {show(value)} must be a finite number")
    start, stop = spec["start"], spec["stop"]
    if "step" in spec and spec["step"] <= 0:
        raise InputError(f"sweep axis {key}: step = {spec['step']} must be > 0 (give start ≤ stop)")
    if "factor" in spec and (spec["factor"] <= 1 or start <= 0):
        raise InputError(f"sweep axis {key}: factor = {spec['factor']} must be > 1 and start = {start} > 0")
    values: list[Any] = []
    v = start
    while v <= stop and len(values) <= limit:
        if values and v <= values[-1]:
            raise InputError(f"sweep axis {key}: the step is too small to change {show(v)}; use a larger step")
        values.append(v)
        i = len(values)
        v = start + i * spec["step"] if "step" in spec else v * spec["factor"]
        v = v if isinstance(v, int) else float(f"{v:.12g}")  # 0.1·3 → 0.3, not 0.30000000000000004
    if not values:
        raise InputError(f"sweep axis {key}: stop = {stop} < start = {start} gives no values; swap them")
    if len(values) > limit:
        raise InputError(f"sweep axis {key} has more than [sweep] max_points = {limit} values; narrow it")
    return values


def _options(opts: Any) -> dict[str, Any]:
    """``[sweep]`` → keyword arguments of :class:`Sweep`, each of the right type."""
    if not isinstance(opts, dict):
        raise InputError(f"[sweep] = {show(opts)} must be a table of keys ({', '.join(SWEEP_KEYS)})")
    unknown = sorted(set(opts) - set(SWEEP_KEYS))
    if unknown:
        raise InputError(f"unknown [sweep] key(s) {unknown}; known: {', '.join(SWEEP_KEYS)}")
    out = {"metric": _choice(opts, "metric", tuple(METRICS)), "mode": _choice(opts, "mode", ("grid", "random")),
           "budget": _number(opts, "budget", 0, int, 0), "seed": _number(opts, "seed", 0, int, None),
           "max_points": _number(opts, "max_points", DEFAULT_MAX_POINTS, int, 1),
           "point_timeout": float(_number(opts, "point_timeout", 0, (int, float), 0)),
           "numerics": opts.get("numerics", False), "fold": opts.get("fold", False),
           "constraints": _constraints(opts.get("constraints", []))}
    for key in ("numerics", "fold"):
        if not isinstance(out[key], bool):
            raise InputError(f"[sweep] {key} = {show(out[key])} must be true or false (not a string)")
    if out["numerics"] and out["fold"]:
        raise InputError("[sweep] fold = true estimates timing-only points: drop numerics = true or fold")
    if out["mode"] == "random" and not 1 <= out["budget"] <= out["max_points"]:
        raise InputError(f"[sweep] mode = \"random\" needs 1 ≤ budget ≤ max_points ({out['max_points']}); "
                         f"got budget = {out['budget']}")
    return out


def _choice(opts: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = opts.get(key, choices[0])
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"[sweep] {key} = {show(value)}: use one of {', '.join(choices)}")
    return value


def _number(opts: dict[str, Any], key: str, default: int, kinds: Any, low: int | None) -> Any:
    value = opts.get(key, default)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and (low is None or value >= low)
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        bound = f" ≥ {low}" if low is not None else ""
        kind = "an integer" if kinds is int else "a number"
        raise InputError(f"[sweep] {key} = {show(value)} must be {kind}{bound}, e.g. {key} = {default}")
    return value


def _constraints(value: Any) -> tuple[str, ...]:
    """A string or a list of strings, each a valid constraint expression."""
    exprs = [value] if isinstance(value, str) else value
    if not isinstance(exprs, list) or not all(isinstance(e, str) for e in exprs):
        raise InputError(f"[sweep] constraints = {show(value)} must be a string or a list of strings, e.g. "
                         f"[\"schedule.qk_preload < schedule.ub_exp_max\"]")
    for expr in exprs:
        parse_constraint(expr)
    return tuple(exprs)

