"""`tfa-sim run` end to end: outputs, inputs from files, bad data, exit codes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tfa_sim import cli
from tfa_sim.numerics.compare import Comparison
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.spec.load import load_config


def tfa(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tfa_sim", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("default")
    r = tfa("run", cwd=cwd)
    assert r.returncode == 0, r.stderr
    (run_dir,) = (cwd / "runs").iterdir()
    return r, run_dir


def test_default_run_writes_output_and_summary(default_run):
    r, run_dir = default_run
    assert run_dir.name.startswith("case_float_H_128_S0_128_S1_1024-")
    o = np.load(run_dir / "o.npy")
    assert o.dtype == np.float32 and o.shape == (1, 1, 128, 128)
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["golden"]["passed"] and s["backend"] == "native" and s["config"]["case"]["s1"] == 1024
    assert s["versions"]["tfa-sim"] != "not installed"
    assert "PASS" in r.stdout and "TFLOPS" in r.stdout and "bound pipe" in r.stdout
    assert not list(run_dir.glob(".*partial"))


def test_inputs_from_npy_and_bin_match_generated(default_run, tmp_path):
    _, run_dir = default_run
    expected = np.load(run_dir / "o.npy")
    inputs = generate_inputs(load_config())
    npy = tmp_path / "npy"
    npy.mkdir()
    for name in ("q", "k", "v"):
        np.save(npy / f"{name}.npy", getattr(inputs, name)[0, 0])
    r = tfa("run", "--inputs", str(npy), "--out", str(tmp_path / "a"), "--backend", "numpy")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "a" / "o.npy").view(np.uint32), expected.view(np.uint32))
    r = tfa("gen-data", "case_float_H_128_S0_128_S1_1024", "--out", str(tmp_path / "bin"))
    assert r.returncode == 0, r.stderr
    r = tfa("run", "--inputs", str(tmp_path / "bin"), "--out", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "b" / "o.npy").view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("mutate, needle", [
    (lambda q: q.__setitem__((3, 5), np.nan), "input q holds 1 NaN/Inf values (first at (0, 0, 3, 5))"),
    (lambda q: q.__setitem__((0, 0), np.inf), "NaN/Inf"),
], ids=["nan", "inf"])
def test_non_finite_inputs_are_rejected(tmp_path, mutate, needle):
    inputs = generate_inputs(load_config())
    q = inputs.q[0, 0].copy()
    mutate(q)
    for name, a in (("q", q), ("k", inputs.k[0, 0]), ("v", inputs.v[0, 0])):
        np.save(tmp_path / f"{name}.npy", a)
    r = tfa("run", "--inputs", str(tmp_path), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out" / "o.npy").exists()


@pytest.mark.parametrize("files, needle", [
    ({"q": (np.float32, (128, 128))}, "dtype float32"),
    ({"q": (np.float16, (64, 128))}, "shape (64, 128)"),
    ({}, "q.bin not found"),
], ids=["dtype", "shape", "missing"])
def test_bad_input_files(tmp_path, files, needle):
    for name, (dtype, shape) in files.items():
        np.save(tmp_path / f"{name}.npy", np.zeros(shape, dtype))
    if files:
        for name in {"k", "v"} - set(files):
            np.save(tmp_path / f"{name}.npy", np.zeros((1024, 128), np.float16))
    r = tfa("run", "--inputs", str(tmp_path))
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_timing_only_run(tmp_path):
    r = tfa("run", "--no-numerics", "--set", "case.s0=1024", "--out", str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert "golden" not in s and s["blocks"] == 8 and not (tmp_path / "t" / "o.npy").exists()
    assert (tmp_path / "t" / "events.csv").read_text().startswith("id,unit,pipe,stage,block,tile")


def test_failed_golden_comparison_exits_1(tmp_path, monkeypatch):
    failing = Comparison(False, 1, 1, 0, 0, 1.0, 1.0, 0)
    monkeypatch.setattr("tfa_sim.api.runner.compare", lambda *a, **k: failing)
    assert cli.main(["run", "--out", str(tmp_path / "f")]) == 1


def _blas_threads() -> set[int]:
    from threadpoolctl import threadpool_info

    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def _recording(fn, name, seen):
    """``fn``, noting its name and the BLAS thread counts in force each time it is called."""
    def wrapper(*args, **kwargs):
        seen.append((name, _blas_threads()))
        return fn(*args, **kwargs)
    return wrapper


@pytest.mark.parametrize("threads", [1, 2])
def test_numerics_run_with_the_configured_blas_threads(monkeypatch, threads):
    """Simulation, functional model and goldens see numerics.blas_threads; the caller's setting comes back."""
    from tfa_sim.api import runner
    from tfa_sim.numerics import golden
    from tfa_sim.sim import functional

    before, seen = _blas_threads(), []
    for owner, name in ((runner, "simulate"), (golden.Reference, "__call__"), (functional, "run_block"),
                        (golden, "_golden_head")):
        monkeypatch.setattr(owner, name, _recording(getattr(owner, name), name, seen))
    monkeypatch.setattr(runner, "can_fork", lambda: False)  # the goldens in this process, where they are seen
    config = load_config(overrides=["case.s1=512", f"numerics.blas_threads={threads}", "numerics.backend=\"numpy\""])
    runner.compute(config, event_log=False)
    functional.run_functional(runner.get_backend("numpy"), config, generate_inputs(config))
    golden.kernel_golden(generate_inputs(config), config)
    assert {n for n, _ in seen} == {"simulate", "__call__", "run_block", "_golden_head"}
    assert all(t == {threads} for _, t in seen), seen
    assert _blas_threads() == before


def _shared(monkeypatch, runner):
    """The runner's SharedGoldens, recorded as they are made (a second CPU assumed, so each forks a child)."""
    made = []

    class Recorded(runner.SharedGoldens):
        def __init__(self, *args):
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(runner, "can_fork", lambda: True)
    monkeypatch.setattr(runner, "SharedGoldens", Recorded)
    return made


def test_the_goldens_from_a_forked_child_equal_the_goldens_computed_in_process(monkeypatch):
    from tfa_sim.api import runner
    from tfa_sim.numerics.shared_goldens import CHILD

    config = load_config(overrides=["case.s1=1024", "numerics.seed=11"])
    made = _shared(monkeypatch, runner)
    forked = runner.compute(config, event_log=False).summary["golden"]
    assert len(made) == 1 and made[0]._child._reaped  # the child ran, and is gone
    assert CHILD in made[0].done  # it computed goldens that were used
    monkeypatch.setattr(runner, "can_fork", lambda: False)
    assert runner.compute(config, event_log=False).summary["golden"] == forked
    assert forked["vs_kernel_golden"]["max_abs_err"] > 0  # a real comparison: the two goldens round differently


def test_a_failed_simulation_stops_the_goldens_child(monkeypatch):
    from tfa_sim.api import runner

    def fail(*_args, **_kwargs):
        raise RuntimeError("simulated failure")

    made = _shared(monkeypatch, runner)
    monkeypatch.setattr(runner, "simulate", fail)
    with pytest.raises(RuntimeError, match="simulated failure"):
        runner.compute(load_config(overrides=["case.s1=1024"]), event_log=False)
    assert len(made) == 1 and made[0]._child._reaped
    with pytest.raises(ChildProcessError):
        os.waitpid(made[0]._child._pid, os.WNOHANG)


LEAN = "import sys; from tfa_sim.cli import main; main(sys.argv[1:])"


REPORT_BLAS = """
import atexit, sys
def report():
    used = "threadpoolctl" in sys.modules
    from threadpoolctl import threadpool_info
    print(used, sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}))
atexit.register(report)
from tfa_sim.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize("env, expected", [({}, "False [1]"), ({"OPENBLAS_NUM_THREADS": "2"}, "True [2]")])
def test_the_command_starts_blas_with_one_thread_unless_the_user_says(tmp_path, env, expected):
    """tfa-sim's own process starts OpenBLAS with one thread, which numerics.blas_threads = 1 then needs no
    threadpoolctl for (tfa_sim/numerics/blas.py); the user's variable wins, and threadpoolctl sets the config's
    count."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", REPORT_BLAS, "run", "--set", "case.s1=512", "--no-event-log", "--out",
                        "r"], capture_output=True, text=True, cwd=tmp_path, timeout=120, env={**clean, **env})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == expected, r.stdout[-300:]


@pytest.mark.parametrize("argv, absent", [
    (["--help"], ("numpy", "networkx", "matplotlib", "threadpoolctl")),
    (["run", "--no-event-log", "--out", "r"], ("networkx", "matplotlib")),
    (["run", "--no-numerics", "--no-event-log", "--out", "r"], ("networkx", "matplotlib", "threadpoolctl")),
])
def test_commands_import_only_what_they_use(tmp_path, argv, absent):
    """--help loads no numpy; a run without the event log draws no timeline and builds no task graph."""
    code = f"import atexit; atexit.register(lambda: print(sorted(set(sys.modules) & {set(absent)!r}))); {LEAN}"
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-300:]


@pytest.mark.parametrize("window", [None, (0, 1)])
def test_a_forked_trace_writer_writes_the_trace_this_process_would(tmp_path, monkeypatch, window):
    """trace.json from the forked child (its own counters: the window's pools only) equals the one written in
    process, byte for byte, with and without a window of cores; a child that fails leaves the work to the run."""
    from tfa_sim.api import runner

    config = load_config(overrides=["case.s0=512", "case.s1=2048", "numerics.enabled=false"],
                         values=[("hardware", "preset", "910b2")])
    monkeypatch.setattr(runner, "TRACE_FORK_EVENTS", 0)
    children = []
    forked = runner.Forked

    def recorded(*args):
        children.append(forked(*args))
        return children[-1]

    monkeypatch.setattr(runner, "Forked", recorded)
    trace = {}
    for name, fork in (("forked", True), ("here", False)):
        monkeypatch.setattr(runner, "can_fork", lambda fork=fork: fork)
        runner.run(config, out_dir=str(tmp_path / name), trace_window=window)
        trace[name] = (tmp_path / name / "trace.json").read_bytes()
    assert len(children) == 1 and children[0]._reaped
    assert trace["forked"] == trace["here"]
    assert b'"ph":"C"' in trace["here"]  # counter tracks, which the child collects itself

    def broken(*_args):
        raise RuntimeError("trace child failed")

    monkeypatch.setattr(runner, "can_fork", lambda: True)
    monkeypatch.setattr(runner, "trace_in_child", broken)
    runner.run(config, out_dir=str(tmp_path / "fallback"), trace_window=window)
    assert (tmp_path / "fallback" / "trace.json").read_bytes() == trace["here"]
