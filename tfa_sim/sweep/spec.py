"""Sweep files: ``[base]``, ``[axes]``, ``[sweep]`` → a :class:`Sweep`; constraints; the points.

A sweep file is a ``[base]`` config, an ``[axes]`` table of dotted keys to
values (a list, ``{start, stop, step}`` or ``{start, stop, factor}``, both
inclusive) and an optional ``[sweep]`` table: ``metric`` (``time_us``,
``total_cycles``, ``tflops``, ``normalized_tflops``), ``mode`` (``grid`` or
``random`` with ``budget`` and ``seed``), ``numerics`` (default false: timing
only) and ``constraints`` (expressions over config keys such as
``"schedule.qk_preload <= schedule.cv_fifo_size"``).
"""
from __future__ import annotations

import ast
import hashlib
import itertools
import json
import operator
import random
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfa_sim.config import merge
from tfa_sim.errors import InputError

METRICS = {"time_us": min, "total_cycles": min, "tflops": max, "normalized_tflops": max}
SHAPE_KEYS = ("head", "s0", "s1", "causal", "batch", "heads", "kv_heads")


@dataclass(frozen=True)
class Sweep:
    base: dict[str, Any]
    axes: list[tuple[str, list[Any]]]
    metric: str = "time_us"
    mode: str = "grid"
    budget: int = 0
    seed: int = 0
    numerics: bool = False
    constraints: tuple[str, ...] = ()


def _axis_values(key: str, spec: Any) -> list[Any]:
    if isinstance(spec, list) and spec:
        return spec
    if isinstance(spec, dict) and {"start", "stop"} <= set(spec) and len(set(spec) & {"step", "factor"}) == 1:
        values, v = [], spec["start"]
        step, factor = spec.get("step"), spec.get("factor")
        if (step is not None and step <= 0) or (factor is not None and factor <= 1):
            raise InputError(f"sweep axis {key}: step must be > 0 and factor > 1")
        while v <= spec["stop"]:
            values.append(v)
            v = v + step if step is not None else v * factor
        return values
    raise InputError(f"sweep axis {key} = {spec!r}: give a non-empty list or {{start, stop, step|factor}}")


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"sweep file {path} not found")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"sweep file {path} does not parse: {exc}") from None
    unknown = set(data) - {"base", "axes", "sweep"}
    if unknown:
        raise InputError(f"sweep file {path}: unknown table(s) {sorted(unknown)}; use [base], [axes], [sweep]")
    if not data.get("axes"):
        raise InputError(f"sweep file {path}: [axes] is empty; add e.g. \"schedule.qk_preload\" = [1, 2, 4]")
    axes = []
    for key, spec in data["axes"].items():
        if "." not in key:
            raise InputError(f"sweep axis {key!r}: use section.key, e.g. \"schedule.qk_preload\"")
        axes.append((key, _axis_values(key, spec)))
    opts = dict(data.get("sweep", {}))
    known = {"metric", "mode", "budget", "seed", "numerics", "constraints"}
    if set(opts) - known:
        raise InputError(f"sweep file {path}: unknown [sweep] key(s) {sorted(set(opts) - known)}; known: "
                         f"{', '.join(sorted(known))}")
    sweep = Sweep(base=data.get("base", {}), axes=axes, metric=opts.get("metric", "time_us"),
                  mode=opts.get("mode", "grid"), budget=int(opts.get("budget", 0)), seed=int(opts.get("seed", 0)),
                  numerics=bool(opts.get("numerics", False)), constraints=tuple(opts.get("constraints", ())))
    if sweep.metric not in METRICS:
        raise InputError(f"[sweep] metric = {sweep.metric!r}: use one of {', '.join(METRICS)}")
    if sweep.mode not in ("grid", "random") or (sweep.mode == "random" and sweep.budget < 1):
        raise InputError("[sweep] mode must be \"grid\", or \"random\" with budget ≥ 1")
    for expr in sweep.constraints:
        _parse_constraint(expr)
    return sweep


# ---- constraints: a tiny expression language over config keys --------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _parse_constraint(expr: str) -> ast.Expression:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise InputError(f"constraint {expr!r} does not parse; write e.g. schedule.qk_preload <= 4") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.Compare, ast.BinOp, ast.BoolOp, ast.And, ast.Or, ast.Name,
                                 ast.Attribute, ast.Constant, ast.Load, *_OPS)):
            raise InputError(f"constraint {expr!r}: only arithmetic, comparisons, and/or over config keys")
    return tree


def _eval(node: ast.AST, config: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, config)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        try:
            return config[node.value.id][node.attr]
        except KeyError:
            raise InputError(f"constraint names unknown key {node.value.id}.{node.attr}") from None
    if isinstance(node, ast.BinOp):
        return _OPS[type(node.op)](_eval(node.left, config), _eval(node.right, config))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, config) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, config)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, config)
            if not _OPS[type(op)](left, right):
                return False
            left = right
        return True
    raise InputError(f"constraint element {ast.dump(node)} is not supported")


# ---- points ------------------------------------------------------------------------------------
def point_key(config: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def points(sweep: Sweep) -> list[dict[str, Any]]:
    """Every point as {key, overrides, config (nested dict)}, grid order or a seeded random sample."""
    combos = list(itertools.product(*[values for _k, values in sweep.axes]))
    if sweep.mode == "random" and sweep.budget < len(combos):
        combos = random.Random(sweep.seed).sample(combos, sweep.budget)
    out = []
    for combo in combos:
        data = {k: dict(v) for k, v in sweep.base.items()}
        data["numerics"] = {**data.get("numerics", {}), "enabled": sweep.numerics}
        for (dotted, _values), value in zip(sweep.axes, combo):
            section, key = dotted.split(".", 1)
            data = merge(data, section, key, value)
        out.append({"key": point_key(data), "overrides": dict(zip((k for k, _ in sweep.axes), combo)),
                    "config": data})
    return out


