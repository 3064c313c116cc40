"""Intermediate dumps and `tfa-sim check`: pass on every reference case, name the first divergence."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import REFERENCE_CASES, split_combine_by_hand

from tfa_sim.api.runner import run
from tfa_sim.numerics.rounding import bf16_from_npy, exp_tfa, input_dtype, softmax_scale
from tfa_sim.spec.load import load_config
from tfa_sim.views.check import check_run


def dumped_run(tmp_path, *overrides, case=None):
    config = load_config(case=case, overrides=["numerics.intermediate_check=true", *overrides])
    run(config, out_dir=str(tmp_path), event_log=False)
    return tmp_path


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_every_reference_case_passes_its_check(tmp_path, name, backend):
    run_dir = dumped_run(tmp_path, f'numerics.backend="{backend}"', case=name)
    report = check_run(run_dir)
    assert report["passed"], report["first_divergence"]
    manifest = json.loads((run_dir / "dumps" / "manifest.json").read_text())
    required = {"file", "stage", "block", "tile", "dtype", "shape", "slot", "event"}
    assert all(required <= set(m) for m in manifest)
    per_block = [m for m in manifest if m["block"] is not None]
    assert all(m["event"]["end_cycle"] >= m["event"]["start_cycle"] > 0 for m in per_block)
    config = load_config(case=name)
    assert len(per_block) == 2 * 7 * config.blocks_per_head * config.tiles  # npy + bin, 7 dumps per tile


def tfa_check(*args):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "check", *args], capture_output=True, text=True,
                          timeout=120)


def test_corrupted_element_is_the_first_divergence(tmp_path):
    run_dir = dumped_run(tmp_path, "case.s0=256", "case.s1=2048")
    path = run_dir / "dumps" / "block1_pv_fifo5.npy"
    pv = np.load(path)
    pv[17, 42] += 0.5
    np.save(path, pv)
    r = tfa_check(str(run_dir))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first divergence (data-flow order): pv_fifo (compute_pv) block 1 tile 5" in r.stdout, r.stdout
    assert "element (17, 42)" in r.stdout and "timeline: core1.cubecore0.FIX" in r.stdout, r.stdout
    report = json.loads((run_dir / "check.json").read_text())
    assert not report["stages"]["pv_fifo"]["tiles"]["5"] and report["stages"]["pv_fifo"]["tiles"]["4"]
    assert report["stages"]["qk_fifo"]["passed"] and report["failed"] == 1


def test_x_exp_rounded_the_wrong_way_is_caught(tmp_path):
    """Recompute one tile's fp32 E exactly as the model does and cast it toward zero instead of to nearest."""
    run_dir = dumped_run(tmp_path, "case.s1=2048")
    d = run_dir / "dumps"
    x = np.load(d / "block0_qk_fifo3.npy")
    m = np.load(d / "block0_global_max3.npy")
    e = exp_tfa((x - m[:, None]) * softmax_scale(128))
    rne = e.astype(np.float16)
    assert np.array_equal(rne.view(np.uint16), np.load(d / "block0_p_fifo3.npy").view(np.uint16))
    toward_zero = np.where(rne.astype(np.float32) > e, np.nextafter(rne, np.float16(0)), rne)
    changed = np.argwhere(toward_zero != rne)
    assert len(changed) > 100
    np.save(d / "block0_p_fifo3.npy", toward_zero)
    r = tfa_check(str(run_dir))
    assert r.returncode == 1
    assert "p_fifo (compute_p) block 0 tile 3" in r.stdout, r.stdout
    assert f"element {tuple(int(i) for i in changed[0])}" in r.stdout and "1 ULP" in r.stdout, r.stdout


def test_check_against_a_gen_data_golden(tmp_path):
    golden = tmp_path / "golden"
    subprocess.run([sys.executable, "-m", "tfa_sim", "gen-data", "case_float_H_128_S0_512_S1_2048", "--out",
                    str(golden)], check=True, capture_output=True)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--case", "case_float_H_128_S0_512_S1_2048",
                        "--inputs", str(golden), "--intermediate-check", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = tfa_check(str(out), "--golden", str(golden))
    assert r.returncode == 0, r.stdout
    assert f"against {golden}" in r.stdout and "all 224 dumps pass" in r.stdout  # 4 blocks × 8 tiles × 7 dumps
    (golden / "pv_tile_fifo2.bin").write_bytes((golden / "pv_tile_fifo2.bin").read_bytes()[:1000])
    r = tfa_check(str(out), "--golden", str(golden), "--stage", "pv")
    assert r.returncode == 1 and "pv_tile_fifo2.bin has 1000 bytes" in r.stdout and "shape or dtype" in r.stdout


def test_dump_selection_and_size_limit(tmp_path):
    run_dir = dumped_run(tmp_path / "a", "case.s0=512", "numerics.dump_blocks=\"1:3\"", "numerics.dump_tiles=\":2\"")
    manifest = json.loads((run_dir / "dumps" / "manifest.json").read_text())
    assert {(m["block"], m["tile"]) for m in manifest} == {(1, 0), (1, 1), (2, 0), (2, 1)}
    assert check_run(run_dir)["passed"]
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--intermediate-check", "--set",
                        "numerics.dump_limit_gib=0.001", "--out", str(tmp_path / "b")], capture_output=True, text=True)
    assert r.returncode == 2 and "narrow with --blocks a:b / --tiles a:b" in r.stderr, r.stderr
    assert not (tmp_path / "b" / "dumps").exists()


def test_split_run_dumps_partials_and_the_combine(tmp_path):
    """A split-S1 run dumps every chunk's partials and the combine's O; the combine recomputed by hand from the
    dumped partials gives the dumped O and the run's o.npy bit for bit; a wrong combine element is the first
    divergence, inside the combine."""
    run_dir = dumped_run(tmp_path, "case.s0=100", "case.s1=4096", "case.heads=2", "schedule.s1_split=4")
    assert check_run(run_dir)["passed"]
    manifest = [m for m in json.loads((run_dir / "dumps" / "manifest.json").read_text())
                if m["block"] is not None and m["file"].endswith(".npy")]
    chunk_blocks = sorted({m["block"] for m in manifest if m["name"] != "combine_o"})
    combines = [m for m in manifest if m["name"] == "combine_o"]
    assert len(chunk_blocks) == 2 * 4 and len(combines) == 2  # 2 heads × 4 chunks; one combine per head
    assert all(m["event"]["instruction"] == "TSTORE O" and "vec" in m["event"]["unit"] for m in combines)
    out = np.load(run_dir / "o.npy")
    scale = softmax_scale(128)
    for head, m in enumerate(sorted(combines, key=lambda m: m["block"])):
        d = run_dir / "dumps"
        chunks = chunk_blocks[4 * head:4 * head + 4]
        last = [max(x["tile"] for x in manifest if x["block"] == b) for b in chunks]
        parts = [[np.load(d / f"block{b}_{name}{t}.npy") for b, t in zip(chunks, last)]
                 for name in ("o_part", "global_max", "global_sum")]
        combined = np.load(d / m["file"])
        for row in range(100):
            want = split_combine_by_hand(*([p[row] for p in part] for part in parts), scale)
            assert np.array_equal(want.view(np.uint32), combined[row].view(np.uint32)), (head, row)
        assert np.array_equal(combined.view(np.uint32), out[0, head].view(np.uint32))
    path = run_dir / "dumps" / combines[1]["file"]
    bad = np.load(path)
    bad[3, 7] = np.nextafter(bad[3, 7], np.float32(1))
    np.save(path, bad)
    r = tfa_check(str(run_dir))
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"first divergence (data-flow order): combine_o (combine) block {combines[1]['block']} tile 15"
            in r.stdout and "element (3, 7)" in r.stdout and "1 ULP" in r.stdout), r.stdout


def test_split_run_against_a_gen_data_golden(tmp_path):
    """The generator's golden is unsplit: QK, the first chunk's partials and the combined O are compared (the
    kernel rule passes); the later chunks' partials are counted as not comparable, and said so."""
    golden = tmp_path / "golden"
    case = "case_float_H_128_S0_512_S1_2048"
    subprocess.run([sys.executable, "-m", "tfa_sim", "gen-data", case, "--out", str(golden)], check=True,
                   capture_output=True)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--case", case, "--inputs", str(golden),
                        "--set", "schedule.s1_split=2", "--intermediate-check", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = tfa_check(str(out), "--golden", str(golden))
    assert r.returncode == 0, r.stdout
    report = json.loads((out / "check.json").read_text())
    # 4 row blocks × 2 chunks × 4 tiles: chunk 1's 6 non-QK dumps per tile are not in the generator's files
    assert report["not_in_golden"] == 4 * 4 * 6 and report["stages"]["combine_o"]["passed"], r.stdout
    assert "not compared" in r.stdout


@pytest.mark.parametrize("overrides, rows", [
    (("case.s0=1", "case.heads=8", "case.kv_heads=2", "schedule.gqa_pack=true"), 4),  # 4 packed heads × 1 row
    (("case.s0=100", 'case.dtype="bf16"'), 100),                                    # one short bf16 block
])
def test_short_packed_and_bf16_blocks_dump_and_check(tmp_path, overrides, rows):
    """Blocks shorter than CUBE_S0 dump their own rows; x_exp keeps the run's input dtype (bf16 bits, not fp16)."""
    run_dir = dumped_run(tmp_path, "case.s1=2048", *overrides)
    report = check_run(run_dir)
    assert report["passed"] and report["dumps"] == 7 * 8 * (2 if rows == 4 else 1), report["first_divergence"]
    p = bf16_from_npy(np.load(run_dir / "dumps" / "block0_p_fifo3.npy"))
    assert p.shape == (rows, 256) and p.dtype == input_dtype("bf16" if rows == 100 else "fp16")
