"""The engine's per-instruction path is compiled by mypyc at install time (setup.py).  The compiled modules
and the Python source they were built from must give the same run: the same cycles, the same event log, the
same output bits and dumps, the same hazard diagnosis.  The source runs from a copy of the package without
the compiled extensions, in a subprocess."""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tfa_sim
from tfa_sim.spec.config import CONFIG_DIR

#: The modules setup.py compiles (its COMPILED list, as module names).
COMPILED = ("tfa_sim.engine.pipes", "tfa_sim.engine.issue", "tfa_sim.engine.gm", "tfa_sim.clock.simpy_adapter",
            "tfa_sim.buffers.pools", "tfa_sim.buffers.fifo", "tfa_sim.stages.compute_qk",
            "tfa_sim.stages.compute_p", "tfa_sim.stages.compute_pv", "tfa_sim.stages.compute_gu",
            "tfa_sim.stages.run_tfa", "tfa_sim.stages.block_kernel", "tfa_sim.rundir.events")


@pytest.fixture(scope="module")
def source_tree(tmp_path_factory) -> Path:
    """A copy of the installed package with only the cffi stage kernels compiled: the engine runs as Python."""
    root = tmp_path_factory.mktemp("source")
    package = Path(tfa_sim.__file__).parent

    def skip(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n == "__pycache__" or (n.endswith(".so") and not n.startswith("_native"))}

    shutil.copytree(package, root / "tfa_sim", ignore=skip)
    if not (root / "tfa_sim" / "configs" / "hw").is_dir():  # an editable install reads the top-level configs/
        shutil.copytree(CONFIG_DIR, root / "configs")
    return root


def tfa(cwd: Path, *args: str, source: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(source)} if source else dict(os.environ)
    return subprocess.run([sys.executable, "-m", "tfa_sim", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_the_hot_path_is_compiled():
    """Unless the package was installed with TFA_SIM_PURE_PYTHON=1 (and the tests run with it set too)."""
    suffix = ".py" if os.environ.get("TFA_SIM_PURE_PYTHON") == "1" else ".so"
    for name in COMPILED:
        path = importlib.import_module(name).__file__ or ""
        assert path.endswith(suffix), f"{name} runs from {path}"


def test_the_source_copy_runs_the_engine_as_python(tmp_path, source_tree):
    code = "import importlib, sys; print(*(importlib.import_module(m).__file__ for m in sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, *COMPILED], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(source_tree)}, timeout=60)
    assert r.returncode == 0, r.stderr
    files = r.stdout.split()
    assert len(files) == len(COMPILED) and all(f.startswith(str(source_tree)) and f.endswith(".py") for f in files)


def arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        return {k: npz[k] for k in npz.files}


@pytest.mark.parametrize("args", [
    ["--intermediate-check"],  # the built-in case, numerics and every dump
    ["--set", "case.s0=300", "--set", "case.heads=4", "--set", "case.kv_heads=2", "--set", "schedule.s1_split=4",
     "--set", "schedule.gqa_pack=true", "--backend", "numpy"],  # a short block, GQA packing, the combine launch
    ["--set", "case.causal=true", "--set", "case.s0=512", "--set", "case.s1=2048", "--hw", "910b2"],
    ["--no-numerics", "--set", "case.s0=4096", "--set", "case.s1=4096", "--hw", "910b2"],  # replayed templates
], ids=["default-dumps", "split-gqa", "causal", "timing-only"])
def test_compiled_and_source_engines_give_the_same_run(tmp_path, source_tree, args):
    runs = {}
    for name, source in (("compiled", None), ("source", source_tree)):
        out = tmp_path / name
        r = tfa(tmp_path, "run", *args, "--out", str(out), source=source)
        assert r.returncode == 0, r.stderr
        runs[name] = out
    compiled, source = runs["compiled"], runs["source"]
    events = arrays(compiled / "events.npz")
    assert len(events["ev_start"]) > 100
    for key, column in arrays(source / "events.npz").items():
        np.testing.assert_array_equal(column, events[key], err_msg=key)
    for name in ("o.npy", "trace.json", "events.csv", "timeline.svg"):
        if (compiled / name).exists() or (source / name).exists():
            assert (compiled / name).read_bytes() == (source / name).read_bytes(), name
    if "--intermediate-check" in args:
        dumps = sorted(p.name for p in (compiled / "dumps").iterdir())
        assert dumps and dumps == sorted(p.name for p in (source / "dumps").iterdir())
        for name in dumps:
            assert (compiled / "dumps" / name).read_bytes() == (source / "dumps" / name).read_bytes(), name


def test_compiled_and_source_engines_report_the_same_hazard(tmp_path, source_tree):
    """qk_preload = cv_fifo_size overwrites an unread l1_exp_max entry: exit 3, the same diagnosis."""
    args = ["run", "--no-numerics", "--set", "schedule.qk_preload=8", "--set", "schedule.cv_fifo_size=8",
            "--set", "case.s1=4096"]
    compiled = tfa(tmp_path, *args, "--out", str(tmp_path / "c"))
    source = tfa(tmp_path, *args, "--out", str(tmp_path / "s"), source=source_tree)
    assert compiled.returncode == source.returncode == 3, (compiled.stderr, source.stderr)
    assert "l1_exp_max" in compiled.stderr
    assert compiled.stderr.replace(str(tmp_path / "c"), "RUN") == source.stderr.replace(str(tmp_path / "s"), "RUN")
