"""Builds of the kernel as data: bundle files of design choices, the one place that knows builds by name.

A build bundle (``configs/builds/NAME.toml``, installed as ``tfa_sim/configs/builds/``; or any file a config names
as ``kernel.build = "path/to/bundle.toml"``, relative to the working directory like ``hardware.file``) holds:

* ``base = "dsl"`` (optional): the bundle it starts from, a shipped build or a path relative to this file; what
  this one sets wins;
* ``[kernel]``: the design choices of :class:`~tfa_sim.spec.config.KernelConfig` it sets (a choice it and its base
  leave out takes the choice's default, today's behaviour), and ``plugins``, modules it needs (paths relative to
  this file, loaded when the bundle is read: :mod:`tfa_sim.spec.plugins`);
* ``[tiling]``, ``[schedule]``: the defaults the build gives those sections (the port's preload 3, say);
* ``[listings]``: the listing each stage runs (a shipped name, or a file relative to this one: docs/kernel.md,
  "Listings");
* ``[[when]]``: defaults from a shape on — ``s1_at_least = N`` and section tables, applied when S1 ≥ N.

A config's own keys win over the bundle's (a what-if the build does not compile).  Every key and value is checked
as a config's is; a bundle that names another build, an unknown key or a base that cannot be read is refused in
one line.  The shipped bundles set every choice explicitly (tests/test_bundles.py).
"""
from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tfa_sim.spec.choices import PROVIDERS, choices, spell
from tfa_sim.spec.config import (
    CHOICE_KEYS,
    CONFIG_DIR,
    SECTION_TYPES,
    ZERO_OK,
    CaseConfig,
    KernelConfig,
    merge,
    resolve_listings,
    section_of,
    suggest,
    upgrade,
)
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.plugins import load_plugins
from tfa_sim.spec.safety import check_path, decode_text, read_bytes, show

BUILDS_DIR = CONFIG_DIR / "builds"
#: The shipped builds, in the order reports list them (the files in BUILDS_DIR, tests/test_builds.py).
SHIPPED = ("manual", "jit", "dsl")
#: The sections a bundle may give defaults for, beside its [kernel] choices.
DEFAULT_SECTIONS = ("tiling", "schedule", "listings")
MAX_BUNDLE_BYTES = 1 << 16
#: How many bases a bundle may stand on (a longer chain is a loop).
MAX_BASES = 16

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
    for key, value in given.items():  # the range every config checks, said here with the bundle's name
        low = 0 if key in ZERO_OK else 1
        if section in ("tiling", "schedule") and isinstance(value, int) and not isinstance(value, bool) and \
                value < low:
            raise InputError(f"{where}: {section}.{key} = {value} must be ≥ {low}")
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


def parse_bundle(name: str, data: dict[str, Any], where: str, here: Path | None = None,
                 bases: tuple[Path, ...] = ()) -> Bundle:
    """A :class:`Bundle` from a bundle file's tables (the module docstring), or one line naming the problem;
    ``here``: the file's directory (its base and plugins are relative to it)."""
    unknown = set(data) - {"base", "kernel", "when", *DEFAULT_SECTIONS}
    if unknown:
        first = sorted(map(str, unknown))[0]
        raise InputError(f"{where}: unknown section [{first}]; a build bundle holds base, [kernel], "
                         f"{', '.join(f'[{s}]' for s in DEFAULT_SECTIONS)} and [[when]]")
    data = resolve_listings(upgrade(data), here)
    kernel = data.get("kernel", {})
    if isinstance(kernel, dict) and "build" in kernel:
        raise InputError(f"{where}: a bundle is a build and names none: drop kernel.build from it (use base = "
                         f"\"NAME\" to start from one)")
    plugins: tuple[str, ...] = ()
    if isinstance(kernel, dict) and "plugins" in kernel:  # loaded first (the choices may name their values), by
        # their resolved paths (the config that names this bundle may be read in another directory)
        given = _table(where, "kernel", {"plugins": kernel["plugins"]})["kernel", "plugins"]
        plugins = tuple(load_plugins(given, here, f"{where}: kernel.plugins"))
        kernel = {k: v for k, v in kernel.items() if k != "plugins"}
    settings = _table(where, "kernel", kernel)
    if plugins:
        settings["kernel", "plugins"] = plugins
    for section in DEFAULT_SECTIONS:
        settings.update(_table(where, section, data.get(section, {})))
    rules = data.get("when", [])
    if not isinstance(rules, list):
        raise InputError(f"{where}: when must be an array of tables ([[when]]), got {show(rules)}")
    own = Bundle(name, settings, tuple(_when(where, rule) for rule in rules))
    if "base" not in data:
        return own
    base = _base(data["base"], where, here, bases)
    settings = {**base.settings, **own.settings}
    loads = (*base.settings.get(("kernel", "plugins"), ()), *own.settings.get(("kernel", "plugins"), ()))
    if loads:  # a bundle loads its bases' plugins and its own
        settings["kernel", "plugins"] = tuple(dict.fromkeys(loads))
    return Bundle(name, settings, base.when + own.when)


def _base(given: Any, where: str, here: Path | None, bases: tuple[Path, ...]) -> Bundle:
    """The bundle ``base = given`` names: a shipped build, or a file relative to the bundle's directory."""
    if not isinstance(given, str) or not given:
        raise InputError(f"{where}: base = {show(given)} must name a shipped build ({', '.join(SHIPPED)}) or a "
                         f"bundle file")
    if not is_path(given):
        if given not in SHIPPED:
            raise InputError(f"{where}: base = {show(given)} is neither a shipped build nor a bundle file (a path "
                             f"ending .toml); {suggest(given, list(SHIPPED))}")
        path = BUILDS_DIR / f"{given}.toml"
    else:
        path = check_path(given, f"{where}: base =")
        path = (here / path if here is not None and not path.is_absolute() else path).resolve()
    if path in bases:
        raise InputError(f"{where}: base = {show(given)} leads back to a bundle already read ({path}): bases must "
                         f"not form a loop")
    if len(bases) >= MAX_BASES:
        raise InputError(f"{where}: base = {show(given)} would be the {len(bases) + 1}th bundle of one chain of "
                         f"bases, more than {MAX_BASES}: start from a bundle nearer the build")
    return _read(path, path.stem, bases)


def _read(path: Path, name: str, bases: tuple[Path, ...] = ()) -> Bundle:
    hint = f"give a shipped build ({', '.join(SHIPPED)}) or an existing bundle file"
    text = decode_text(read_bytes(path, "build bundle", hint, MAX_BUNDLE_BYTES), path, "build bundle")
    where = f"build bundle {path}"
    try:
        data = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of thousands of digits
        raise InputError(f"{where} does not parse ({str(exc).splitlines()[0]}); copy "
                         f"{BUILDS_DIR / 'manual.toml'} as a template") from None
    resolved = path.resolve()
    return parse_bundle(name, data, where, resolved.parent, (*bases, resolved))


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
    """``data`` with its build's settings where ``data`` gives none, and the build's plugins beside its own (a
    config lists every plugin it loads); a non-table section is left for the schema to refuse."""
    if not isinstance(data, dict) or not isinstance(data.get("kernel", {}), dict):
        return data
    for (section, key), value in build_defaults(data).items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            continue
        if (section, key) == ("kernel", "plugins") and isinstance(table.get(key), list):
            data = merge(data, section, key, list(dict.fromkeys([*value, *table[key]])))  # its build's and its own
        elif key not in table:
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


def build_choices(build: str) -> list[str]:
    """Every design choice of ``build`` (the bundle's, or the choice's default) as ``key=value`` words."""
    chosen = load_bundle(build).choices
    return [f"{key}={spell(chosen.get(key, getattr(KernelConfig, key)))}" for key in CHOICE_KEYS]


def choices_table(shipped: bool = False) -> str:
    """docs/kernel.md's table of the design choices, from the registries (:mod:`tfa_sim.spec.choices`): a row per
    value (``shipped``: only the package's, no plugin's), with the shipped builds that choose it."""
    chosen = {name: build_choices(name) for name in SHIPPED}
    rows = ["| choice | value | what it does | builds | source |", "|---|---|---|---|---|"]
    for choice in choices():
        entries = [(v.word, v.doc, v.source) for v in choice.values.values()
                   if not shipped or v.module in PROVIDERS]
        if choice.numbers:
            entries.append((f"{choice.numbers.low}…{choice.numbers.high}", choice.numbers.doc,
                            choice.numbers.source))
        for n, (word, doc, source) in enumerate(entries):
            key = f"`kernel.{choice.key}`: {choice.doc}" if n == 0 else ""
            default = " (default)" if word == spell(choice.default) else ""
            builds = ", ".join(f"`{b}`" for b in SHIPPED if f"{choice.key}={word}" in chosen[b])
            rows.append(f"| {key} | `{word}`{default} | {doc} | {builds} | {source} |")
    return "\n".join(rows)
