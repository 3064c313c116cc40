"""What a plugin module calls: add a value to a design choice's registry (docs/guide/extending.md).

A plugin (``kernel.plugins = ["my_order.py"]`` or ``--plugin my_order.py``) is imported before a config is
resolved; at import it calls :func:`register` once per value it adds.  The value then works wherever a shipped
one does: ``--set kernel.stage_order=my_order``, bundles, sweep axes, the tuner's ``--space``, the ablation and
calibration.  What ``does`` must offer is its registry's (``registry(key).offers``); a clash with a registered
name or a broken contract is refused in one line naming the module (:mod:`tfa_sim.spec.plugins`).
"""
from __future__ import annotations

import sys
from typing import Any

from tfa_sim.spec.choices import REGISTRIES, Choice, Rule, Value, choices
from tfa_sim.spec.errors import InputError


def registry(key: str) -> Choice:
    """The registry of ``kernel.<key>`` (its ``values``, ``names``, ``doc``, ``offers``), the shipped values in it."""
    choices()  # the shipped values first: a plugin's name clashes with them, not they with it
    if key not in REGISTRIES:
        raise InputError(f"kernel.{key} is not a design choice; the choices are {', '.join(REGISTRIES)}")
    return REGISTRIES[key]

def register(key: str, name: str | bool, does: Any, doc: str, source: str, rules: tuple[Rule, ...] = (),
             module: str | None = None) -> Value:
    """Add value ``name`` to the registry of ``kernel.<key>``: what it ``does`` (what the registry ``offers``),
    a ``doc`` line and its ``source``, and its legality ``rules`` (functions config → a one-line problem or
    None).  ``module`` defaults to the calling module (what a failed plugin's registrations are taken back by)."""
    caller = module or sys._getframe(1).f_globals.get("__name__", "plugin")
    given = tuple(rules) if isinstance(rules, (list, tuple)) else rules  # anything else: the registry says why
    return registry(key).add(name, does, doc, source, given, caller)
