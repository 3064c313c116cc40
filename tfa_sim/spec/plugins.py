"""Users' own modules: ``kernel.plugins`` (and ``--plugin FILE``) loaded before a config is resolved.

A plugin is a Python file (``path/to/my_order.py``, relative to the working directory, or to a bundle file for the
plugins a bundle names) or an importable dotted name (``mypackage.orders``).  Importing it runs its registrations
(:func:`tfa_sim.api.plugins.register` adds a value to a choice's registry, :mod:`tfa_sim.spec.choices`), after
which its values work wherever a shipped one does.  Each plugin is imported once per process (a file by its
content, wherever it lies; a module by its name); one that fails to import, or registers a clashing name or a
value that breaks its registry's contract, is refused in one line naming the module and the rule, and what it
registered before failing is taken back.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from tfa_sim.spec import choices
from tfa_sim.spec.errors import InputError, TfaSimError
from tfa_sim.spec.safety import check_path, read_bytes

#: Plugins imported in this process: a file's content hash (the same module copied elsewhere is the same plugin)
#: or a dotted name → the module's name in ``sys.modules``.
LOADED: dict[str, str] = {}
#: Each plugin as configs name it (a file by its absolute path, a module by its dotted name) → its key in LOADED.
KEYS: dict[str, str] = {}
#: What each plugin added: (choice key, value name, or :data:`NUMBERS` for integers) → the plugin's key in LOADED.
ORIGIN: dict[tuple[str, object], str] = {}
#: Each plugin's key in LOADED → the name it was first loaded by (what messages call it).
NAMED: dict[str, str] = {}
#: The entry of ORIGIN for a choice's integers.
NUMBERS = "<integers>"
#: No plugin module is this large.
MAX_PLUGIN_BYTES = 1 << 22


def is_file(name: str) -> bool:
    """A plugin named by its file rather than by a dotted module name."""
    return name.endswith(".py") or "/" in name or "\\" in name


def load_plugins(names: Iterable[str], base: Path | None = None, where: str = "kernel.plugins") -> list[str]:
    """Import each plugin of ``names`` not imported yet (files relative to ``base``, else the working directory);
    returns the plugins as resolved (a file by its absolute path: the config that names it may be read in
    another directory, a sweep's worker say)."""
    out = []
    for name in names:
        if is_file(name):
            path = check_path(name, f"{where} =")
            path = (base / path if base is not None and not path.is_absolute() else path).resolve()
            if not path.is_file():
                raise InputError(f"{where}: plugin file {path} does not exist; give the path of a .py module")
            key = hashlib.sha256(read_bytes(path, "plugin file", "give a .py module", MAX_PLUGIN_BYTES)).hexdigest()
            name = str(path)
        else:
            key = name
        if key not in LOADED:
            LOADED[key] = _import(name, is_file(name), where, key)
            NAMED[key] = name
        KEYS[name] = key
        out.append(name)
    return out


def origin(key: str, value: object, integer: bool = False) -> str | None:
    """The plugin (its key in :data:`LOADED`) that added ``value`` (an integer of the choice's range when
    ``integer``) to the choice ``key``; None for a shipped value."""
    return ORIGIN.get((key, NUMBERS if integer else value))


def allowed(names: Iterable[str]) -> set[str]:
    """The keys in :data:`LOADED` of the plugins ``names`` (as load_plugins returned them)."""
    return {KEYS[name] for name in names if name in KEYS}


def _import(name: str, from_file: bool, where: str, key: str) -> str:
    """Import one plugin; on any failure put every registry back as it was and raise one line.  What the import
    added — itself or through modules it imported — is noted as the plugin's (:data:`ORIGIN`)."""
    choices.load_providers()  # the shipped values first: a plugin's name clashes with them, not they with it
    module = f"tfa_sim_plugin_{len(LOADED)}_{Path(name).stem}" if from_file else name
    before = {k: (dict(r.values), r.numbers) for k, r in choices.REGISTRIES.items()}
    try:
        if from_file:
            spec = importlib.util.spec_from_file_location(module, name)
            assert spec is not None and spec.loader is not None, "a .py path always has a loader"
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
        else:
            importlib.import_module(name)
    except TfaSimError as exc:  # a registry refused an entry: its line names the rule
        _restore(before, module)
        raise InputError(f"{where}: plugin {name}: {str(exc).splitlines()[0].removeprefix(module + ': ')}") from None
    except (Exception, SystemExit) as exc:  # any failure of a user's module is one line, never a traceback
        _restore(before, module)
        said = exc.msg if isinstance(exc, SyntaxError) else str(exc)  # (a SyntaxError's str repeats its place)
        text = said.splitlines()[0] if said else ""
        raise InputError(f"{where}: plugin {name} failed to import: {type(exc).__name__}"
                         f"{': ' + text if text else ''}{_where(exc)}; fix the module or drop it") from None
    for k, registry in choices.REGISTRIES.items():  # each added value named after the plugin, as users give it
        for value, entry in list(registry.values.items()):
            if value not in before[k][0]:
                registry.values[value], ORIGIN[k, value] = dataclasses.replace(entry, module=name), key
        if registry.numbers is not None and before[k][1] is None:
            registry.numbers, ORIGIN[k, NUMBERS] = dataclasses.replace(registry.numbers, module=name), key
    return module


def _where(exc: BaseException) -> str:
    """Where in the user's code ``exc`` arose: a syntax error's line, else the last frame outside Python's import
    machinery ('' when there is none: a module that does not exist)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (line {exc.lineno} of {exc.filename})"
    ours = (Path(importlib.__file__).parent, Path(__file__))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")
              and Path(f.filename).parent != ours[0] and Path(f.filename) != ours[1]] if exc.__traceback__ else []
    return f" (line {frames[-1].lineno} of {frames[-1].filename})" if frames else ""


def _restore(before: dict[str, tuple[dict[str | int | bool, choices.Value], choices.Numbers | None]],
             module: str) -> None:
    """Every registry as it was before a failed plugin's import (what it registered, itself or through modules
    it imported, taken back), and the module itself forgotten."""
    for k, (values, numbers) in before.items():
        registry = choices.REGISTRIES[k]
        registry.values, registry.numbers = values, numbers
    sys.modules.pop(module, None)
