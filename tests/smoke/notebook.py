"""docs/examples/explore.ipynb executed as a reader runs it: every cell in a real Jupyter kernel, in a directory of
its own, with the tfa-sim of the Python that runs this.  tests/test_notebook.py runs it in the test suite; .ci/run
runs ``python tests/smoke/notebook.py`` in the venv holding the built wheel, from an empty directory, so the
notebook cannot lean on a checkout (it exits 1 naming what went wrong)."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "examples" / "explore.ipynb"


def execute(workdir: Path, notebook: Path = NOTEBOOK) -> list[Any]:
    """Run every cell of ``notebook`` with ``workdir`` as the kernel's working directory; the code cells' outputs.
    A cell that raises stops it with nbclient's CellExecutionError (the cell and the traceback)."""
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}).execute()
    return [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]


def missing(outputs: list[Any]) -> list[str]:
    """What the notebook should show and does not: an error, the drawn figures, the run's timeline, the profile's
    table."""
    html = [o.get("data", {}).get("text/html", "") for o in outputs]
    wanted = {"no error output": not any(o.output_type == "error" for o in outputs),
              "the timeline and the sweep plot, drawn": any("image/png" in o.get("data", {}) for o in outputs),
              "the run's own timeline (SVG)": any("<svg" in h for h in html),
              "the profile's table": any("vec.scalar" in h for h in html)}
    return [what for what, seen in wanted.items() if not seen]


def main() -> int:
    with tempfile.TemporaryDirectory() as work:
        import tfa_sim

        print(f"notebook: {NOTEBOOK.name} with tfa_sim from {Path(tfa_sim.__file__).parent}, in {work}")
        gone = missing(execute(Path(work)))
    if gone:
        print(f"notebook FAILED: {NOTEBOOK} ran but shows no {'; no '.join(gone)}")
        return 1
    print("notebook: every cell ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
