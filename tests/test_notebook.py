"""docs/examples/explore.ipynb runs, every cell, in a real Jupyter kernel (as a reader would run it), and the data it
reads ships with the package."""
from __future__ import annotations

import time
from pathlib import Path

from smoke.notebook import NOTEBOOK, execute, missing

ROOT = Path(__file__).resolve().parents[1]


def test_the_example_notebook_runs_without_errors(tmp_path):
    started = time.monotonic()
    outputs = execute(tmp_path)  # CellExecutionError on any error
    took = time.monotonic() - started
    assert missing(outputs) == []
    assert took < 60, f"the notebook took {took:.0f} s"


def test_the_notebook_reads_nothing_from_a_checkout():
    text = NOTEBOOK.read_text(encoding="utf-8")
    assert "tests/data" not in text.replace("\\", "/") and '"tests"' not in text and "__file__" not in text


def test_the_shipped_example_profile_is_the_tests_fixture_byte_for_byte():
    shipped = ROOT / "configs" / "profiles" / "a2_op_single"
    fixture = ROOT / "tests" / "data" / "msprof" / "a2_op_single"
    files = sorted(p.relative_to(fixture) for p in fixture.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    assert all((shipped / f).read_bytes() == (fixture / f).read_bytes() for f in files)
