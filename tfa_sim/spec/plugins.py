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
            LOADED[key] = _import(name, is_file(name), where)
        out.append(name)
    return out


def _import(key: str, from_file: bool, where: str) -> str:
    """Import one plugin; on any failure take back what it registered and raise one line."""
    choices.load_providers()  # the shipped values first: a plugin's name clashes with them, not they with it
    module = f"tfa_sim_plugin_{len(LOADED)}_{Path(key).stem}" if from_file else key
    try:
        if from_file:
            spec = importlib.util.spec_from_file_location(module, key)
            assert spec is not None and spec.loader is not None, "a .py path always has a loader"
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
        else:
            importlib.import_module(key)
    except TfaSimError as exc:  # a registry refused an entry: its line names the rule
        _forget(module)
        raise InputError(f"{where}: plugin {key}: {str(exc).splitlines()[0].removeprefix(module + ': ')}") from None
    except (Exception, SystemExit) as exc:  # any failure of a user's module is one line, never a traceback
        _forget(module)
        frame = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f" (line {frame[0].lineno} of {frame[0].filename})" if frame else ""
        raise InputError(f"{where}: plugin {key} failed to import: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}{at}; fix the module or drop it") from None
    return module


def _forget(module: str) -> None:
    """Take back every value ``module`` registered, and the module itself."""
    for registry in choices.REGISTRIES.values():
        registry.remove(module)
    sys.modules.pop(module, None)
