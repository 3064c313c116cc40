"""The optional dependencies: which extra of ``pip install "tfa-sim[EXTRA]"`` brings each module that a command or
an API function imports beyond the core, and the one line that says so when one is missing (docs/dependencies.md).

Callers check before they write anything; the module is imported as usual afterwards.
"""
from __future__ import annotations

import importlib

from tfa_sim.spec.errors import InputError

#: Each optional module (as imported) → the extra that installs it (pyproject.toml, [project.optional-dependencies]).
EXTRA_OF = {"pyarrow": "parquet", "pandas": "pandas", "matplotlib": "plots", "plotly": "html", "perfetto": "perfetto",
            "dask": "dask", "distributed": "dask"}


def missing(what: str, *modules: str) -> str | None:
    """The line naming the first of ``modules`` that does not import and its extra; None when all of them do."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError:
            return f'{what} needs {module}, which is not installed: pip install "tfa-sim[{EXTRA_OF[module]}]"'
    return None


def require(what: str, *modules: str) -> None:
    """:class:`InputError` with :func:`missing`'s line unless every one of ``modules`` imports."""
    problem = missing(what, *modules)
    if problem is not None:
        raise InputError(problem)
