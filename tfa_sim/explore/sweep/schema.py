"""The config keys a sweep may name, and a point's config with every default filled in.

Sweep files are checked against :data:`SCHEMA` (the sections and keys of
:class:`tfa_sim.spec.config.Config` with their defaults) so that a typo stops the
sweep at once instead of making every point ``illegal``.
"""
from __future__ import annotations

import difflib
from typing import Any

from tfa_sim.spec.builds import build_defaults
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError

#: section → key → the kernel's default
SCHEMA: dict[str, dict[str, Any]] = Config().to_dict()


def show(value: Any, limit: int = 60) -> str:
    """``repr`` cut to ``limit`` characters: bad values in one-line messages."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def check_key(dotted: str, where: str) -> None:
    """Raise :class:`InputError` unless ``dotted`` is a known ``section.key``."""
    section, _, key = dotted.partition(".")
    if section not in SCHEMA:
        raise InputError(f"{where}: unknown config section {section!r}; {_suggest(section, list(SCHEMA))}")
    if key not in SCHEMA[section]:
        raise InputError(f"{where}: unknown config key {dotted!r}; {_suggest(key, list(SCHEMA[section]))}")


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(options)}"


def filled(config: Any) -> dict[str, dict[str, Any]] | None:
    """``config`` with every missing key at its default, its build's where the build has its own (what
    ``Config.to_dict()`` gives for a legal config); None when it is not a table of known sections of known keys."""
    if not isinstance(config, dict) or not set(config) <= set(SCHEMA):
        return None
    out = {}
    for section, defaults in SCHEMA.items():
        given = config.get(section, {})
        if not isinstance(given, dict) or not set(given) <= set(defaults):
            return None
        out[section] = {**defaults, **given}
    try:
        built = build_defaults(config)
    except InputError:
        return out  # an unknown build: refused when the point's config is parsed
    for (section, key), value in built.items():
        if key not in config.get(section, {}):
            out[section][key] = value
    return out
