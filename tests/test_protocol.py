"""The kernel's protocol (docs/kernel.md, "Protocol details that change timing"), checked on the event log."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import slow_vector

from tfa_sim.backends import get_backend
from tfa_sim.clock.simpy_adapter import run
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.sim.functional import run_functional
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.errors import ScheduleError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import load_config
from tfa_sim.stages.block_kernel import Numerics
from tfa_sim.stages.plan import kernel_plan


def one_block(*overrides, hw_values=None, vector_slowdown=1.0):
    config = load_config(overrides=["numerics.enabled=false", "hardware.cores=1", *overrides])
    hw = slow_vector(load_hardware(config.hardware).with_values(hw_values or {}), vector_slowdown)
    result = simulate(kernel_plan(config, hw), None, log_events=True)
    return config, hw, [e for e in result.stats.events if e.pipe != "dispatch"]


def find(events, kind, stage, t, sub=0, unit="core0.cubecore0"):
    hits = [e for e in events if (e.kind, e.stage, e.tile, e.sub, e.unit) == (kind, stage, t, sub, unit)]
    assert len(hits) == 1, f"expected one {kind} [{stage} t{t} #{sub}] on {unit}, found {len(hits)}"
    return hits[0]


def p_ready_at(events, hw, t, kf):
    """When both AIVs' ready flags of P tile t reach the cube: the last TSTORE x_exp of the tile + latency."""
    stores = [find(events, "TSTORE x_exp →p_tile_fifo", "compute_p", t, kf - 1, f"core0.veccore{a}") for a in (0, 1)]
    return max(e.end for e in stores) + hw.sync.flag_latency


@pytest.mark.parametrize("tile_s1", [256, 512])
def test_v_load_is_issued_before_the_core_waits_for_p(tile_s1):
    """compute_pv issues TLOAD V, then waits for P: the V load never waits for P's ready flag (with a slow
    vector core, P comes late and V is in L1 long before), the P load never starts before."""
    config, hw, events = one_block(f"tiling.tile_s1={tile_s1}", "case.s1=4096",
                                   vector_slowdown=2.0)
    kf = config.tiling.k_tile_factor
    early = 0
    for t in range(config.tiles):
        ready = p_ready_at(events, hw, t, kf)
        load_v, load_p = find(events, "TLOAD V", "compute_pv", t), find(events, "TLOAD P", "compute_pv", t)
        assert load_p.start >= ready - 1e-9, f"tile {t}: TLOAD P at {load_p.start} before P ready at {ready}"
        assert load_v.start < load_p.start, f"tile {t}: V not loaded before P"
        early += load_v.start < ready
    assert early > config.tiles // 2, f"V loaded before P was ready in only {early} of {config.tiles} tiles"


def test_a_cross_core_wait_blocks_the_whole_issue_stream():
    """A unit issues X (long, pipe A), waits for a flag, then Y (pipe B, no waits of its own): Y starts when
    the flag arrives, not at 0, though B is idle; the idle time is B's stall on the flag, and Y depends on
    the flag's setter.  Z, issued before the wait on B, is not held back."""
    import simpy

    from tfa_sim.buffers.pools import Flag
    from tfa_sim.engine.issue import IssueStream, Wait
    from tfa_sim.engine.pipes import Instr, Pipe, Stats

    env, stats = simpy.Environment(), Stats(True)
    a, b, other = (Pipe(env, unit, name, stats) for unit, name in
                   (("core0.cubecore0", "MTE2"), ("core0.cubecore0", "FIX"), ("core0.veccore0", "MTE3")))
    flag = Flag(env, "core0.qk_tile_fifo.consumed[aiv0]", latency=5.0, cause="credit", owner_pipe=other)
    setter = other.issue(Instr(other, "compute_p", 0, 0, 0, "TLOAD QK", 100.0, then=(flag.set,)))

    def program():
        yield Instr(a, "compute_qk", 0, 0, 0, "X", 300.0)
        yield Instr(b, "compute_qk", 0, 0, 0, "Z", 10.0)
        yield Wait("compute_qk", [flag])
        yield Instr(b, "compute_qk", 0, 1, 0, "Y", 10.0)

    stream = IssueStream(env, "core0.cubecore0", [a, b])
    stream.run(program())
    run(env)
    y = next(e for e in stats.events if e.kind == "Y")
    z = next(e for e in stats.events if e.kind == "Z")
    assert (z.start, y.start) == (0.0, 105.0), (z.start, y.start)
    assert b.stall_by[("compute_qk", "credit", "qk_tile_fifo.consumed[aiv0]")] == pytest.approx(95.0)
    assert y.deps == ((setter.id, "credit", 5.0, "qk_tile_fifo.consumed[aiv0]"),), y.deps


def test_x_exp_follows_the_shared_source_counter():
    """One counter per AIV picks both the source tile and x_exp; it advances per compute_p and compute_gu call."""
    config, _, events = one_block("case.s1=4096")
    unit = "core0.veccore0"
    loads = [e for e in events if e.unit == unit and e.kind in ("TLOAD QK", "TLOAD PV")]  # program order (MTE2)
    softmax = {(e.tile, e.sub): e for e in events if e.unit == unit and e.kind == "VEC softmax"}
    for counter, load in enumerate(loads):
        assert load.slots["veccore0.UB.src"] == counter % kernel_plan(config).buffers.ub_src, (counter, load)
        if load.kind == "TLOAD QK":
            x_exp = softmax[(load.tile, load.sub)].slots["veccore0.UB.x_exp"]
            assert x_exp == counter % config.schedule.ub_x_exp, (counter, load)


def test_l0c_accumulators_follow_the_kernels_running_index():
    """Prologue: each QK sub-tile the next half; steady loop: QK one half, PV the other, every iteration;
    tail: PV alternates."""
    config, _, events = one_block("case.s1=4096")
    kf, pre, tiles = config.tiling.k_tile_factor, config.schedule.qk_preload, config.tiles
    acc = {(e.stage, e.tile, e.sub): e.slots["L0C"] for e in events if e.kind == "TMATMUL" and "L0C" in e.slots}
    running = 0
    for t in range(pre):
        for s in range(kf):
            assert acc[("compute_qk", t, s)] == running % 2, ("prologue", t, s)
            running += 1
    for t in range(tiles):
        if t + pre < tiles:
            assert acc[("compute_qk", t + pre, 0)] == running % 2, ("steady QK", t)
            running += 1
        assert acc[("compute_pv", t, 0)] == running % 2, ("PV", t)
        running += 1


@pytest.mark.parametrize("fifo", [4, 8])
def test_preload_plus_one_tiles_is_safe_at_preload_equal_to_fifo_depth(fifo):
    """qk_preload = cv_fifo_size with preload + 1 tiles: tile 0 does not use the l1_exp_max ring, so no entry
    is overwritten; the output equals the functional model bit for bit."""
    config = load_config(overrides=[f"schedule.cv_fifo_size={fifo}", f"schedule.qk_preload={fifo}",
                                    f"case.s1={256 * (fifo + 1)}"])
    inputs = generate_inputs(config)
    backend = get_backend("native")
    out = np.zeros((1, 1, config.case.s0, config.case.head), np.float32)
    simulate(kernel_plan(config, load_hardware(config.hardware)), Numerics(backend, inputs, out), log_events=False)
    want, _ = run_functional(backend, config, inputs)
    assert np.array_equal(out.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("fifo, extra", [(4, 2), (8, 2), (8, 5)])
def test_preload_equal_to_fifo_depth_overwrites_l1_exp_max_with_enough_tiles(fifo, extra):
    """With preload + 2 tiles or more, P(1 + preload) overwrites tile 1's l1_exp_max before GU(1) reads it."""
    config = load_config(overrides=["numerics.enabled=false", f"schedule.cv_fifo_size={fifo}",
                                    f"schedule.qk_preload={fifo}", f"case.s1={256 * (fifo + extra)}"])
    with pytest.raises(ScheduleError) as err:
        simulate(kernel_plan(config, load_hardware(config.hardware)), None, log_events=False)
    msg = str(err.value)
    slot = (fifo + 1) % fifo
    want = (f"l1_exp_max slot {slot} overwritten by VEC softmax [compute_p t{fifo + 1} #0]",
            "the entry of tile 1 is still unread", "O would be wrong")
    assert all(w in msg for w in want), msg
