"""Kernel variants (docs/guide/decode.md, masks.md): short blocks, GQA packing, split-S1 with its combine, bf16,
block orders, sliding window, logit softcap, mask files — bits, goldens, timing and refusals."""
from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import split_combine_by_hand

from tfa_sim.backends import get_backend
from tfa_sim.numerics.compare import compare, rule_eps
from tfa_sim.numerics.golden import kernel_golden, reference_attention
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.sim.functional import run_functional
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.blocks import make_blocks, order_blocks
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.block_kernel import Numerics
from tfa_sim.stages.plan import kernel_plan

F32 = np.float32


def config(**sections):
    """A config from keyword sections, e.g. config(case={"s0": 16})."""
    return build_config({k: v for k, v in sections.items()})


def sim_output(cfg, backend="native", cores=None):
    """O of a full SimPy run with numerics (and the run itself)."""
    hw = load_hardware(cfg.hardware)
    hw = hw.with_cores(cores) if cores else hw
    c = cfg.case
    num = Numerics(get_backend(backend), generate_inputs(cfg), np.zeros((c.batch, c.heads, c.s0, c.head), F32))
    result = simulate(kernel_plan(cfg, hw), num, log_events=False)
    return num.out, result


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


# ---- issue 14: decode shapes -----------------------------------------------------------------------------
DECODE = [(s0, split, pack, dtype) for s0 in (1, 16, 100, 128) for split in (1, 4, 24) for pack in (False, True)
          for dtype in ("fp16", "bf16")]


@pytest.mark.parametrize("s0,split,pack,dtype", DECODE)
def test_decode_shapes_backends_agree_and_pass_the_rule(s0, split, pack, dtype):
    cfg = config(case={"s0": s0, "s1": 4096, "heads": 8, "kv_heads": 2, "dtype": dtype},
                 schedule={"s1_split": split, "gqa_pack": pack})
    inputs = generate_inputs(cfg)
    o_np, _ = run_functional(get_backend("numpy"), cfg, inputs)
    o_c, _ = run_functional(get_backend("native"), cfg, inputs)
    assert np.array_equal(bits(o_np), bits(o_c))
    res = compare(o_c, reference_attention(inputs, cfg), rule_eps(dtype))
    assert res.passed, res


@pytest.mark.parametrize("s0,split,pack,dtype", [(1, 24, True, "bf16"), (100, 4, False, "fp16"),
                                                 (16, 1, True, "fp16"), (128, 24, False, "bf16")])
def test_decode_simulation_equals_the_model_and_ignores_timing_knobs(s0, split, pack, dtype):
    """The SimPy run's O is the functional model's, bit for bit, whatever the preload and FIFO depth."""
    base = {"case": {"s0": s0, "s1": 16384, "heads": 8, "kv_heads": 2, "dtype": dtype},
            "schedule": {"s1_split": split, "gqa_pack": pack}}
    cfg = config(**base)
    model, _ = run_functional(get_backend("native"), cfg, generate_inputs(cfg), cores=24)
    for knobs in ({}, {"qk_preload": 2, "cv_fifo_size": 4, "cv_fifo_cons_sync_period": 2}):
        out, _ = sim_output(config(**{**base, "schedule": {**base["schedule"], **knobs}}))
        assert np.array_equal(bits(out), bits(model)), knobs


def test_gqa_packing_changes_time_and_bytes_not_bits():
    base = {"case": {"s0": 16, "s1": 4096, "heads": 8, "kv_heads": 2}}
    (plain, r_plain), (packed, r_packed) = (sim_output(config(**base, schedule={"gqa_pack": p})) for p in (False, True))
    assert np.array_equal(bits(plain), bits(packed))
    # each K/V head's 4 query heads share one block: its K and V are read once instead of four times
    assert r_plain.work["kv_bytes"] == 4 * r_packed.work["kv_bytes"]
    assert r_packed.blocks == 2 and r_plain.blocks == 8
    assert r_packed.total_cycles != r_plain.total_cycles


def test_split_changes_o_only_through_the_documented_combine():
    """Recompute the combine from the chunks' partials in scalar float32, in the contract's order."""
    cfg = config(case={"s0": 16, "s1": 4096, "heads": 2}, schedule={"s1_split": 4})
    inputs = generate_inputs(cfg)
    backend = get_backend("native")
    out, rec = run_functional(backend, cfg, inputs, record=True)
    assert rec is not None
    scale = F32(1 / np.sqrt(F32(128)))
    for block in (b for b in make_blocks(cfg) if b.chunk == 0):
        chunks = [b for b in make_blocks(cfg) if b.row_block == block.row_block]
        last = [b.tile_ids[-1] for b in chunks]
        h, rows = block.head, block.rows.pos
        o = [rec["o_part"][0, h, t, rows] for t in last]  # a chunk's running O after its last tile: not divided
        m = [rec["global_max"][0, h, t, rows] for t in last]
        l = [rec["global_sum"][0, h, t, rows] for t in last]
        for i, row in enumerate(rows):
            want = split_combine_by_hand([x[i] for x in o], [x[i] for x in m], [x[i] for x in l], scale)
            assert np.array_equal(bits(want), bits(out[0, h, row])), row
    unsplit, _ = run_functional(backend, config(case={"s0": 16, "s1": 4096, "heads": 2}), inputs)
    assert compare(out, unsplit).passed and not np.array_equal(bits(out), bits(unsplit))


def test_split_runs_a_second_launch_on_the_vector_cores():
    cfg = config(case={"s0": 1, "s1": 16384, "heads": 4, "kv_heads": 1}, schedule={"s1_split": 6},
                 numerics={"enabled": False})
    result = simulate(kernel_plan(cfg, load_hardware(cfg.hardware)), None, log_events=True)
    tfa, combine = result.launches
    assert (tfa.name, tfa.blocks, combine.name, combine.blocks) == ("tfa", 24, "combine", 4)
    assert combine.start == tfa.end + load_hardware(cfg.hardware).launch.gap("") and result.total_cycles == combine.end
    events = [e for e in result.stats.events if e.stage == "combine"]
    assert events and all(".veccore" in e.unit and e.start >= tfa.end for e in events)
    assert {"TLOAD m,l", "VEC factors", "TLOAD O", "VEC accumulate", "VEC normalise", "TSTORE O"} <= {
        e.kind for e in events}


@pytest.mark.parametrize("s1, pack, chunks", [
    (131072, True, 3),    # 8 packed row blocks × 3: one wave, 171 + 1.2 + 3.3 (combine) = 175.5 < 513.2 (N = 1)
    (131072, False, 3),   # 32 row blocks: 4 waves × (171 + 1.2) + 3.3 = 692 < 701 (N = 6) < 1026 (N = 1)
    (4096, False, 2),     # 16 tiles: 3 waves × (8 + 1.2) + 3.3 = 31.0 < 32.2 (N = 3) < 2 waves × 17.2 = 34.5 (N = 1)
    (4096, True, 3),      # 8 blocks: one wave, 6 + 1.2 + 3.3 = 10.6 < 8 + 1.2 + 3.3 = 12.6 (N = 2) < 17.2 (N = 1)
])
def test_auto_split_picks_the_shortest_critical_core(s1, pack, chunks):
    """910b2, 24 cores, in tiles of 1628 cycles (a tile's K and V, 128 KiB at 80.5 B/cycle): a block dispatch of
    2000 cycles is 1.2 tiles, the combine launch's gap (3405, the hosts' mean) and dispatch 3.3 tiles."""
    cfg = config(case={"s0": 1, "s1": s1, "heads": 32, "kv_heads": 8}, schedule={"s1_split": "auto",
                                                                                 "gqa_pack": pack})
    hw = load_hardware(cfg.hardware)
    assert (hw.overhead.block_dispatch, hw.launch.gap("")) == pytest.approx((2000, 3405), abs=1)
    blocks = make_blocks(cfg, cores=24)
    assert {b.chunks for b in blocks} == {chunks} and len(blocks) == (8 if pack else 32) * chunks


def test_short_blocks_split_rows_over_the_two_vector_cores():
    block = make_blocks(config(case={"s0": 131}))[-1]  # 131 = 128 + 3
    assert block.n_rows == 3 and block.lane_rows(0) == (0, 2) and block.lane_rows(1) == (2, 1)
    one = make_blocks(config(case={"s0": 1}))[0]
    assert one.lane_rows(0) == (0, 1) and one.lane_rows(1) == (1, 0)


def test_short_block_costs_whole_fractals():
    """A block of 1 row runs the cube as if it had 16 (one fractal), so its QK matmuls cost the same."""
    def qk_matmul_cycles(s0):
        cfg = config(case={"s0": s0, "s1": 1024}, numerics={"enabled": False})
        r = simulate(kernel_plan(cfg, load_hardware(cfg.hardware)), None)
        return sorted({e.end - e.start for e in r.stats.events if e.kind == "TMATMUL" and e.stage == "compute_qk"})
    assert qk_matmul_cycles(1) == qk_matmul_cycles(16) != qk_matmul_cycles(128)


def test_bf16_inputs_from_npy_and_bin(tmp_path):
    cfg = config(case={"s0": 16, "s1": 1024, "dtype": "bf16"})
    inputs = generate_inputs(cfg)
    assert inputs.q.dtype == np.dtype(ml_dtypes.bfloat16)
    npy, raw = tmp_path / "npy", tmp_path / "bin"
    npy.mkdir()
    raw.mkdir()
    for name in ("q", "k", "v"):
        np.save(npy / f"{name}.npy", getattr(inputs, name))
    for name, file in (("q", "q.bin"), ("k", "kt.bin"), ("v", "v.bin")):
        getattr(inputs, name).tofile(raw / file)
    outs = []
    for directory in (npy, raw):
        r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--set", "case.s0=16", "--set", 'case.dtype="bf16"',
                            "--inputs", str(directory), "--out", str(tmp_path / directory.name / "run"),
                            "--no-event-log"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append(np.load(tmp_path / directory.name / "run" / "o.npy"))
    generated, _ = run_functional(get_backend("native"), cfg, inputs)
    assert all(np.array_equal(bits(o), bits(generated)) for o in outs)


# ---- issue 15: masks and balance ----------------------------------------------------------------------
MASKED = [
    ({"causal": True}, {}),
    ({"causal": True, "window": 300}, {}),
    ({"causal": True, "window": 64, "head": 64}, {"cube_s1": 64, "tile_s1": 128}),
    ({"softcap": 30.0}, {}),
    ({"softcap": 5.0, "causal": True, "head": 64}, {"tile_s1": 512}),
    ({"causal": True, "window": 200, "softcap": 20.0, "dtype": "bf16"}, {"cube_s0": 64}),
]


@pytest.mark.parametrize("case,tiling", MASKED)
def test_masks_and_softcap_backends_agree_and_pass_the_rule(case, tiling):
    cfg = config(case={"s0": 1024, "s1": 2048, **case}, tiling=tiling)
    inputs = generate_inputs(cfg)
    outs = [run_functional(get_backend(b), cfg, inputs)[0] for b in ("numpy", "native")]
    assert np.array_equal(bits(outs[0]), bits(outs[1]))
    eps = rule_eps(cfg.case.dtype)
    assert compare(outs[1], reference_attention(inputs, cfg), eps).passed
    assert compare(kernel_golden(inputs, cfg).o, reference_attention(inputs, cfg), eps).passed


def test_mask_bits_ignore_block_order_preload_and_fifo_depth():
    base = {"case": {"s0": 1024, "s1": 1024, "causal": True, "window": 333, "softcap": 10.0}}
    ref, _ = sim_output(config(**base), cores=5)
    for schedule in ({"block_order": "zigzag"}, {"block_order": "longest_first", "qk_preload": 2},
                     {"cv_fifo_size": 4, "qk_preload": 3, "cv_fifo_cons_sync_period": 2}):
        out, _ = sim_output(config(**base, schedule=schedule), cores=5)
        assert np.array_equal(bits(out), bits(ref)), schedule


def test_block_orders_permute_the_same_blocks():
    cfg = config(case={"s0": 4096, "s1": 4096, "causal": True})
    blocks = make_blocks(cfg)
    works = [b.work for b in blocks]
    assert works == sorted(works)  # causal row order: the longest rows come last
    longest = order_blocks(blocks, "longest_first", 8)
    assert [b.work for b in longest] == sorted(works, reverse=True)
    zigzag = order_blocks(blocks, "zigzag", 8)
    assert sorted(b.index for b in zigzag) == list(range(len(blocks)))
    # a snake over the cores: core 0 gets the longest of wave 0 and the shortest of wave 1
    assert zigzag[0].work == max(works) and zigzag[8 + 7].work == longest[8].work


def test_balance_is_reported_and_zigzag_beats_row_order_on_causal():
    """On 8 cores the shared L2 has headroom, so evening out the cores' work shortens the run (on 24 cores at
    this size the L2 channel binds and row order wins: docs/guide/masks.md, "Causal balance")."""
    def run(order):
        cfg = config(case={"s0": 8192, "s1": 8192, "causal": True}, schedule={"block_order": order},
                     numerics={"enabled": False}, hardware={"cores": 8})
        return simulate(kernel_plan(cfg, load_hardware(cfg.hardware)), None, log_events=False)
    row, zig = run("row"), run("zigzag")
    for r in (row, zig):
        busy = r.core_busy
        assert len(busy) == 8 and max(busy) <= r.total_cycles
    imbalance = {name: max(r.core_busy) / (sum(r.core_busy) / 8) for name, r in (("row", row), ("zig", zig))}
    assert imbalance["zig"] < imbalance["row"]
    assert zig.total_cycles < row.total_cycles


def test_window_time_scales_with_the_window_not_with_s1():
    """On one core: time = per-block overhead + cost per computed sub-tile, and those follow W."""
    def run(window, s1):
        cfg = config(case={"s0": 2048, "s1": s1, "causal": True, "window": window}, numerics={"enabled": False},
                     hardware={"cores": 1})
        r = simulate(kernel_plan(cfg, load_hardware(cfg.hardware)), None, log_events=False)
        computed = r.work["tiles_issued"] * cfg.tiling.k_tile_factor - r.work["sub_tiles_skipped"]
        return r.total_cycles, computed, r.work["tiles_skipped"]
    runs = {w: run(w, 8192) for w in (256, 512, 1024, 1536)}  # W < S0: the window binds the late rows
    times, subs = [runs[w][0] for w in runs], [runs[w][1] for w in runs]
    assert times == sorted(times) and subs == sorted(subs)
    per_sub = [(t1 - t0) / (n1 - n0) for (t0, n0), (t1, n1) in zip(zip(times, subs), zip(times[1:], subs[1:]))]
    # every extra sub-tile of window costs a tile period: the cube's while the pipeline still fills, the vector
    # pipes' once blocks are long enough to reach the steady state
    assert 400 < min(per_sub) and max(per_sub) < 2 * min(per_sub)
    # S1 beyond the queries' reach adds no work at all: the same window, four times the keys
    for w in (256, 1024):
        t32k, issued, skipped = run(w, 32768)
        assert (t32k, issued) == runs[w][:2] and skipped > runs[w][2]
    assert runs[256][2] > 0.8 * (runs[256][1] + runs[256][2])  # most tiles of S1 = 8192 are never loaded


def test_tree_mask_skips_tiles_and_matches_the_golden(tmp_path):
    s0, s1 = 256, 1024
    rng = np.random.default_rng(3)
    mask = np.ones((s0, s1), bool)
    mask[:, :512] = False  # the prefix every draft token sees
    for i in range(s0):  # a tree: each token sees its ancestors among the draft tokens
        mask[i, 512 + rng.integers(0, 256, size=8)] = False
        mask[i, 512 + i] = False
    path = tmp_path / "tree.npy"
    np.save(path, mask)
    cfg = config(case={"s0": s0, "s1": s1, "mask": str(path)})
    out, result = sim_output(cfg)
    assert result.work["tiles_skipped"] == 2 * 1  # the last 256 keys: no row sees them (one tile per block)
    inputs = generate_inputs(cfg)
    assert compare(out, reference_attention(inputs, cfg)).passed
    model, _ = run_functional(get_backend("numpy"), cfg, inputs)
    assert np.array_equal(bits(out), bits(model))


@pytest.mark.parametrize("make,needle", [
    (lambda: np.zeros((4, 4), bool), "has shape (4, 4); expected S0×S1 = (128, 1024)"),
    (lambda: np.zeros((128, 1024), np.int8), "has dtype int8; it must be bool"),
    (lambda: np.zeros((3, 1, 128, 1024), bool), "has shape (3, 1, 128, 1024)"),
    (lambda: np.pad(np.zeros((127, 1024), bool), ((0, 1), (0, 0)), constant_values=True),
     "hides every key from query row 127"),
])
def test_bad_masks_exit_2_with_one_line(tmp_path, make, needle):
    path = tmp_path / "m.npy"
    np.save(path, make())
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--mask", str(path), "--out", str(tmp_path / "r")],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("setting,needle", [("case.window=0", "case.window = 0 must be ≥ 1"),
                                            ("case.window=-5", "case.window = -5 must be ≥ 1"),
                                            ("case.softcap=-1.0", "must be a finite number ≥ 0")])
def test_bad_values_exit_2(tmp_path, setting, needle):
    """No window is the key left out; a given window must be ≥ 1."""
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--set", "case.causal=true", "--set", setting,
                        "--no-numerics", "--no-event-log", "--out", str(tmp_path / "r")], capture_output=True,
                       text=True)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_split_run_timeline_shows_the_combine(tmp_path):
    """The event log of a split run reads back (the combine is a stage of its own) and is drawn."""
    run = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--no-numerics", "--set", "case.s0=1", "--set",
                        "case.s1=4096", "--set", "schedule.s1_split=4", "--out", str(run)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from tfa_sim.rundir.outputs import read_events

    assert any(e.stage == "combine" for e in read_events(run / "events.csv"))
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "timeline", str(run), "--by", "stage", "-o",
                        str(tmp_path / "t.png")], capture_output=True, text=True)
    assert r.returncode == 0 and (tmp_path / "t.png").stat().st_size > 0, r.stderr
