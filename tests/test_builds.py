"""The kernel's three builds (docs/kernel.md, "Builds") and the chip's cross-core sync unit (docs/timing.md,
"Cross-core sync"): defaults, legality, the mechanisms each build adds, and outputs that do not change."""
from __future__ import annotations

import numpy as np
import pytest
import simpy

import tfa_sim
from tfa_sim.buffers.ffts import Ffts
from tfa_sim.buffers.fifo import FifoWindow, GmFifo
from tfa_sim.buffers.pools import Flag
from tfa_sim.clock.simpy_adapter import run
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.geometry import launch_geometry
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan


def grid(c, cores):
    return launch_geometry(c, cores).main.grid


def config(build, case=None, schedule=None, numerics=False, **sections):
    return build_config({"kernel": {"build": build}, "case": case or {}, "schedule": schedule or {},
                         "numerics": {"enabled": numerics}, **sections})


# ---- the sync unit ----------------------------------------------------------------------------------------
def test_the_sync_unit_serves_messages_one_at_a_time_in_arrival_order():
    unit = Ffts(service=10.0)
    assert [unit.deliver(0.0), unit.deliver(0.0), unit.deliver(5.0), unit.deliver(100.0)] == [10, 20, 30, 110]
    assert unit.messages == 4 and unit.queued == 10 + 15  # the second waited 10 cycles, the third 15


def test_a_flag_is_seen_its_latency_after_the_unit_served_its_message():
    env = simpy.Environment()
    unit, seen = Ffts(service=7.0), []
    flag = Flag(env, "core0.qk_tile_fifo.ready[aiv0]", latency=20.0, ffts=unit)

    def waiter(env):
        for _ in range(2):
            pending = flag.request()
            if not pending.triggered:
                event = env.event()
                pending.callback = lambda _p, e=event: e.succeed()
                yield event
            seen.append(env.now)

    env.process(waiter(env))
    flag.set()
    flag.set()  # sent in the same cycle: served 7 cycles after the first
    run(env)
    assert seen == [27.0, 34.0]


def test_a_cube_set_reaches_both_aivs_in_one_message():
    env = simpy.Environment()
    unit = Ffts(service=3.0)
    fifo = GmFifo(env, "core0.qk_tile_fifo", 8, 4, 0.0, (2, 2), np.float32, ffts=unit)
    fifo.tile(0).push(None)  # the cube's record(): both lanes
    fifo.tile(0, (1,)).credit(None)  # one AIV's free()
    assert unit.messages == 2 and [f.pending for f in fifo.ready] == [1, 1] and fifo.consumed[1].pending == 1


@pytest.mark.parametrize(("tiles", "period"), [(16, 1), (16, 4), (24, 8), (6, 4)])
def test_a_block_sends_the_messages_the_protocol_counts(tiles, period):
    """Per tile 4 ready messages (QK and PV from the cube, P from each AIV), 5 credits per `period` tiles (QK
    and PV from each AIV, P from the cube), and each AIV's block end: 4T + 5⌊T/p⌋ + 2."""
    c = config("manual", {"s1": 256 * tiles}, {"cv_fifo_cons_sync_period": period})
    sim = simulate(kernel_plan(c, load_hardware(c.hardware)), None, log_events=False)
    assert sim.sync_messages == 4 * tiles + 5 * (tiles // period) + 2


def test_a_saturated_sync_unit_bounds_the_tile_rate():
    """16 cores syncing every tile (period 1) at 400 cycles a message cannot go faster than the unit: 16 blocks
    × 9 messages per tile × 400 cycles per tile of the launch, whatever the pipes could do."""
    c = config("jit", {"s0": 16 * 128, "s1": 256 * 32})
    hw = load_hardware(c.hardware).with_values({"sync.ffts_service": 400.0})
    sim = simulate(kernel_plan(c, hw), None, log_events=False)
    assert sim.total_cycles >= 16 * 9 * 400 * 32
    assert sim.sync_busy / sim.total_cycles > 0.9


# ---- builds -----------------------------------------------------------------------------------------------
def test_each_build_sets_the_defaults_a_config_does_not_give():
    manual, jit, dsl = (config(b, {"s1": 4096}) for b in ("manual", "jit", "dsl"))
    assert (manual.schedule.cv_fifo_cons_sync_period, jit.schedule.cv_fifo_cons_sync_period) == (4, 1)
    assert (dsl.schedule.qk_preload, dsl.tiling.tile_s1, dsl.schedule.l1_p, dsl.schedule.l1_v) == (3, 256, 1, 1)
    assert config("dsl", {"s1": 32768}).tiling.tile_s1 == 512  # run.py: 512 from S1 = 32768 on
    given = config("dsl", {"s1": 32768}, {"qk_preload": 4}, tiling={"tile_s1": 256})
    assert (given.schedule.qk_preload, given.tiling.tile_s1) == (4, 256)


@pytest.mark.parametrize(("start", "build"), [("manual", "dsl"), ("dsl", "jit"), ("jit", "manual"), ("dsl", "manual")])
def test_a_filled_config_run_by_another_build_takes_that_builds_defaults(start, build):
    """A Config (or its saved config.toml) holds every key, its build's defaults among them: run by another
    build (tfa_sim.run(cfg, overrides={"kernel.build": …}), --set kernel.build=… on a saved config) it takes
    that build's defaults, as the same case given as a file without them does; a value set beside it stays."""
    from tfa_sim.spec.load import configure

    case = {"s1": 32768, "s0": 512}
    filled = config(start, case).to_dict()
    assert configure(filled, [("kernel", "build", build)]) == config(build, case)
    kept = configure(filled, [("schedule", "qk_preload", 4), ("kernel", "build", build)])
    assert kept.schedule.qk_preload == 4 and kept.schedule == config(build, case, {"qk_preload": 4}).schedule


def test_a_case_file_run_by_the_port_at_another_size_takes_the_ports_defaults_there():
    """--set kernel.build=dsl --set case.s1=… on the built-in case (a file that gives TILE_S1 256 and preload 4,
    the manual kernel's values): the port's defaults at the new size, TILE_S1 512 from S1 = 32768."""
    from tfa_sim.spec.load import load_config

    c = load_config(None, None, ["kernel.build=dsl", "case.s0=32768", "case.s1=32768"])
    assert (c.tiling.tile_s1, c.schedule.qk_preload, c.schedule.l1_p) == (512, 3, 1)
    kept = load_config(None, None, ["case.s1=32768", "kernel.build=dsl", "tiling.tile_s1=256"])
    assert (kept.tiling.tile_s1, kept.schedule.qk_preload) == (256, 3)


@pytest.mark.parametrize(("sections", "needle"), [
    ({"kernel": {"build": "tvm"}}, "kernel.build"),
    ({"kernel": {"build": "dsl"}, "case": {"causal": True}}, "kernel.masks = false"),
    ({"kernel": {"build": "dsl"}, "schedule": {"block_order": "zigzag"}}, "contiguous range"),
    ({"kernel": {"bild": "dsl"}}, "did you mean 'build'"),
])
def test_a_build_the_config_cannot_have_is_refused_in_one_line(sections, needle):
    with pytest.raises(InputError, match=needle):
        build_config({"numerics": {"enabled": False}, **sections})


def test_outputs_are_the_same_bits_in_every_build():
    outs = []
    for build in ("manual", "jit", "dsl"):
        c = config(build, {"s0": 256, "s1": 2048}, numerics=True)
        outs.append(tfa_sim.run(c).o)
    assert all(np.array_equal(o, outs[0]) for o in outs[1:])


def dispatches(build, units):
    c = config(build, {"s0": 128 * units, "s1": 1024})
    sim = simulate(kernel_plan(c, load_hardware(c.hardware)), None)
    spans = [r for r in sim.stats.events.records() if r.kind == "block dispatch"]
    return sim, spans


def test_the_dsl_build_dispatches_once_per_core_and_the_manual_once_per_block():
    sim, spans = dispatches("manual", 30)
    assert sim.cores_used == 24 and len(spans) == 30
    sim, spans = dispatches("dsl", 30)
    assert sim.cores_used == 24 and len(spans) == 24
    # the first 30 % 24 = 6 cores take two units each, one after the other: blocks 0 and 1 on core 0
    core0 = sorted({r.block for r in sim.stats.events.records() if r.unit == "core0.cubecore0" and r.block >= 0})
    assert core0 == [0, 1]


def test_a_persistent_cores_fifos_count_on_across_its_units():
    """With 6-tile units, period 8: the producer's first credit wait is the FIFO's tile 8, unit 2's tile 2."""
    env = simpy.Environment()
    fifo = GmFifo(env, "core0.p_tile_fifo", 8, 8, 0.0, (2, 2), np.float32)
    first, second = FifoWindow(fifo, 0), FifoWindow(fifo, 6)
    assert [bool(first.tile(t).credits) for t in range(6)] == [False] * 6
    assert [bool(second.tile(t).credits) for t in range(6)] == [False, False, True, False, False, False]


def aic_loads(build):
    """The AIC's MTE2 instructions of the first steady tile (after the preload prologue) of a one-block run."""
    c = config(build, {"s1": 256 * 8})
    sim = simulate(kernel_plan(c, load_hardware(c.hardware)), None)
    loads = [r for r in sim.stats.events.records() if r.unit == "core0.cubecore0" and r.pipe == "MTE2"]
    first_pv = next(i for i, r in enumerate(loads) if r.kind in ("TLOAD V", "TLOAD P"))
    return [(r.kind, r.tile, r.sub) for r in loads[first_pv:first_pv + 6]]


def test_each_build_issues_its_own_stage_order():
    """Manual: V is loaded before the wait for P, the next tile's K before both (QK(t+4) then PV(t)); the dsl
    port: P, then V, then the next QK's K (PV(t) then QK(t+3))."""
    assert aic_loads("manual") == [("TLOAD V", 0, 0), ("TLOAD P", 0, 0), ("TLOAD K", 4, 1), ("TLOAD V", 0, 1),
                                   ("TLOAD P", 0, 1), ("TLOAD K", 5, 0)]
    assert aic_loads("dsl") == [("TLOAD P", 0, 0), ("TLOAD V", 0, 0), ("TLOAD K", 3, 0), ("TLOAD P", 0, 1),
                                ("TLOAD V", 0, 1), ("TLOAD K", 3, 1)]


@pytest.mark.parametrize("build, taker, setter", [
    ("manual", "TSTORE x_exp →p_tile_fifo", ("TLOAD P", 1)),
    ("dsl", "TLOAD QK", ("TLOAD V", 1)),
])
def test_each_build_waits_for_its_p_slot_where_its_source_does(build, taker, setter):
    """Period 8, one block: the AIV's first P credit wait is before tile 8.  The manual kernel's TPUSH allocates
    right before the first store of x_exp (compute_p runs its first row slice's load and softmax meanwhile); the
    port's ``talloc`` follows the QK ``tpop`` before any load (fa_builder.py ``emit_softmax``).  The credit is
    the cube's ``free()`` of P(7): the manual kernel's with the last sub-tile's P load, the port's ``tfree`` in
    ``push_pv`` after the last sub-tile's V load."""
    c = config(build, {"s0": 128, "s1": 256 * 12}, {"cv_fifo_cons_sync_period": 8})
    records = simulate(kernel_plan(c, load_hardware(c.hardware)), None).stats.events.records()
    by_id = {r.id: r for r in records}
    credits = [(r.kind, by_id[pred].kind, by_id[pred].stage, by_id[pred].tile, by_id[pred].sub)
               for r in records if r.unit == "core0.veccore0" and r.stage == "compute_p" and r.tile == 8
               for pred, cause, _lat, via in r.deps if cause == "credit"]
    assert credits == [(taker, setter[0], "compute_pv", 7, setter[1])]


@pytest.mark.parametrize("s0", [2048, 512])
def test_the_manual_build_reads_what_its_host_prefetched_from_the_l2(s0):
    """The manual build's host program prefetches S0·HEAD elements of Q, K and V (PTO_PREFETCH): at S0 = S1
    nothing comes from HBM; at S0 = 512 < S1 = 2048 the K and V rows from 512 on do.  The others fetch each K
    and V chunk once (the first reader), and each block's Q."""
    hbm = {}
    for build in ("manual", "jit", "dsl"):
        c = config(build, {"s0": s0, "s1": 2048}, {"qk_preload": 4}, tiling={"tile_s1": 256})
        hbm[build] = simulate(kernel_plan(c, load_hardware(c.hardware)), None, log_events=False).hbm_bytes
    kv, q = 2 * 2048 * 128 * 2, s0 * 128 * 2
    assert hbm == {"manual": 2 * (2048 - s0) * 128 * 2, "jit": kv + q, "dsl": kv + q}


def test_a_profiles_block_dim_is_the_launch_grid():
    """msprof's Block Dim of the port's launch is its persistent grid, min(units, cores), not its units."""
    assert grid(config("dsl", {"s0": 128 * 30}), 24) == 24 and grid(config("dsl", {"s0": 128 * 5}), 24) == 5
    assert grid(config("manual", {"s0": 128 * 30}), 24) == 30


@pytest.mark.parametrize(("case", "schedule"), [({"s0": 200, "heads": 8, "kv_heads": 2}, {"gqa_pack": True}),
                                                ({"s0": 1, "heads": 32, "kv_heads": 8, "batch": 3}, {"gqa_pack": True}),
                                                ({"s0": 300, "heads": 4, "kv_heads": 4}, {}),
                                                ({"s0": 100, "heads": 6, "kv_heads": 2}, {"gqa_pack": False})])
def test_the_launch_grid_counts_the_blocks_the_model_runs(case, schedule):
    """Block Dim is the number of blocks make_blocks builds, packed or not (a packed block holds CUBE_S0 rows of
    a K/V head's query heads)."""
    from tfa_sim.spec.blocks import run_blocks

    c = config("manual", {"s1": 1024, **case}, schedule)
    assert grid(c, 24) == len(run_blocks(c))


@pytest.mark.parametrize("build", ["manual", "jit", "dsl"])
@pytest.mark.parametrize("s1", [4096, 32768])
def test_a_sweep_points_filled_config_is_the_config_it_runs(build, s1):
    """The sweep fills a point's missing keys as the config would, its build's defaults included, so a default
    jit or dsl point is recognised as its shape's reference run."""
    from tfa_sim.explore.sweep.schema import filled

    given = {"kernel": {"build": build}, "case": {"s1": s1}, "numerics": {"enabled": False}}
    assert filled(given) == build_config(given).to_dict()


def test_blocks_finding_the_same_inputs_prefetched_share_a_template():
    """One head with S0 ≥ S1: every block of the manual build finds all its inputs in the L2, so its blocks are as
    alike as the JIT build's (one template per block shape, replayed), where a decode step's first block, whose
    Q rows alone were prefetched, is a template of its own."""
    from tfa_sim.sim.simulation import launches

    def templates(c):
        kernel = launches(kernel_plan(c, load_hardware(c.hardware)))[0]
        return {kernel.template_key(b) for b in kernel.dispatch.order}

    square = {"heads": 1, "kv_heads": 1, "s0": 128 * 30, "s1": 2048}
    assert len(templates(config("manual", square))) == len(templates(config("jit", square))) == 1
    decode = {"heads": 32, "kv_heads": 8, "s0": 1, "s1": 4096}
    assert len(templates(config("manual", decode))) == len(templates(config("jit", decode))) + 1


def test_a_persistent_cores_memory_does_not_grow_with_its_program():
    """A persistent core runs all its units in one program that no template replays: a finished instruction
    lets go of what it waited on, so the run holds the instructions in flight, not every one it ran (it used to
    keep them all through the chain of hand-offs: 11.7 GB at 131072²).  24 units, one per core, of 8 and of 64
    tiles: the longer programs' peak is within 1.5× of the shorter ones' (before: 6.2 and 38.5 MB)."""
    import tracemalloc

    def peak(s1):
        c = config("dsl", {"heads": 1, "kv_heads": 1, "s0": 128 * 24, "s1": s1})
        tracemalloc.start()
        try:
            result = simulate(kernel_plan(c, load_hardware(c.hardware)), None, log_events=False, fold=False)
            return tracemalloc.get_traced_memory()[1], result.total_cycles
        finally:
            tracemalloc.stop()

    (short, short_cycles), (long, long_cycles) = peak(2048), peak(16384)
    assert long_cycles > 4 * short_cycles  # the long programs did run (eight times the tiles)
    assert long < 1.5 * short, (short, long)
