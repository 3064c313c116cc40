"""The tuner's search space and its first stage, legality.

A space is a sweep file's ``[base]``, ``[axes]`` and ``[sweep]`` (constraints, metric, mode, max_points,
point_timeout), read by the sweep's own parser (:func:`tfa_sim.explore.sweep.spec.load_sweep`: the same
checks and one-line messages), merged over the config the user gave (CONFIG / ``--case`` / ``--set`` /
``--hw``): ``[base]`` sets keys on top of it, the axes vary over it.  A tune answers one case, so the axes
may name only schedule and tiling knobs, the kernel's design choices (``kernel.*`` but ``kernel.build``: a
build's variants, docs/kernel.md "Builds") and ``hardware.cores``; the case, the chip, the host, the build and
the numerics are the problem, set by the config or ``[base]``.  The tuner works timing-only: the points are
timing-only runs, ``[sweep] numerics = true`` and ``fold = true`` are refused (the finalists are full
simulations), and the metric is one of the times (``time_us``, ``launch_period_us``, ``host_sync_us``,
``total_cycles``).

Without ``--space`` the **default space** (:func:`default_axes`) is every schedule and tiling knob that
applies to the case, each over the values below plus the config's own: ``tiling.tile_s1`` 128…2048 (powers
of two dividing S1), ``tiling.cube_s1`` 64, 128, ``tiling.cube_s0`` 64, 128, 256, ``schedule.qk_preload``
1 … ``cv_fifo_size``, ``schedule.cv_fifo_cons_sync_period`` 1, 2, 4, 8; with a mask (causal, window or a
mask file) ``schedule.block_order``; when the config's launch (its grid, its ``s1_split``) leaves a quarter or
more of the core-time of its waves idle, ``schedule.s1_split`` 1, 2, 3, 4, 6, 8, 12, 24, "auto" (at most one chunk
per 128 keys);
with GQA (heads > kv_heads) and S0 below the largest CUBE_S0, ``schedule.gqa_pack``.  The buffer counts and
``cv_fifo_size`` and the design choices stay at the config's values (its build's unless set): give a
``--space`` file to search them.

Legality (:func:`legal_candidates`) builds every point's config: an illegal point is recorded with the
rule's message, a point a constraint rejects as ``excluded``.  With none left the tune stops with one line
naming the rule that removed most of them and how many (:func:`no_legal_candidate`).
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.constraints import failed_constraint
from tfa_sim.explore.sweep.execute import check_constraints
from tfa_sim.explore.sweep.points import indices, point_at, point_key, reference_config
from tfa_sim.explore.sweep.schema import filled
from tfa_sim.explore.sweep.spec import Sweep, load_sweep
from tfa_sim.spec.builds import change_build
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.load import build_config, parse_config

#: Metrics the tuner minimises (each a time: the screen estimates them all).
METRICS = ("time_us", "launch_period_us", "host_sync_us", "total_cycles")
#: Default values of each knob of the default space (the config's own value is added).
TILE_S1 = (128, 256, 512, 1024, 2048)
CUBE_S1 = (64, 128)
CUBE_S0 = (64, 128, 256)
SYNC_PERIODS = (1, 2, 4, 8)
BLOCK_ORDERS = ("row", "zigzag", "longest_first")
S1_SPLITS: tuple[int | str, ...] = (1, 2, 3, 4, 6, 8, 12, 24, "auto")
#: Idle share of the waves' core-time from which the default space tries s1_split.
IDLE_FOR_SPLIT = 0.25


@dataclass(frozen=True)
class Space:
    """The points to tune: ``sweep`` with its ``base`` the user's config (numerics off) under the file's
    ``[base]``; ``source`` names where the axes came from."""

    sweep: Sweep
    source: str

    @property
    def base(self) -> dict[str, dict[str, Any]]:
        full = filled(self.sweep.base)
        assert full is not None, "load_space builds the base from a Config"
        return full

    def reference(self) -> dict[str, dict[str, Any]]:
        """The kernel's defaults for the case: the sweep's reference point of the base's shape."""
        return reference_config(self.base)


@dataclass
class Candidate:
    """One point of the space and how far it got: ``stage`` legality, screen or simulated; ``status`` illegal,
    excluded, schedule_error, screened, twin (the same blocks and programs as a better-ranked candidate), or
    a simulated row's status (ok, schedule_error, timeout, error)."""

    index: int
    overrides: dict[str, Any]
    key: str = ""
    config: Config | None = None
    stage: str = "legality"
    status: str = "illegal"
    message: str = ""
    estimate: float | None = None  # the screen's estimate of the metric
    screen_bound: str = ""
    fingerprint: Hashable = None
    row: dict[str, Any] | None = field(default=None, repr=False)


def _tunable(key: str) -> bool:
    section = key.partition(".")[0]
    return section in ("tiling", "schedule", "listings") or key == "hardware.cores" or (section == "kernel" and
                                                                             key != "kernel.build")


def load_space(config: Config, source: str | Path | Mapping[str, Any] | None) -> Space:
    """The space of ``source`` (a sweep file, its tables as a mapping, or None: the default space) over
    ``config`` (one-line :class:`InputError` for a malformed file, an unknown knob, an axis that is not a
    knob, an option the tuner cannot honour)."""
    user = config.to_dict()
    if source is None:
        sweep = Sweep(base=user, axes=default_axes(config))
        where = "the default space"
    else:
        where = "space spec" if isinstance(source, Mapping) else f"--space {Path(source)}"
        sweep = load_sweep(source)
        for key, _ in sweep.axes:
            if not _tunable(key):
                raise InputError(f"{where}: axis {key} is part of the problem, not of its schedule; a tune answers "
                                 f"one case: set it in [base] or with --set, and tune each value on its own")
        if sweep.numerics or sweep.fold:
            option = "numerics" if sweep.numerics else "fold"
            raise InputError(f"{where}: [sweep] {option} = true: the tuner simulates timing only, in full; drop "
                             f"{option}")
        if sweep.metric not in METRICS:
            raise InputError(f"{where}: [sweep] metric = {sweep.metric!r}: the tuner minimises a time; use one of "
                             f"{', '.join(METRICS)}")
        base = {s: {**values, **sweep.base.get(s, {})} for s, values in user.items()}
        if "build" in sweep.base.get("kernel", {}):  # the [base]'s build brings its choices: the config's are
            base = change_build(base, user["kernel"]["build"],  # its own build's, dropped but for [base]'s keys
                                keep={(s, k) for s, values in sweep.base.items() for k in values})
        if sweep.base.get("case") and "name" not in sweep.base["case"]:
            base["case"]["name"] = ""  # a shape changed by [base] is named after itself, as --set does
        sweep = dataclasses.replace(sweep, base=base)
    base = {s: dict(v) for s, v in sweep.base.items()}
    base["numerics"]["enabled"] = False
    parse_config(base)  # the shape's keys have their types (a [base] value of the wrong type: one line)
    sweep = dataclasses.replace(sweep, base=base, numerics=False)
    check_constraints(sweep)
    return Space(sweep, where)


def _with(options: tuple[Any, ...] | list[Any], own: Any) -> list[Any]:
    return list(options) + ([own] if own not in options else [])


def _idle_share(config: Config, pack: bool) -> float:
    """Idle share of the core-time of the waves of ``config``'s launch as its plan lays it out (its launch grid
    and ``s1_split``; its query heads packed if ``pack``)."""
    from tfa_sim.stages.plan import kernel_plan

    packed = dataclasses.replace(config, schedule=dataclasses.replace(config.schedule, gqa_pack=pack))
    return kernel_plan(packed).geometry.main.idle_share


def default_axes(config: Config) -> list[tuple[str, list[Any]]]:
    """The default space's axes for ``config`` (the module docstring)."""
    c, t, s = config.case, config.tiling, config.schedule
    axes: list[tuple[str, list[Any]]] = [
        ("tiling.tile_s1", _with([v for v in TILE_S1 if c.s1 % v == 0], t.tile_s1)),
        ("tiling.cube_s1", _with(CUBE_S1, t.cube_s1)),
        ("tiling.cube_s0", _with(CUBE_S0, t.cube_s0)),
        ("schedule.qk_preload", _with(list(range(1, s.cv_fifo_size + 1)), s.qk_preload)),
        ("schedule.cv_fifo_cons_sync_period", _with(SYNC_PERIODS, s.cv_fifo_cons_sync_period))]
    if c.causal or c.window is not None or c.mask:
        axes.append(("schedule.block_order", _with(BLOCK_ORDERS, s.block_order)))
    gqa = c.heads > c.kv_heads and c.s0 < max(_with(CUBE_S0, t.cube_s0))
    if max(_idle_share(config, pack) for pack in {False, gqa}) >= IDLE_FOR_SPLIT:
        splits = [v for v in S1_SPLITS if v == "auto" or int(v) <= max(1, c.s1 // min(TILE_S1))]
        axes.append(("schedule.s1_split", _with(splits, s.s1_split)))
    if gqa:
        axes.append(("schedule.gqa_pack", _with([False, True], s.gqa_pack)))
    return axes


def legal_candidates(space: Space) -> list[Candidate]:
    """Every point of the space with its config built: legal ones ``screened``-to-be (status ``legal``),
    the others ``illegal`` or ``excluded`` with the reason."""
    sweep, out = space.sweep, []
    for i in indices(sweep):
        point = point_at(sweep, i)
        cand = Candidate(i, point["overrides"])
        try:
            cand.config = build_config(point["config"])
        except InputError as exc:
            cand.message = str(exc)
            out.append(cand)
            continue
        full = cand.config.to_dict()
        cand.key = point_key(full)
        excluded = failed_constraint(sweep.constraints, full)
        cand.status, cand.message = ("excluded", excluded) if excluded else ("legal", "")
        out.append(cand)
    return out


def rule_of(message: str) -> str:
    """A message with its numbers blanked: messages of one rule with different values compare equal."""
    return re.sub(r"[0-9]+(\.[0-9]+)?", "#", message)


def no_legal_candidate(space: Space, candidates: list[Candidate]) -> InputError:
    """The one line for a space without a legal point: the rule that removed most points, and how many."""
    by_rule = Counter(rule_of(c.message) for c in candidates)
    rule, count = by_rule.most_common(1)[0]
    example = next(c.message for c in candidates if rule_of(c.message) == rule)
    return InputError(f"{space.source} has no legal candidate: {count} of its {len(candidates)} points are removed "
                      f"by \"{example}\"" + (f" (the other {len(candidates) - count} by {len(by_rule) - 1} more "
                                             f"rule(s))" if count < len(candidates) else "")
                      + "; widen the axes or change the config")
