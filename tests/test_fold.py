"""Folded timing-only runs (tfa_sim.sim.fold) against the full simulation of the same launch."""
from __future__ import annotations

from pathlib import Path

import pytest

from tfa_sim.engine.report import timing_summary
from tfa_sim.sim.fold import cuts, simulate_folded
from tfa_sim.sim.simulation import launches, simulate
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

DECODE = {"heads": 32, "kv_heads": 8, "s0": 1}
#: The manual build's 100-block launch folds to within this of its full time (+0.28 % measured; +3.8 % when the
#: fold repeated the second wave, whose cores still start in step at the sync unit: benchmarks/README.md).
REL_MANUAL = 0.01


def timing(case: dict, schedule: dict | None = None, build: str = "manual"):
    config = build_config({"case": {**DECODE, **case}, "schedule": schedule or {}, "numerics": {"enabled": False},
                           "kernel": {"build": build}})
    return config, load_hardware(config.hardware)


@pytest.mark.parametrize(("case", "schedule", "samples"), [
    # 128 blocks on 24 cores (5 waves and 8 blocks), 64 tiles: waves 2, 3 and 2 with the partial one × two cuts
    ({"batch": 4, "s1": 16384}, {}, [[48, 20], [48, 36], [72, 20], [72, 36], [56, 20], [56, 36]]),
    # a deeper preload moves both cuts past its prologue
    ({"batch": 4, "s1": 16384}, {"qk_preload": 6}, [[48, 22], [48, 38], [72, 22], [72, 38], [56, 22], [56, 38]]),
    # one wave of 8 blocks: folded along the tiles only
    ({"batch": 1, "heads": 8, "kv_heads": 2, "s0": 16, "s1": 16384}, {"qk_preload": 2}, [[8, 18], [8, 34]]),
    # 128 blocks of 16 tiles, within the shorter cut: folded along the waves only
    ({"batch": 4, "s1": 4096}, {}, [[48, None], [72, None], [56, None]]),
])
def test_a_uniform_launch_folds_to_its_full_time(case, schedule, samples):
    """Blocks of one shape in whole waves: the fold's linear combination is the full run's time within 1 % and
    its bytes are the full run's bytes.  (Before the chip had a shared sync unit the steady state repeated
    exactly; the unit's queue now carries some of one wave's traffic into the next and, along the tiles, grows
    a little faster than linearly on these decode launches, whose cores wait for it most of the time.)  The jit
    build: its first wave reads K and V from HBM, which staggers the cores the same way in every wave."""
    config, hw = timing(case, schedule, "jit")
    full = simulate(kernel_plan(config, hw), None, log_events=False)
    folded = simulate(kernel_plan(config, hw), None, log_events=False, fold=True)
    assert folded.folded[0]["samples"] == samples
    assert folded.total_cycles == pytest.approx(full.total_cycles, rel=0.01)
    assert (folded.gm_bytes, folded.hbm_bytes) == (full.gm_bytes, full.hbm_bytes)
    assert folded.sync_messages == pytest.approx(full.sync_messages, rel=1e-3)
    assert folded.blocks == full.blocks and folded.waves == full.waves
    # busy and stall cycles fold like the time: the report's shares and stalls are close to the full run's
    a, b = timing_summary(full, config), timing_summary(folded, config)
    assert a["bound_pipe"] == b["bound_pipe"]
    assert b["pipe_busy_mean"] == pytest.approx(a["pipe_busy_mean"], abs=0.015)
    everything = sum(sum(causes.values()) for causes in a["stalls"].values())
    for stage, causes in a["stalls"].items():  # within 15 %, or 1 % of all stalls for a stage that hardly stalls
        assert sum(b["stalls"][stage].values()) == pytest.approx(sum(causes.values()), rel=0.15,
                                                                  abs=0.01 * everything)


@pytest.mark.parametrize(("build", "rel"), [("manual", REL_MANUAL), ("dsl", 0.01)])
def test_a_prefetched_or_persistent_launch_folds_closely(build, rel):
    """The manual build (one head: Q, K and V all prefetched into the L2, S0 ≥ S1) and the dsl build (a
    persistent grid whose cores run their units back to back: the fold's waves are units per core, the cuts keep
    the units' phase of the credit rule), both repeating their third wave, fold closely."""
    case = {"heads": 1, "kv_heads": 1, "s0": 128 * 100, "s1": 12800}
    config, hw = timing(case, {}, build)
    full = simulate(kernel_plan(config, hw), None, log_events=False)
    folded = simulate(kernel_plan(config, hw), None, log_events=False, fold=True)
    tiles = case["s1"] // 256
    k1, k2 = cuts(config.schedule.qk_preload, 4, tiles if build == "dsl" else None)
    rest = config.case.batch * config.case.heads * -(-config.case.s0 // 128) % 24  # the partial wave's blocks
    assert folded.folded[0]["samples"] == [[n, k] for n in (48, 72, 48 + rest) for k in (k1, k2)]
    assert folded.total_cycles == pytest.approx(full.total_cycles, rel=rel)
    assert folded.gm_bytes == full.gm_bytes


@pytest.mark.parametrize(("case", "why", "near"), [
    ({"heads": 8, "kv_heads": 8, "s0": 8192, "s1": 2048},
     "blocks up to 255 read inputs the host prefetched (S0·HEAD elements), the later ones from HBM: the waves "
     "differ beyond the first 2", {"heads": 8, "kv_heads": 8, "s0": 4096, "s1": 4096}),
    ({"heads": 1, "kv_heads": 1, "s0": 6144, "s1": 16384},
     "block 0 reads its K/V columns below 6144 from what the host prefetched (S0·HEAD elements) and the rest "
     "from HBM: its tiles differ", {"heads": 1, "kv_heads": 1, "s0": 128, "s1": 16384})])
def test_a_launch_prefetched_in_part_runs_in_full(case, why, near):
    """The manual build prefetches S0·HEAD elements of each input. With 8 heads of S0 = 8192, S1 = 2048 that is
    head 0's Q and heads 0–3's K and V, read by blocks 0–255; the two waves the fold takes once hold 48 of
    them, so it would count hits for every later wave. With one head of S0 = 6144 < S1 = 16384 each block finds
    its first 6144 K/V columns in the L2, past the shorter tile cut (20 tiles, 5120 columns), so the cuts'
    difference would be all hits. Either launch runs in full, saying why. Their ``near`` cases fold: 8 heads of
    S0 = S1 = 4096, whose prefetched blocks 0–31 all run in the sampled waves, and a decode step's one
    S0 = 128 chunk, within the shorter cut."""
    ok, hw = timing(near, {}, "manual")
    assert isinstance(simulate(kernel_plan(ok, hw), None, log_events=False, fold=True).folded, list)
    config, hw = timing(case, {}, "manual")
    folded = simulate(kernel_plan(config, hw), None, log_events=False, fold=True)
    assert folded.folded == f"not folded: {why}"
    assert folded.total_cycles == simulate(kernel_plan(config, hw), None, log_events=False).total_cycles


def test_split_s1_folds_both_launches_over_waves():
    """Split-S1: 256 four-tile chunks fold over waves only, then the combine launch is laid after them.  Many
    waves of such short chunks drift apart, so the fold is looser here than on long blocks (within 2 %: −1.3 %
    measured; benchmarks/bench_fold.py measures up to −5.6 % on split decode points)."""
    config, hw = timing({"batch": 2, "s0": 100, "s1": 4096}, {"s1_split": 4})
    full = simulate(kernel_plan(config, hw), None, log_events=False)
    folded = simulate(kernel_plan(config, hw), None, log_events=False, fold=True)
    assert [f["launch"] for f in folded.folded] == ["tfa", "combine"]
    assert folded.folded[0]["samples"] == [[48, None], [72, None], [64, None]]
    assert folded.total_cycles == pytest.approx(full.total_cycles, rel=0.02)
    assert folded.gm_bytes == full.gm_bytes
    tfa, combine = folded.launches
    assert combine.start == tfa.end + hw.launch.gap("") and combine.end == folded.total_cycles


def test_samples_in_a_forked_process_give_the_same_figures():
    config, hw = timing({"batch": 4, "s1": 4096})
    kernels = launches(kernel_plan(config, hw), None)
    serial = simulate_folded(kernels, hw, config.schedule.qk_preload, parallel=False)
    forked = simulate_folded(kernels, hw, config.schedule.qk_preload, parallel=True)
    assert (forked.total_cycles, forked.gm_bytes, forked.hbm_bytes) == \
        (serial.total_cycles, serial.gm_bytes, serial.hbm_bytes)
    assert forked.stats.busy == serial.stats.busy and forked.stats.stalls == serial.stats.stalls


def test_cuts_start_after_the_prologue():
    assert cuts(0) == (16, 32) and cuts(4) == (20, 36)


def test_cuts_span_whole_credit_periods_and_keep_a_persistent_grids_phase():
    """The credit rule repeats every period: the cuts lie whole periods apart, at least 16 tiles (period 3: 18);
    a persistent core's units of 64 tiles keep their phase (cut ≡ 64 mod the step, 8 tiles or whole periods),
    since its FIFOs count on from unit to unit."""
    assert cuts(4, 8) == (20, 36) and cuts(3, 2) == (19, 35) and cuts(0, 3) == (18, 36)
    assert cuts(3, 4, 64) == (16, 24) and cuts(3, 8, 64) == (16, 24) and cuts(4, 4, 62) == (14, 22)


def test_masked_runs_are_simulated_in_full_and_numerics_are_refused():
    config = build_config({"case": {"s0": 1024, "s1": 4096, "causal": True}, "numerics": {"enabled": False}})
    hw = load_hardware(config.hardware)
    result = simulate(kernel_plan(config, hw), None, log_events=False, fold=True)
    assert result.folded == "not folded: the causal mask makes blocks differ"
    assert result.total_cycles == simulate(kernel_plan(config, hw), None, log_events=False).total_cycles
    with pytest.raises(InputError, match="--no-numerics"):
        simulate(kernel_plan(config, hw), None, log_events=True, fold=True)


@pytest.mark.parametrize("parallel", [False, True])
def test_a_hazard_in_a_sample_is_reported_and_no_helper_process_is_left(parallel):
    """qk_preload = cv_fifo_size overwrites an unread l1_exp_max entry in every sample: the folded run raises
    the simulator's own hazard diagnosis, whichever process met it first, and reaps its helper."""
    from tfa_sim.buffers.pools import HazardError

    config, hw = timing({"batch": 4, "s1": 4096}, {"qk_preload": 8, "cv_fifo_size": 8})
    kernels = launches(kernel_plan(config, hw), None)
    before = children()
    with pytest.raises(HazardError, match="l1_exp_max"):
        simulate_folded(kernels, hw, config.schedule.qk_preload, parallel=parallel)
    assert children() == before


def children() -> set[int]:
    """This process's child processes, running or not yet reaped (Linux /proc)."""
    return {int(pid) for task in Path("/proc/self/task").iterdir()
            for pid in (task / "children").read_text().split()}
