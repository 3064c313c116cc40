"""numerics.threads: finished blocks' stage kernels on worker threads give the in-order run's bits."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from tfa_sim.api.runner import prepare_numerics, run
from tfa_sim.engine import ops
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

# short last block (S0 = 300), GQA, split-S1 with its combine launch: every kind of block and launch
CASE = {"s0": 300, "s1": 1024, "heads": 4, "kv_heads": 2}
NAMES = {"qk_fifo", "p_fifo", "exp_max", "global_max", "global_sum", "pv_fifo", "o_part"}


def outputs(tmp_path, backend: str, threads: int, schedule: dict) -> tuple[bytes, dict[str, bytes], list]:
    """o.npy, every dump file and the dump manifest of one run."""
    config = build_config({"case": CASE, "schedule": schedule,
                           "numerics": {"backend": backend, "threads": threads, "intermediate_check": True}})
    out = tmp_path / f"{backend}-{threads}-{len(schedule)}"
    run(config, None, str(out), event_log=False)
    dumps = {p.name: p.read_bytes() for p in sorted((out / "dumps").iterdir())}
    return (out / "o.npy").read_bytes(), dumps, json.loads(dumps["manifest.json"])


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.parametrize("schedule", [{}, {"s1_split": 4, "gqa_pack": True}])
def test_output_and_dumps_are_the_same_bits_for_any_thread_count(tmp_path, backend, schedule):
    o1, dumps1, manifest = outputs(tmp_path, backend, 1, schedule)
    split = "s1_split" in schedule
    assert {d["name"] for d in manifest} == NAMES | ({"combine_o"} if split else set())
    for threads in (2, 3, 0):  # 0: the default, one worker beside the goldens' child on two CPUs
        o, dumps, _ = outputs(tmp_path, backend, threads, schedule)
        assert o == o1
        assert dumps == dumps1  # the manifest too: dumps are listed in simulated completion order


def test_threads_out_of_range_is_refused():
    with pytest.raises(InputError, match="numerics.threads"):
        build_config({"numerics": {"threads": -1}})


def test_blocks_steps_run_on_the_worker_threads(monkeypatch):
    """With two threads every block's data steps run on a ``numerics`` worker, not the simulating thread."""
    seen: list[str] = []
    original = ops._run_steps

    def spy(instrs, block_run):
        seen.append(threading.current_thread().name)
        original(instrs, block_run)

    monkeypatch.setattr(ops, "_run_steps", spy)
    config = build_config({"case": {"s0": 512, "s1": 1024}, "numerics": {"threads": 2}})
    numerics = prepare_numerics(config, None, {})
    simulate(kernel_plan(config, load_hardware(config.hardware)), numerics, log_events=False)
    assert len(seen) == 4 and all(name.startswith("numerics") for name in seen)  # one per block
    assert np.isfinite(numerics.out).all()


def test_an_error_in_a_workers_step_reaches_the_caller(monkeypatch):
    """A stage kernel failing on a worker thread fails the run with its own error, and no worker is left."""
    from tfa_sim.buffers import data

    def broken(self, ins):
        raise FloatingPointError(f"step of block {ins.block} failed")

    monkeypatch.setattr(data.Compute, "__call__", broken)
    config = build_config({"case": {"s0": 512, "s1": 1024}, "numerics": {"threads": 2}})
    numerics = prepare_numerics(config, None, {})
    before = threading.active_count()
    with pytest.raises(FloatingPointError, match="step of block"):
        simulate(kernel_plan(config, load_hardware(config.hardware)), numerics, log_events=False)
    assert threading.active_count() == before


@pytest.mark.parametrize(("backend", "threads", "forked", "cpus", "expected"), [
    ("native", 0, True, 2, 1),  # the goldens' child takes one of two CPUs: one worker beside the simulation
    ("numpy", 0, True, 2, 1),
    ("native", 0, True, 4, 3),
    ("native", 0, False, 2, 2),  # no child: every CPU
    ("numpy", 0, False, 1, 0),  # one CPU: the steps run in the simulation's thread
    ("native", 1, True, 4, 0),  # numerics.threads = 1: in the simulation's thread
    ("native", 3, True, 2, 3),  # an explicit count is taken as given
])
def test_default_workers_leave_the_goldens_child_a_cpu(monkeypatch, backend, threads, forked, cpus, expected):
    from tfa_sim.sim import simulation

    monkeypatch.setattr(simulation, "spare_cpus", lambda: cpus)
    config = build_config({"numerics": {"backend": backend, "threads": threads}})
    assert simulation.op_workers(config, goldens_forked=forked) == expected


def test_a_run_tells_the_simulation_that_its_goldens_are_forked(tmp_path, monkeypatch):
    """runner.started passes ``goldens_forked`` exactly when it has forked the goldens' child."""
    from tfa_sim.api import runner

    seen = []
    real = runner.simulate
    monkeypatch.setattr(runner, "simulate", lambda *a, **k: seen.append(k["goldens_forked"]) or real(*a, **k))
    config = build_config({"case": {"s0": 128, "s1": 512}})
    for fork in (True, False):
        monkeypatch.setattr(runner, "can_fork", lambda fork=fork: fork)
        run(config, None, str(tmp_path / f"fork-{fork}"), event_log=False)
    assert seen == [True, False]
