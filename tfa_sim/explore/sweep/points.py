"""A sweep's points, their keys and shapes, and the reference point of each shape.

Points are numbered in grid order (the last axis varies fastest, as
``itertools.product``); :func:`point_at` decodes a number into the point
through the mixed-radix product of the axis lengths, so random mode samples
numbers and never builds the full grid.  A point is identified by a hash of
its config (:func:`point_key`).  The *reference* of a shape is the kernel's
default tiling and schedule for it, timing only: the report's speed-ups are
measured against it.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from typing import Any

from tfa_sim.explore.sweep.schema import SCHEMA
from tfa_sim.explore.sweep.spec import Sweep
from tfa_sim.spec.builds import build_defaults
from tfa_sim.spec.config import KernelConfig, merge

SHAPE_SECTIONS = ("case", "hardware")  # the problem and the chip: with the build, a point's shape
#: The build and the plugins its values need; its design choices are knobs a sweep varies like the schedule's.
SHAPE_KEYS = (("kernel", "build"), ("kernel", "plugins"))


def is_shape(dotted: str) -> bool:
    """Whether the config key ``section.key`` is part of a point's shape (:func:`shape_of`)."""
    section, _, key = dotted.partition(".")
    return section in SHAPE_SECTIONS or (section, key) in SHAPE_KEYS


def point_key(config: dict[str, Any]) -> str:
    """16 hex digits identifying a config (a nested dict as given, or filled)."""
    return hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def indices(sweep: Sweep) -> list[int]:
    """The point numbers to run: all of the grid, or ``budget`` distinct ones drawn with ``seed``
    (Floyd's algorithm over ``range(size)``, sorted; all of them if the budget covers the grid)."""
    size = sweep.size
    if sweep.mode == "grid" or sweep.budget >= size:
        return list(range(size))
    rng, chosen = random.Random(sweep.seed), set()
    for j in range(size - sweep.budget, size):
        t = rng.randrange(j + 1)
        chosen.add(j if t in chosen else t)
    return sorted(chosen)


def point_at(sweep: Sweep, index: int) -> dict[str, Any]:
    """Point number ``index`` as {key, overrides, config (the nested dict given to build_config)}."""
    combo = []
    for _key, values in reversed(sweep.axes):
        index, digit = divmod(index, len(values))
        combo.append(values[digit])
    combo.reverse()
    data: dict[str, Any] = {k: dict(v) for k, v in sweep.base.items()}
    data["numerics"] = {**data.get("numerics", {}), "enabled": sweep.numerics}
    for (dotted, _values), value in zip(sweep.axes, combo):
        section, key = dotted.split(".", 1)
        data = merge(data, section, key, value)
    return {"key": point_key(data), "overrides": dict(zip((k for k, _ in sweep.axes), combo)), "config": data}


def points(sweep: Sweep) -> list[dict[str, Any]]:
    """Every point to run, as a list in :func:`indices` order (at most ``max_points`` of them)."""
    return [point_at(sweep, i) for i in indices(sweep)]


def shape_of(full: dict[str, dict[str, Any]]) -> tuple:
    """The problem a filled config solves: its case, hardware and build (everything a schedule or a design choice
    cannot change)."""
    return tuple((s, k, full[s][k]) for s in SHAPE_SECTIONS for k in sorted(SCHEMA[s])) + tuple(
        (s, k, tuple(v) if isinstance(v := full[s][k], list) else v) for s, k in SHAPE_KEYS)


def shape_label(shape: tuple) -> str:
    """``H128 S0=128 S1=1024 on 910b2``, plus what differs from a one-head non-causal run of the manual build on
    all cores."""
    v = {k: value for _s, k, value in shape}
    extra = (" causal" if v["causal"] else "") + (
        f" batch {v['batch']} heads {v['heads']}/{v['kv_heads']}" if (v["batch"], v["heads"]) != (1, 1) else "")
    chip = v["file"] or v["preset"]
    build = f", kernel.build {v['build']}" if v["build"] != KernelConfig.build else ""
    return f"H{v['head']} S0={v['s0']} S1={v['s1']}{extra} on {chip}" + (f" ({v['cores']} cores)" if v["cores"]
                                                                           else "") + build


def reference_config(full: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The filled config of the reference point of ``full``'s shape: the build's design choices and its default
    tiling and schedule (docs/kernel.md, "Builds"), timing only."""
    out = {s: dict(SCHEMA[s]) for s in SCHEMA}
    for section in SHAPE_SECTIONS:
        out[section] = dict(full[section])
    for section, key in SHAPE_KEYS:
        out[section][key] = full[section][key]
    for (section, key), value in build_defaults(out).items():
        out[section][key] = value
    out["numerics"]["enabled"] = False
    return out


def reference_point(full: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The reference of ``full``'s shape as a point to run."""
    config = reference_config(full)
    return {"key": point_key(config), "overrides": {}, "config": config}


def cost(full: dict[str, dict[str, Any]]) -> float:
    """A rough relative run time (score elements of the whole problem) so the longest points start first;
    0 for values the config will reject anyway."""
    c = full["case"]
    dims = [c[k] for k in ("batch", "heads", "s0", "s1")]
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return 0.0
    return float(min(math.prod(dims), 10**300)) * (0.5 if c["causal"] is True else 1.0)
