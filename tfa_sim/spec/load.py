"""A legal :class:`~tfa_sim.spec.config.Config` from a config file, a shipped case or a mapping.

The build's settings fill the keys a config leaves out (:mod:`tfa_sim.spec.builds`), the types and values are
checked by the schema (:mod:`tfa_sim.spec.config`), then the kernel's rules (:mod:`tfa_sim.spec.legality`, which
needs the hardware preset): one :class:`InputError` line for the first problem, before anything runs.
"""
from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfa_sim.spec.builds import change_build, with_build
from tfa_sim.spec.config import (
    CONFIG_DIR,
    Config,
    KernelConfig,
    merge,
    parse_override,
    parse_sections,
    resolve_listings,
    section_of,
    suggest,
    upgrade,
)
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.legality import check_legal
from tfa_sim.spec.plugins import load_plugins
from tfa_sim.spec.safety import check_name, decode_text, read_bytes

DEFAULT_CASE = "case_float_H_128_S0_128_S1_1024"
#: No config file is this large; a bigger one is not read.
MAX_CONFIG_BYTES = 1 << 20


def parse_config(data: dict[str, Any]) -> Config:
    """A :class:`Config` from a nested mapping: its plugins loaded (:mod:`tfa_sim.spec.plugins`), the build's
    settings where the mapping gives none, every section and key known and of the right type (no legality:
    :func:`build_config`)."""
    data = resolve_listings(upgrade(data))
    kernel = data.get("kernel") if isinstance(data, dict) else None
    if isinstance(kernel, dict) and "plugins" in kernel:  # before the build and the choices' values are read
        plugins = section_of("kernel", KernelConfig, {"plugins": kernel["plugins"]}).plugins
        data = merge(data, "kernel", "plugins", load_plugins(plugins))
    return parse_sections(with_build(data))


def build_config(data: dict[str, Any]) -> Config:
    """Type-check a nested mapping against the schema and return a legal :class:`Config`."""
    config = parse_config(data)
    check_legal(config)
    return config


def _read_file(path: str | Path) -> dict[str, Any]:
    hint = "give an existing .toml/.yaml file or use --case NAME"
    text = decode_text(read_bytes(path, "config file", hint, MAX_CONFIG_BYTES), path, "config file")
    try:
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = tomllib.loads(text)
    except Exception as exc:  # noqa: BLE001 - both parsers' errors carry line numbers; deep nesting, huge ints
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"config file {path} does not parse: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"config file {path} is not a table of sections (case, tiling, …): it holds a "
                         f"{type(data).__name__}")
    return data


def case_path(name: str, what: str = "--case") -> Path:
    """The shipped config of reference case ``name`` (configs/cases/NAME.toml)."""
    check_name(name, what, "give a shipped case's name, or a config file's path as CONFIG")
    path = CONFIG_DIR / "cases" / f"{name}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in (CONFIG_DIR / "cases").glob("*.toml"))
        raise InputError(f"unknown case {name!r}; {suggest(name, known)}")
    return path


def load_config(path: str | Path | None = None, case: str | None = None, overrides: Sequence[str] = (),
                values: Sequence[tuple[str, str, Any]] = (), plugins: Sequence[str] = ()) -> Config:
    """Config from a file, a shipped case, or defaults (``DEFAULT_CASE``), then ``--set`` overrides (text) and
    ``values`` (section, key, value) set by command-line options; ``plugins`` (``--plugin FILE``) are added to
    the config's ``kernel.plugins``."""
    if path is not None and case is not None:
        raise InputError("give either a CONFIG file or --case NAME, not both")
    data = _read_file(path if path is not None else case_path(case or DEFAULT_CASE))
    settings = [parse_override(text) for text in overrides] + list(values)
    if plugins:
        settings.append(("kernel", "plugins", [*with_plugins(data, settings), *plugins]))
    return configure(data, settings)


def with_plugins(data: dict[str, Any], settings: Sequence[tuple[str, str, Any]]) -> list[Any]:
    """The plugins ``data`` and ``settings`` name (the last setting of ``kernel.plugins`` wins, as in
    :func:`configure`), to which ``--plugin`` adds its own."""
    given = [value for section, key, value in settings if (section, key) == ("kernel", "plugins")]
    if given:
        own = given[-1]
    else:
        kernel = data.get("kernel")
        own = kernel.get("plugins", []) if isinstance(kernel, dict) else []
    return list(own) if isinstance(own, (list, tuple)) else [own]


def configure(data: dict[str, Any], settings: Sequence[tuple[str, str, Any]]) -> Config:
    """The legal config of ``data`` with each (section, key, value) of ``settings`` set; a changed shape without
    a ``case.name`` of its own is named after the new shape; a changed ``kernel.build`` brings its own defaults
    where ``data`` holds the old build's (:func:`~tfa_sim.spec.builds.change_build`)."""
    renamed = any(sec == "case" and key == "name" for sec, key, _ in settings)
    if not renamed and any(sec == "case" for sec, _, _ in settings) and isinstance(data.get("case"), dict):
        data = {**data, "case": {k: v for k, v in data["case"].items() if k != "name"}}  # name the new shape
    kernel = data.get("kernel")
    old = kernel.get("build", KernelConfig.build) if isinstance(kernel, dict) else KernelConfig.build
    for section, key, value in settings:
        data = merge(data, section, key, value)
    if any((section, key) == ("kernel", "build") for section, key, _ in settings):
        data = change_build(data, old, keep={(section, key) for section, key, _ in settings})
    return build_config(data)
