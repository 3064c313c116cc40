"""Config loading, overrides and the legality rules of docs/kernel.md, "Legality"."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from conftest import REFERENCE_CASES

from tfa_sim.spec.config import Config, parse_override
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.load import build_config, load_config


def test_defaults_are_the_kernels():
    c = load_config()
    assert (c.schedule.qk_preload, c.schedule.cv_fifo_size, c.schedule.cv_fifo_cons_sync_period) == (4, 8, 4)
    assert (c.tiling.cube_s0, c.tiling.cube_s1, c.tiling.tile_s1) == (128, 128, 256)
    assert (c.case.head, c.case.s0, c.case.s1) == (128, 128, 1024)
    assert c.name == "case_float_H_128_S0_128_S1_1024"
    assert c.tiling.k_tile_factor == 2 and c.tiling.vec_s0 == 32


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_reference_case_files_load(name):
    assert load_config(case=name).name == name


def test_set_override_and_yaml(tmp_path):
    c = load_config(overrides=["schedule.qk_preload=2", "hardware.preset=910b1"])
    assert c.schedule.qk_preload == 2 and c.hardware.preset == "910b1"
    y = tmp_path / "c.yaml"
    y.write_text("case:\n  s1: 2048\ntiling:\n  tile_s1: 512\n")
    c = load_config(y)
    assert (c.case.s1, c.tiling.tile_s1, c.tiling.k_tile_factor) == (2048, 512, 4)
    assert parse_override("case.causal=true") == ("case", "causal", True)


@pytest.mark.parametrize("data, needle", [
    ({"schedule": {"qk_prelod": 3}}, "unknown key schedule.qk_prelod; did you mean 'qk_preload'"),
    ({"tilling": {}}, "unknown section [tilling]; did you mean 'tiling'"),
    ({"schedule": {"qk_preload": "3"}}, "schedule.qk_preload = '3' must be an integer"),
    ({"case": {"causal": 1}}, "case.causal = 1 must be true or false"),
    ({"numerics": {"backend": "cuda"}}, "numerics.backend = 'cuda' is not one of numpy, native"),
    ({"case": {"window": 64}}, "set case.causal = true"),
    ({"case": {"causal": True, "window": -1}}, "case.window = -1 must be ≥ 1"),
    ({"case": {"softcap": -1.0}}, "case.softcap=-1.0 must be a finite number ≥ 0"),
    ({"case": {"softcap": float("nan")}}, "case.softcap = nan must be a finite number"),
    ({"case": {"mask": "m.npy", "causal": True}}, "either --mask FILE or case.causal"),
    ({"case": {"dtype": "fp8"}}, "case.dtype = 'fp8' is not one of fp16, bf16"),
    ({"schedule": {"block_order": "random"}}, "is not one of row, zigzag, longest_first"),
    ({"schedule": {"s1_split": 0}}, "schedule.s1_split=0 must be ≥ 1"),
    ({"schedule": {"s1_split": "half"}}, "must be an integer or \"auto\""),
    ({"tiling": {"tile_s1": 300}}, "S1 % TILE_S1 == 0"),
    ({"tiling": {"tile_s1": 192, "cube_s1": 128}, "case": {"s1": 1536}}, "TILE_S1 % CUBE_S1 == 0"),
    ({"tiling": {"cube_s0": 40, "tile_s1": 256, "cube_s1": 32}, "case": {"s0": 80}}, "CUBE_S0 % (2·kTileFactor) == 0"),
    ({"case": {"head": 16}}, "case.head=16 must be a multiple of 32: QK's matmul steps its K (HEAD) in a CubeK"),
    ({"schedule": {"local_slot_num": 4}}, "reduce tiling.tile_s1 or a count (schedule.local_slot_num, "),
    ({"kernel": {"ub_union": False}}, "or set kernel.ub_union = true"),
    ({"tiling": {"cube_s1": 48, "tile_s1": 96}, "case": {"s1": 960}}, "tiling.cube_s1=48 must be a multiple of 32"),
    ({"case": {"head": 64, "s0": 256, "s1": 4096}, "tiling": {"cube_s0": 256, "cube_s1": 64, "tile_s1": 2048}},
     "Vec_S0·4 must be a multiple of 32 bytes"),
    ({"schedule": {"qk_preload": 9}}, "1 ≤ qkPreloadNum ≤ CV_FIFO_SIZE"),
    ({"schedule": {"qk_preload": -1}}, "schedule.qk_preload=-1 must be ≥ 0"),
    ({"schedule": {"l1_k": 0}}, "schedule.l1_k=0 must be ≥ 1"),
    ({"schedule": {"qk_preload": 1}}, "qkPreloadNum > 1 unless kTileFactor == 1"),
    ({"schedule": {"l1_k": 12}}, "L1 holds"),
    ({"tiling": {"tile_s1": 1024}, "schedule": {"ub_x_exp": 8}}, "UB holds"),
    ({"schedule": {"l0c": 4}}, "L0C accumulator"),
    ({"schedule": {"l0a": 16}}, "no CubeK"),
    ({"case": {"heads": 6, "kv_heads": 4}}, "GQA"),
    ({"case": {"heads": 2**61 - 1, "kv_heads": 3}}, "use kv_heads=1"),  # a prime: the suggestion stays bounded
    ({"hardware": {"preset": "910c9"}}, "hardware.preset '910c9' unknown"),
    ({"hardware": {"cores": 99}}, "hardware.cores=99"),
    ({"numerics": {"blas_threads": 0}}, "numerics.blas_threads = 0 must be in 1…1024"),
    ({"numerics": {"blas_threads": 1.5}}, "numerics.blas_threads = 1.5 must be an integer"),
])
def test_bad_configs_are_rejected_with_the_rule(data, needle):
    with pytest.raises(InputError) as err:
        build_config(data)
    msg = str(err.value)
    assert needle in msg, f"expected {needle!r} in {msg!r}"
    assert "\n" not in msg


def test_preload_one_is_legal_when_k_tile_factor_is_one():
    c = build_config({"tiling": {"tile_s1": 128}, "schedule": {"qk_preload": 1}})
    assert c.tiling.k_tile_factor == 1


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().case.s0 = 1  # type: ignore[misc]


@pytest.mark.parametrize("argv, needle", [
    (["run", "--set", "tiling.tile_s1=300"], "S1 % TILE_S1 == 0"),
    (["run", "/nonexistent/c.toml"], "not found"),
    (["run", "--case", "case_float_H_128_S0_128_S1_1025"], "unknown case"),
    (["run", "--set", "noequals"], "expected section.key=value"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, needle, tmp_path):
    r = subprocess.run([sys.executable, "-m", "tfa_sim", *argv], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr
