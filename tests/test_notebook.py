"""docs/examples/explore.ipynb runs, every cell, in a real Jupyter kernel (as a reader would run it)."""
from __future__ import annotations

import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "examples" / "explore.ipynb"


def test_the_example_notebook_runs_without_errors(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    started = time.monotonic()
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # CellExecutionError on any error
    took = time.monotonic() - started
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the timeline and the sweep plot are drawn"
    assert any("<svg" in o.get("data", {}).get("text/html", "") for o in outputs), "the run shows its timeline"
    assert any("vec.scalar" in o.get("data", {}).get("text/html", "") for o in outputs), "the profile's table"
    assert took < 60, f"the notebook took {took:.0f} s"
