"""The SimPy pipeline: numbers equal the functional result, timing equals hand-computed schedules."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
from conftest import EXTRA_CONFIGS, REFERENCE_CASES, extra_config, slow_vector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfa_sim.backends import get_backend
from tfa_sim.clock.simpy_adapter import run
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.sim.functional import run_functional
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.blocks import make_blocks
from tfa_sim.spec.config import HardwareConfig, ScheduleConfig
from tfa_sim.spec.errors import InputError, ScheduleError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config, load_config
from tfa_sim.stages.block_kernel import Numerics
from tfa_sim.stages.plan import kernel_plan
from tfa_sim.views.listing import call_names, priced

BACKEND = get_backend("native")


def simulate_numbers(config, hw=None, backend=BACKEND):
    hw = hw or load_hardware(config.hardware)
    inputs = generate_inputs(config)
    c = config.case
    out = np.zeros((c.batch, c.heads, c.s0, c.head), np.float32)
    result = simulate(kernel_plan(config, hw), Numerics(backend, inputs, out), log_events=False)
    return out, inputs, result


def assert_bits_equal(got, want, what):
    diff = got.view(np.uint32) != want.view(np.uint32)
    assert not diff.any(), f"{what}: {int(diff.sum())} elements differ, first at {np.argwhere(diff)[0]}"


@pytest.mark.parametrize("name", REFERENCE_CASES + list(EXTRA_CONFIGS))
def test_pipeline_output_equals_functional(name):
    config = load_config(case=name) if name in REFERENCE_CASES else extra_config(name)
    out, inputs, _ = simulate_numbers(config)
    want, _ = run_functional(BACKEND, config, inputs)
    assert_bits_equal(out, want, name)


@pytest.mark.parametrize("overrides", [
    ["schedule.qk_preload=1", "tiling.tile_s1=128"], ["schedule.qk_preload=2"], ["schedule.qk_preload=7"],
    ["schedule.cv_fifo_size=4", "schedule.qk_preload=3"], ["schedule.cv_fifo_cons_sync_period=2"],
    ["schedule.l1_k=1", "schedule.l1_p=1", "schedule.l1_v=1"], ["schedule.ub_src=1", "schedule.ub_x_exp=1"],
    ["hardware.cores=1"], ["hardware.cores=3"],
    ["schedule.l0a=1", "schedule.l0b=1"], ["schedule.l0a=4", "schedule.l0b=4"],
], ids=lambda o: ",".join(o))
@pytest.mark.parametrize("reference", ["npu", "cpu_sim"])
def test_output_does_not_depend_on_schedule_knobs(overrides, reference):
    base = ["case.s0=512", "case.s1=4096", f'numerics.reference="{reference}"']
    backend = get_backend("native", "tfa", reference)
    config = load_config(overrides=base + overrides)
    out, inputs, _ = simulate_numbers(config, backend=backend)
    default_schedule = dataclasses.replace(config, schedule=ScheduleConfig(), hardware=HardwareConfig())
    expected, _ = simulate_numbers(default_schedule, backend=backend)[0], None
    assert_bits_equal(out, expected, str(overrides))
    assert_bits_equal(out, run_functional(backend, config, inputs)[0], str(overrides))


@st.composite
def legal_configs(draw):
    head = draw(st.sampled_from([64, 128]))
    cube_s1 = draw(st.sampled_from([64, 128]))
    tile_s1 = cube_s1 * draw(st.sampled_from([1, 2, 4]))
    cube_s0 = draw(st.sampled_from([64, 128]))
    tiles = draw(st.integers(1, 6))
    fifo = draw(st.integers(2, 8))
    data = {
        "case": {"head": head, "s0": cube_s0 * draw(st.integers(1, 3)), "s1": tile_s1 * tiles,
                 "causal": draw(st.booleans()), "heads": draw(st.sampled_from([1, 2])), "kv_heads": 1},
        "tiling": {"cube_s0": cube_s0, "cube_s1": cube_s1, "tile_s1": tile_s1},
        "schedule": {"cv_fifo_size": fifo, "qk_preload": draw(st.integers(1 if tile_s1 == cube_s1 else 2, fifo)),
                     "cv_fifo_cons_sync_period": draw(st.integers(1, fifo)),
                     "l1_k": draw(st.integers(1, 3)), "ub_src": draw(st.integers(1, 3))},
        "hardware": {"cores": draw(st.integers(1, 4))},
    }
    try:
        return build_config(data)
    except InputError:
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(legal_configs())
def test_random_legal_configs_match_functional(config):
    if config is None:
        return  # an illegal draw: the legality rules are tested in test_config.py
    try:
        out, inputs, _ = simulate_numbers(config)
    except ScheduleError as err:  # some credit periods cannot protect a shallow FIFO: must say so
        assert "overwritten" in str(err) or "deadlock" in str(err), str(err)
        return
    want, _ = run_functional(BACKEND, config, inputs)
    assert_bits_equal(out, want, str(config))


def ideal_hardware(config):
    """No contention and no sync cost: infinite bandwidth, zero latency and overheads, free moves."""
    hw = load_hardware(config.hardware)
    free_moves = {f"move.{f.name}": float("inf") for f in dataclasses.fields(hw.move)}
    return hw.with_values({**free_moves, "gm.l2_bandwidth": float("inf"), "gm.hbm_bandwidth": float("inf"),
                           "gm.l2_latency": 0.0, "gm.miss_latency": 0.0, "sync.flag_latency": 0.0,
                           "sync.ffts_service": 0.0, "overhead.block_dispatch": 0.0}).with_cores(1)


def vector_cycles(plan, stage, **names):
    """The cycles of one call's vector groups, as the stage's listing prices them (tfa_sim.views.listing)."""
    steady, dims = call_names(plan, stage)
    return sum(c for _, pipe, c in priced(plan, stage, {**steady, **names}, dims) if pipe == "V" and c)


def two_resource_recurrence(config, plan):
    """The kernel program as two resources (cube, vector) with stage costs, computed by hand.

    Cube order: QK prologue, then per tile and sub-tile QK(t+P) then PV(t); vector:
    P prologue, then per tile P(t+P) row slices then GU(t).  P(t) needs all of QK(t),
    PV(t) needs all of P(t), GU(t) needs all of PV(t).
    """
    c, t, s = config.case, config.tiling, config.schedule
    tiles, kf, pre = config.tiles, t.k_tile_factor, s.qk_preload
    costs = plan.costs
    qk = costs.matmul(t.cube_s0, t.cube_s1, c.head, 128)
    pv = costs.matmul(t.cube_s0, c.head, t.cube_s1, 128)
    cube_jobs = [("qk", i, j) for i in range(min(pre, tiles)) for j in range(kf)]
    vec_jobs = [("p", i, j) for i in range(min(pre, tiles)) for j in range(kf)]
    for i in range(tiles):
        for j in range(kf):
            if i + pre < tiles:
                cube_jobs.append(("qk", i + pre, j))
            cube_jobs.append(("pv", i, j))
        if i + pre < tiles:
            vec_jobs += [("p", i + pre, j) for j in range(kf)]
        vec_jobs.append(("gu", i, 0))
    end: dict = {}
    needs = {"qk": lambda i: None, "p": lambda i: ("qk", i, kf - 1), "pv": lambda i: ("p", i, kf - 1),
             "gu": lambda i: ("pv", i, kf - 1)}

    def dep(job):
        return needs[job[0]](job[1])

    cost = {"qk": lambda i, j: qk, "pv": lambda i, j: pv,
            "p": lambda i, j: vector_cycles(plan, "compute_p", first=i == 0),
            "gu": lambda i, j: vector_cycles(plan, "compute_gu", first=i == 0, last=i == tiles - 1,
                                             divide=i == tiles - 1)}
    free = {"cube": 0.0, "vec": 0.0}
    queues = {"cube": list(cube_jobs), "vec": list(vec_jobs)}
    while queues["cube"] or queues["vec"]:
        progressed = False
        for res, q in queues.items():
            while q and (dep(q[0]) is None or dep(q[0]) in end):
                job = q.pop(0)
                start = max(free[res], end[dep(job)] if dep(job) else 0.0)
                end[job] = free[res] = start + cost[job[0]](job[1], job[2])
                progressed = True
        assert progressed, "recurrence deadlocked"
    return max(end.values())


@pytest.mark.parametrize("overrides", [[], ["case.s1=4096"], ["case.s1=4096", "schedule.qk_preload=2"],
                                       ["case.s1=2048", "tiling.tile_s1=512"]], ids=str)
def test_one_block_equals_two_resource_recurrence(overrides):
    config = load_config(overrides=["numerics.enabled=false"] + overrides)
    hw = ideal_hardware(config)
    plan = kernel_plan(config, hw)
    result = simulate(plan, None, log_events=False)
    assert result.total_cycles == two_resource_recurrence(config, plan)


def test_gm_contention_emerges_from_traffic():
    """Same blocks, same chip bandwidth: 24 cores at once share it, one core alone barely touches it."""
    config = load_config(overrides=["numerics.enabled=false", "case.s0=3072", "case.s1=2048"])
    hw = load_hardware(config.hardware)
    narrow = hw.with_values({"gm.l2_bandwidth": 600.0})
    per_block, gm_stall = {}, {}
    for cores in (1, 24):
        chip = narrow.with_cores(cores)
        r = simulate(kernel_plan(config, chip), None, log_events=False)
        per_block[cores] = r.total_cycles / r.waves
        gm_stall[cores] = sum(s["gm"] for s in r.stats.stalls.values()) / r.blocks
    assert per_block[24] > 1.5 * per_block[1], per_block
    assert gm_stall[24] > 10 * gm_stall[1], gm_stall


def test_runs_are_deterministic():
    config = load_config(overrides=["case.s0=512", "case.s1=2048", "hardware.cores=3"])
    a, _, ra = simulate_numbers(config)
    b, _, rb = simulate_numbers(config)
    assert_bits_equal(a, b, "rerun")
    assert ra.total_cycles == rb.total_cycles and ra.stats.busy == rb.stats.busy


def test_blocks_run_in_waves():
    config = load_config(overrides=["numerics.enabled=false", "case.s0=1024", "hardware.cores=3"])
    r = simulate(kernel_plan(config, load_hardware(config.hardware)), None, log_events=True)
    assert (r.blocks, r.cores_used, r.waves) == (8, 3, 3)
    blocks_by_core = {}
    for e in r.stats.events:
        blocks_by_core.setdefault(e.unit.split(".")[0], set()).add(e.block)
    assert blocks_by_core == {"core0": {0, 3, 6}, "core1": {1, 4, 7}, "core2": {2, 5}}
    assert len(make_blocks(config)) == 8


def run_cli(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--out", str(tmp_path / "run"), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("overrides, needle", [
    (["schedule.l0c=1", "case.s1=2048"], "wait-for cycle"),
    (["schedule.qk_preload=8", "case.s1=2560"], "l1_exp_max slot 1 overwritten by VEC softmax [compute_p t9 #0]"),
], ids=["l0c_single_accumulator_deadlock", "exp_max_ring_overwritten_at_preload_equal_fifo"])
def test_broken_schedules_exit_3_with_diagnosis(tmp_path, overrides, needle):
    args = [a for o in overrides for a in ("--set", o)]
    r = run_cli(tmp_path, *args)
    assert r.returncode == 3, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_deadlock_report_names_blocked_pipes(tmp_path):
    r = run_cli(tmp_path, "--set", "schedule.l0c=1", "--set", "case.s1=2048")
    msg = r.stderr
    assert "core0.cubecore0.M" in msg and "core0.L0C" in msg and "held by TMATMUL [compute_pv t0 #0]" in msg, msg


def test_fifo_overwrite_is_a_hazard(tmp_path):
    """A credit period longer than the FIFO lets the producer overwrite an unread slot: with qk_preload = depth
    = 4 and period 8, QK(4) goes into slot 0 before any credit; one UB source tile and a slow vector keep QK(0)
    unread that long.  Five tiles: too few for the l1_exp_max ring hazard (qk_preload + 2)."""
    config = load_config(overrides=["numerics.enabled=false", "case.s1=1280", "schedule.cv_fifo_size=4",
                                    "schedule.qk_preload=4", "schedule.cv_fifo_cons_sync_period=8",
                                    "schedule.ub_src=1"])
    hw = load_hardware(config.hardware)
    slow = slow_vector(hw, 8.0)
    with pytest.raises(ScheduleError, match=r"qk_tile_fifo slot 0 .* overwritten by FIXPIPE"):
        simulate(kernel_plan(config, slow), None, log_events=False)


def test_flag_waited_more_often_than_set_is_diagnosed():
    import simpy

    from tfa_sim.buffers.pools import Flag
    from tfa_sim.engine.diagnose import deadlock_report
    from tfa_sim.engine.pipes import Instr, Pipe, Stats

    env = simpy.Environment()
    producer = Pipe(env, "core0.veccore0", "MTE3", Stats(False))
    consumer = Pipe(env, "core0.cubecore0", "MTE2", Stats(False))
    flag = Flag(env, "core0.p_tile_fifo.ready[aiv0]", owner_pipe=producer)
    producer.issue(Instr(producer, "compute_p", 0, 0, 0, "TSTORE", 10, then=(flag.set,)))
    for t in range(2):
        consumer.issue(Instr(consumer, "compute_pv", 0, t, 0, "TLOAD P", 5, waits=(flag,)))
    run(env)

    class Stuck:
        streams: list = []

        def pipes(self):
            return [producer, consumer]

    report = deadlock_report(env.now, [Stuck()])
    assert ("core0.cubecore0.MTE2 [TLOAD P [compute_pv t1 #0], block 0] waits for core0.p_tile_fifo.ready[aiv0]"
            in report)
    assert "nothing left to do" in report


def test_summary_has_stable_timing_keys(tmp_path):
    import json

    r = run_cli(tmp_path, "--set", "hardware.cores=2", "--set", "case.s0=256")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in ("total_cycles", "time_us", "tflops", "normalized_tflops", "bound_pipe", "pipes", "stalls"):
        assert key in s, key
    assert set(s["pipes"]) == {"core0", "core1"}
    assert set(s["pipes"]["core0"]) == {"cubecore0.MTE2", "cubecore0.MTE1", "cubecore0.M", "cubecore0.FIX",
                                        "veccore0.MTE2", "veccore0.V", "veccore0.MTE3",
                                        "veccore1.MTE2", "veccore1.V", "veccore1.MTE3"}
    assert s["time_us"] == pytest.approx(s["total_cycles"] / 1800, rel=1e-5)
    assert s["tflops"] == pytest.approx(256 * 1024 * 128 * 4 / 1e6 / s["time_us"], rel=1e-3)
    assert s["normalized_tflops"] == pytest.approx(s["tflops"] * 12, rel=1e-3)
    assert set(s["stalls"]["compute_p"]) == {"data", "slot", "credit", "gm"}


def test_simpys_public_api_runs_the_same_schedule(tmp_path):
    """TFA_SIM_PUBLIC_SIMPY=1 (clock/simpy_adapter.py: SimPy's public API instead of the shortcuts, read at
    import, hence the subprocesses) gives the same event log, byte for byte, on a 4-core split-S1 run with
    dispatch, flags with latency and replayed templates."""
    import os

    argv = [sys.executable, "-m", "tfa_sim", "run", "--no-numerics", "--hw", "910b2", "--set", "hardware.cores=4",
            "--set", "case.s0=1024", "--set", "case.s1=4096", "--set", "schedule.s1_split=2"]
    for name, extra in (("fast", {}), ("public", {"TFA_SIM_PUBLIC_SIMPY": "1"})):
        env = {k: v for k, v in os.environ.items() if k != "TFA_SIM_PUBLIC_SIMPY"} | extra
        r = subprocess.run([*argv, "--out", str(tmp_path / name)], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "fast" / "events.npz").read_bytes() == (tmp_path / "public" / "events.npz").read_bytes()
