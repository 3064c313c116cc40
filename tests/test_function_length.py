"""No function of the package is longer than 60 lines, except a hot path marked on its ``def`` line with the
measurement that keeps it whole (``def run(...):  # hot path: splitting it cost 4 % on bench_sim``)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import tfa_sim

PACKAGE = Path(tfa_sim.__file__).parent
MAX_LINES = 60
#: A hot path's marker: the words, then the measurement (a number) that keeps the function whole.
HOT_PATH = re.compile(r"#\s*hot path:.*\d")


def long_functions() -> list[str]:
    """``file:line name (N lines)`` of every function over :data:`MAX_LINES` lines not exempted."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_LINES and not HOT_PATH.search(lines[node.lineno - 1]):
                    found.append(f"{relative}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_over_60_lines():
    assert long_functions() == [], "split these, or mark a hot path with its measurement on the def line"

