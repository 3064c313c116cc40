"""Board profiles as calibration points: ``tfa-sim calibrate --profiles LIST`` (docs/calibration.md, "Profiles as
points").

LIST is a TOML file of ``[[profile]]`` tables or a CSV with the same keys as columns: ``dir`` (the profile, as
``tfa-sim profile`` takes it: msprof's or torch_npu's; relative to LIST), ``kernel`` (the build that ran: a shipped
build, manual, jit or dsl, or a bundle file, relative to LIST), the config it ran — ``config`` (a file, relative
to LIST) or ``case`` (a shipped case), ``set``
(``section.key`` values; in a CSV ``section.key=value`` words) and ``hw`` (a shipped preset's name) — ``op`` where
the profile holds several operators and ``launch`` (0-based) to take one of its launches rather than their mean.
Each becomes a :class:`~tfa_sim.explore.points.Point` of timing ``task`` (the board's task duration: the model's
kernel time), checked as ``tfa-sim profile`` checks it (Block Dim, which the profile must give, the clock, the
chip).  The per-pipe busy times are no fit target: after the fit, each profile's board/model ratio per pipe at the
fitted values is reported beside it (:func:`pipes_beside`).
"""
from __future__ import annotations

import csv
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfa_sim.engine.report import timing_summary
from tfa_sim.explore.calibrate import Fit
from tfa_sim.explore.points import Point, select_points
from tfa_sim.rundir.msprof import SIMULATED, BoardProfile, read_profile
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec import load
from tfa_sim.spec.builds import SHIPPED, is_path, load_bundle
from tfa_sim.spec.config import CHOICE_KEYS, Config, parse_override
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_path, decode_text, read_bytes, show
from tfa_sim.stages.plan import kernel_plan
from tfa_sim.views.profile import check_clock, check_launch, damaged_entry, damaged_note, side_by_side

#: A LIST entry's keys: True for the required ones.
KEYS = {"dir": True, "kernel": True, "config": False, "case": False, "set": False, "hw": False, "op": False,
        "launch": False}
#: The config keys a calibration point carries (anything else must stay at its default).
SECTIONS = ("case", "tiling", "schedule")


@dataclass
class Profiled:
    """One LIST entry: where it is, its point, the config it ran and the profile read."""

    where: str
    point: Point
    config: Config
    board: BoardProfile


def read_list(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a profiles LIST (TOML or CSV), each with ``where`` (file and entry) for messages."""
    path = check_path(path, "--profiles")
    text = decode_text(read_bytes(path, "--profiles list", "give a TOML or CSV of profiles (docs/calibration.md)",
                                  max_bytes=1 << 24), path, "--profiles list")
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"--profiles {path} is not TOML ({exc})") from None
        entries = data.get("profile")
        if set(data) - {"profile"} or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise InputError(f"--profiles {path}: expected [[profile]] tables only (keys {', '.join(KEYS)})")
    elif path.suffix.lower() == ".csv":
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        entries = [{k: v.strip() for k, v in row.items() if k and v and v.strip()} for row in csv.DictReader(lines)]
        for e in entries:
            e["set"] = dict(_set_word(word) for word in e.get("set", "").replace(";", " ").split())
    else:
        raise InputError(f"--profiles {path}: give a .toml or .csv file (docs/calibration.md, \"Profiles as points\")")
    if not entries:
        raise InputError(f"--profiles {path} names no profile; add one per profiled launch")
    for n, entry in enumerate(entries, start=1):
        entry["where"] = f"--profiles {path} entry {n}"
        unknown = sorted(set(entry) - set(KEYS) - {"where"})
        missing = [k for k, needed in KEYS.items() if needed and not entry.get(k)]
        if unknown or missing:
            raise InputError(f"{entry['where']}: {'unknown key ' + show(unknown[0]) if unknown else 'no ' + missing[0]}"
                             f"; an entry has {', '.join(KEYS)} ({', '.join(k for k in KEYS if KEYS[k])} required)")
        texts = [k for k in KEYS if k not in ("set", "launch") and k in entry and not isinstance(entry[k], str)]
        if texts:
            raise InputError(f"{entry['where']}: {texts[0]} = {show(entry[texts[0]])} must be a string (a name or a "
                             f"path, in quotes)")
    return entries


def _set_word(word: str) -> tuple[str, Any]:
    section, key, value = parse_override(word)
    return f"{section}.{key}", value


def _settings(entry: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """The entry's ``set`` (flat ``section.key`` or nested tables) and ``hw`` as config settings, timing only."""
    table = entry.get("set") or {}
    if not isinstance(table, dict):
        raise InputError(f"{entry['where']}: set must be a table of section.key values")
    out: list[tuple[str, str, Any]] = []
    for name, value in table.items():
        pairs = value.items() if isinstance(value, dict) else [(name.partition(".")[2], value)]
        section = name if isinstance(value, dict) else name.partition(".")[0]
        out += [(section, key, v) for key, v in pairs]
    if entry.get("hw"):
        out.append(("hardware", "preset", entry["hw"]))
    return out + [("numerics", "enabled", False)]


def _launch(entry: dict[str, Any]) -> int | None:
    """The entry's ``launch``: a whole number ≥ 0 (in a CSV its digits), or None."""
    value = entry.get("launch")
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise InputError(f"{entry['where']}: launch = {show(value)} must be a launch's number, 0 or more (0-based, in "
                     f"start-time order)")


def _relative(base: Path, text: Any, where: str, key: str) -> Path:
    if not isinstance(text, str):
        raise InputError(f"{where}: {key} must be a path, not {show(text)}")
    path = check_path(text, f"{where}: {key}")
    return path if path.is_absolute() else base / path


def profiled(entry: dict[str, Any], base: Path) -> Profiled:
    """A LIST entry read, checked against its config and made a point of timing ``task``; ``kernel``: the build
    that ran, a shipped build's name or a bundle file's path (relative to the LIST)."""
    where, build = entry["where"], entry["kernel"]
    if is_path(build):
        build = str(_relative(base, build, where, "kernel").resolve())
    try:
        load_bundle(build)
    except InputError:
        raise InputError(f"{where}: kernel {show(entry['kernel'])} must be the build that ran: a shipped build "
                         f"({', '.join(SHIPPED)}) or a bundle file") from None
    config_file = _relative(base, entry["config"], where, "config") if entry.get("config") else None
    config = load.load_config(config_file, entry.get("case"), (), [*_settings(entry), ("kernel", "build", build)])
    if config.hardware.file:
        raise InputError(f"{where}: a calibration point names a shipped preset (hardware.preset), not a preset file")
    board = read_profile(_relative(base, entry["dir"], where, "dir"), entry.get("op"), pipes=False,
                         launch=_launch(entry))
    if board.block_dim is None:
        raise InputError(f"{where}: profile {board.source} has no Block Dim (torch_npu's Level0 writes none), so it "
                         f"cannot be checked as the config's launch: collect with profiler_level Level1")
    c, t, s = config.case, config.tiling, config.schedule
    point = Point(config.hardware.preset, build, "task", "", c.head, c.s0, c.s1, t.cube_s0, t.cube_s1,
                  t.tile_s1, s.qk_preload, s.cv_fifo_size, s.cv_fifo_cons_sync_period, c.causal, board.task_us,
                  config.hardware.cores, choices=tuple((key, getattr(config.kernel, key)) for key in CHOICE_KEYS))
    _representable(point, config, where)
    plan = kernel_plan(config)
    check_clock(board, plan.hw)
    check_launch(board, config.name, plan.geometry.main.grid, 1)
    return Profiled(where, point, config, board)


def _representable(point: Point, config: Config, where: str) -> None:
    """Refuse a config a calibration point cannot say (more heads, a mask file, another buffer count …)."""
    said = point.config().to_dict()
    ran = config.to_dict()
    for section in SECTIONS:
        for key, value in ran[section].items():
            if key != "name" and said[section][key] != value:
                raise InputError(f"{where}: {section}.{key} = {show(value)}: a calibration point has "
                                 f"{show(said[section][key])} there (points.csv's columns); profile a launch the "
                                 f"points can describe, or leave the profile out")


def calibration_points(points_files: list[str], exclude: list[int], kernel: str | None,
                       profiles: str | None) -> tuple[list[Point], list[Profiled]]:
    """The points of one fit: ``--points`` files (the shipped sets when neither they nor ``--profiles`` are
    given) and the profiles of ``--profiles``; only build ``kernel``'s when it is given."""
    if profiles is None:
        return select_points(points_files, exclude, kernel), []
    if exclude and not points_files:
        raise InputError("--exclude ROW leaves out rows of --points FILE; give --points FILE or drop --exclude")
    listed = Path(check_path(profiles, "--profiles"))
    found = [profiled(entry, listed.parent) for entry in read_list(listed)]
    rows = select_points(points_files, exclude, kernel) if points_files else []
    build = str(Path(kernel).resolve()) if kernel is not None and is_path(kernel) else kernel
    chosen = [p for p in found if build is None or p.point.kernel == build]
    if not rows and not chosen:
        raise InputError(f"--profiles {listed}: no profile of kernel {kernel!r}; it has "
                         f"{', '.join(sorted({p.point.build for p in found}))}")
    return rows + [p.point for p in chosen], chosen


def pipes_beside(fit: Fit, profiles: list[Profiled]) -> str:
    """Each profile's board/model busy ratio per simulated pipe, the model run at the fitted values: what the fit
    leaves for the pipes (they are not fitted)."""
    if not profiles:
        return ""
    lines = ["profiles: each pipe's busy time, board/model, at the fitted values (not fit targets):"]
    for p in profiles:
        plan = p.point.plan(fit.values)
        sim = simulate(plan, None, log_events=False)
        pipes = side_by_side(p.board, timing_summary(sim, p.config), [], plan.geometry.main)
        ratios = ", ".join(f"{name} {pipes[name]['ratio']:.2f}" for name in SIMULATED if pipes[name]["ratio"])
        read = (f"launch {p.board.launch} of {p.board.launches}" if p.board.launch is not None
                else f"mean of {p.board.launches} launches" if p.board.launches > 1 else "1 launch")
        lines.append(f"  {p.where} ({p.point.label}, task {p.point.time_us:.3f} µs, {read}, model "
                     f"{sim.time_us:.3f} µs): "
                     + (ratios or "no pipe columns in the profile"))
        if p.board.damaged:
            lines.append(f"    {damaged_note([damaged_entry(d) for d in p.board.damaged])}")
    return "\n" + "\n".join(lines)
