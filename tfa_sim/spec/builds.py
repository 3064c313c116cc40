"""Builds of the kernel as data: bundle files of design choices, the one place that knows builds by name.

A build bundle (``configs/builds/NAME.toml``, installed as ``tfa_sim/configs/builds/``; or any file a config names
as ``kernel.build = "path/to/bundle.toml"``, relative to the working directory like ``hardware.file``) holds:

* ``[kernel]``: every design choice of :class:`~tfa_sim.spec.config.KernelConfig` but ``build`` (launch grid,
  prefetch, stage order, P/V loads, talloc, accumulators, vector barriers, exp ring, GU rows, masks);
* ``[tiling]``, ``[schedule]``: the defaults the build gives those sections (the port's preload 3, say);
* ``[[when]]``: defaults from a shape on — ``s1_at_least = N`` and section tables, applied when S1 ≥ N.

A config's own keys win over the bundle's (a what-if the build does not compile).  Every key and value is checked
as a config's is; a bundle that leaves a choice out, names another build or an unknown key is refused in one line.
"""
from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tfa_sim.spec.config import (
    CONFIG_DIR,
    SECTION_TYPES,
    CaseConfig,
    KernelConfig,
    merge,
    section_of,
    suggest,
)
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_path, decode_text, read_bytes, show

BUILDS_DIR = CONFIG_DIR / "builds"
#: The shipped builds, in the order reports list them (the files in BUILDS_DIR, tests/test_builds.py).
SHIPPED = ("manual", "jit", "dsl")
#: The design choices a bundle sets: every [kernel] key but ``build``.
CHOICE_KEYS = tuple(f.name for f in dataclasses.fields(KernelConfig) if f.name != "build")
#: The sections a bundle may give defaults for, beside its [kernel] choices.
DEFAULT_SECTIONS = ("tiling", "schedule")
MAX_BUNDLE_BYTES = 1 << 16

Settings = dict[tuple[str, str], Any]


@dataclass(frozen=True)
class Bundle:
    """One build: its name, its choices and section defaults (``settings``), and the defaults from an S1 on."""

    name: str
    settings: Settings
    when: tuple[tuple[int, Settings], ...] = ()

    @property
    def choices(self) -> dict[str, Any]:
        """The design choices, as the [kernel] keys."""
        return {key: value for (section, key), value in self.settings.items() if section == "kernel"}

    def defaults(self, s1: Any) -> Settings:
        """What the build sets for a case of ``s1`` columns (any value: only an integer meets a [[when]])."""
        out = dict(self.settings)
        for least, settings in self.when:
            if isinstance(s1, int) and not isinstance(s1, bool) and s1 >= least:
                out.update(settings)
        return out


def is_path(build: str) -> bool:
    """A ``kernel.build`` that names a file rather than a shipped build."""
    return build.endswith(".toml") or "/" in build or "\\" in build


def _table(where: str, section: str, given: Any) -> Settings:
    """``given`` as the (section, key) settings of one section, every key known and of the right type."""
    try:
        section_of(section, SECTION_TYPES[section], given)
    except InputError as exc:
        raise InputError(f"{where}: {str(exc).removeprefix('config error: ')}") from None
    return {(section, key): value for key, value in given.items()}


def _when(where: str, rule: Any) -> tuple[int, Settings]:
    if not isinstance(rule, dict) or set(rule) - {"s1_at_least", *DEFAULT_SECTIONS} or "s1_at_least" not in rule:
        raise InputError(f"{where}: each [[when]] holds s1_at_least = N and tables of "
                         f"{', '.join(DEFAULT_SECTIONS)} defaults, got {show(rule)}")
    least = rule["s1_at_least"]
    if isinstance(least, bool) or not isinstance(least, int) or least < 1:
        raise InputError(f"{where}: [[when]] s1_at_least = {show(least)} must be an integer ≥ 1")
    settings: Settings = {}
    for section in DEFAULT_SECTIONS:
        if section in rule:
            settings.update(_table(where, section, rule[section]))
    return least, settings


def parse_bundle(name: str, data: dict[str, Any], where: str) -> Bundle:
    """A :class:`Bundle` from a bundle file's tables (the module docstring), or one line naming the problem."""
    unknown = set(data) - {"kernel", "when", *DEFAULT_SECTIONS}
    if unknown:
        first = sorted(map(str, unknown))[0]
        raise InputError(f"{where}: unknown section [{first}]; a build bundle holds [kernel], "
                         f"{', '.join(f'[{s}]' for s in DEFAULT_SECTIONS)} and [[when]]")
    kernel = data.get("kernel", {})
    settings = _table(where, "kernel", kernel)
    if "build" in kernel:
        raise InputError(f"{where}: a bundle is a build and names none: drop kernel.build from it")
    missing = [key for key in CHOICE_KEYS if key not in kernel]
    if missing:
        raise InputError(f"{where}: [kernel] lacks {', '.join(missing)}: a bundle sets every design choice (copy "
                         f"{BUILDS_DIR / 'manual.toml'} and change what differs)")
    for section in DEFAULT_SECTIONS:
        settings.update(_table(where, section, data.get(section, {})))
    rules = data.get("when", [])
    if not isinstance(rules, list):
        raise InputError(f"{where}: when must be an array of tables ([[when]]), got {show(rules)}")
    return Bundle(name, settings, tuple(_when(where, rule) for rule in rules))


def _read(path: Path, name: str) -> Bundle:
    hint = f"give a shipped build ({', '.join(SHIPPED)}) or an existing bundle file"
    text = decode_text(read_bytes(path, "build bundle", hint, MAX_BUNDLE_BYTES), path, "build bundle")
    where = f"build bundle {path}"
    try:
        data = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of thousands of digits
        raise InputError(f"{where} does not parse ({str(exc).splitlines()[0]}); copy "
                         f"{BUILDS_DIR / 'manual.toml'} as a template") from None
    return parse_bundle(name, data, where)


@cache
def _shipped(name: str) -> Bundle:
    return _read(BUILDS_DIR / f"{name}.toml", name)


def load_bundle(build: Any) -> Bundle:
    """The bundle ``kernel.build`` names: a shipped build's, or the file at that path (read on every call: it may
    change between runs of one session)."""
    if not isinstance(build, str):
        raise InputError(f"config error: kernel.build = {show(build)} must be a string: a build's name "
                         f"({', '.join(SHIPPED)}) or a bundle file's path")
    if is_path(build):
        path = check_path(build, "config error: kernel.build =")
        return _read(path, path.stem)
    if build not in SHIPPED:
        raise InputError(f"config error: kernel.build = {show(build)} is neither a shipped build nor a bundle file "
                         f"(a path ending .toml); {suggest(build, list(SHIPPED))}")
    return _shipped(build)


def _s1(data: dict[str, Any]) -> Any:
    case = data.get("case", {})
    return case.get("s1", CaseConfig.s1) if isinstance(case, dict) else CaseConfig.s1


def _build_of(data: dict[str, Any]) -> Any:
    kernel = data.get("kernel", {})
    return kernel.get("build", KernelConfig.build) if isinstance(kernel, dict) else KernelConfig.build


def build_defaults(data: dict[str, Any]) -> Settings:
    """What the build ``data`` names sets (its choices and section defaults) for the case in ``data``."""
    return load_bundle(_build_of(data)).defaults(_s1(data))


def with_build(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its build's settings where ``data`` gives none (a non-table section is left for the schema
    to refuse)."""
    if not isinstance(data, dict) or not isinstance(data.get("kernel", {}), dict):
        return data
    for (section, key), value in build_defaults(data).items():
        table = data.get(section, {})
        if isinstance(table, dict) and key not in table:
            data = merge(data, section, key, value)
    return data


def change_build(data: dict[str, Any], old: Any, keep: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
    """``data`` (its ``kernel.build`` set already) run by that build instead of ``old``: a key holding the old
    build's value (as a filled config, a saved config.toml or best.toml, writes every key) is dropped, so the new
    build's value applies; a key in ``keep`` (set beside the build) or set to anything else stays."""
    try:
        was, now = load_bundle(old).defaults(_s1(data)), build_defaults(data)
    except InputError:
        return data  # an unknown build is refused when the config is parsed
    if was == now:
        return data
    out = {s: dict(v) if isinstance(v, dict) else v for s, v in data.items()}
    for section, key in {*was, *now} - set(keep):
        table = out.get(section)
        fields = SECTION_TYPES[section].__dataclass_fields__  # type: ignore[attr-defined]
        if isinstance(table, dict) and key in table and table[key] == was.get((section, key), fields[key].default):
            del table[key]
    return out


def nearest_build(choices: dict[str, Any], builds: Collection[str]) -> tuple[str, list[str]] | None:
    """Of the shipped ``builds``, the one whose design choices differ least from ``choices``, with the keys that
    differ (an empty list: ``choices`` are that build's); None when ``builds`` names no shipped build."""
    known = [name for name in SHIPPED if name in builds]
    if not known:
        return None
    differ = {name: [key for key in CHOICE_KEYS if _shipped(name).choices[key] != choices[key]] for name in known}
    name = min(known, key=lambda n: len(differ[n]))
    return name, differ[name]
