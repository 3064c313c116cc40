"""The cpu_sim reference against the kernel's own CPU simulation (CPU_SIM), bit for bit, on the committed dumps.

``tests/data/cpu_sim/<case>/`` holds the files the kernel's ``main.cpp --intermediate`` wrote under CPU_SIM
(gzipped) and ``case.json`` (shapes, layouts, provenance; tests/data/README.md).  The inputs are regenerated
from the seed.  The tensors are compared here with their own reading of the layouts (not the one of
``tfa-sim check --kernel-dumps``, which is tested against the same files further down).
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfa_sim.backends import get_backend
from tfa_sim.numerics.compare import compare
from tfa_sim.numerics.golden import reference_attention
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.sim.functional import run_functional
from tfa_sim.spec.load import build_config

CPU_SIM_DATA = Path(__file__).resolve().parent / "data" / "cpu_sim"
CASES = sorted(p.name for p in CPU_SIM_DATA.iterdir() if (p / "case.json").is_file())
BACKENDS = ("numpy", "native")


def meta(case: str) -> dict:
    return json.loads((CPU_SIM_DATA / case / "case.json").read_text())


def case_config(case: str, reference: str = "cpu_sim", **numerics):
    m = meta(case)
    return build_config({"case": {"name": case, "head": m["head"], "s0": m["s0"], "s1": m["s1"]},
                         "tiling": {"cube_s0": m["cube_s0"], "cube_s1": m["cube_s1"], "tile_s1": m["tile_s1"]},
                         "schedule": {"qk_preload": m["qk_preload"]},
                         "numerics": {"seed": m["seed"], "reference": reference, **numerics}})


def kernel_tensor(case: str, name: str) -> np.ndarray:
    """One of CPU_SIM's files, in the shape case.json gives it."""
    f = meta(case)["files"][name]
    data = gzip.decompress((CPU_SIM_DATA / case / f["stored_as"]).read_bytes())
    assert len(data) == f["bytes"]
    return np.frombuffer(data, dtype=f["dtype"]).reshape(f["shape"])


def score_tiles(a: np.ndarray, tiles: int) -> np.ndarray:
    """[1][slots][kf][128][128] → [128][tiles·TILE_S1] (tile t in slot t, sub-tile s at columns s·128 …)."""
    return np.concatenate([a[0, t].transpose(1, 0, 2).reshape(a.shape[3], -1) for t in range(tiles)], axis=1)


def kernel_view(case: str) -> dict[str, np.ndarray]:
    """CPU_SIM's tensors in tfa-sim's full layout of one head (tile 0's exp_max, never written, left out)."""
    n = meta(case)["num_tiles"]
    return {"qk_fifo": score_tiles(kernel_tensor(case, "qk_out.bin"), n),
            "p_fifo": score_tiles(kernel_tensor(case, "p_out.bin"), n),
            "exp_max": kernel_tensor(case, "exp_max_ififo.bin")[0, 1:n],
            "pv_fifo": kernel_tensor(case, "out2.bin")[0, :n],
            "o": kernel_tensor(case, "o_out.bin")}


def assert_bits_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    bits = np.uint16 if want.dtype == np.float16 else np.uint32
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
    diff = got.view(bits) != want.view(bits)
    assert not diff.any(), f"{what}: {int(diff.sum())} of {diff.size} elements differ, first at {np.argwhere(diff)[0]}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_cpu_sim_reference_is_bit_equal_to_cpu_sim(case, backend):
    """O and every intermediate CPU_SIM writes, bit for bit, for both backends; the float64 check passes."""
    config = case_config(case)
    inputs = generate_inputs(config)
    o, rec = run_functional(get_backend(backend, "tfa", "cpu_sim"), config, inputs, record=True)
    assert rec is not None
    kernel = kernel_view(case)
    for name in ("qk_fifo", "p_fifo", "pv_fifo"):
        assert_bits_equal(rec[name][0, 0], kernel[name], f"{case} {backend} {name}")
    assert_bits_equal(rec["exp_max"][0, 0, 1:], kernel["exp_max"], f"{case} {backend} exp_max")
    assert_bits_equal(o[0, 0], kernel["o"], f"{case} {backend} O")
    assert compare(o, reference_attention(inputs, config)).passed


def test_fixtures_are_the_files_case_json_describes():
    """The stored bytes hash to case.json's sha256 (CPU_SIM's files unchanged), and the data stays small."""
    import hashlib

    total = 0
    for case in CASES:
        for name, f in meta(case)["files"].items():
            path = CPU_SIM_DATA / case / f["stored_as"]
            total += path.stat().st_size
            assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == f["sha256"], (case, name)
        text = (CPU_SIM_DATA / case / "case.json").read_text()
        assert "g++-12 -" not in text and "generate_cases.py" not in text, "no build command lines in fixtures"
    assert total < 4 * 2 ** 20


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory):
    """Each fixture case run by the command with --intermediate-check, once per reference (native)."""
    from tfa_sim import cli

    runs = {}
    for case in CASES:
        for reference in ("cpu_sim", "npu"):
            out = tmp_path_factory.mktemp(f"{case}-{reference}") / "run"
            m = meta(case)
            args = ["run", "--set", f"case.name={case}", "--set", f"case.head={m['head']}", "--set",
                    f"case.s1={m['s1']}", "--set", f"tiling.tile_s1={m['tile_s1']}", "--set",
                    f"schedule.qk_preload={m['qk_preload']}", "--set", f"numerics.seed={m['seed']}", "--set",
                    f"numerics.reference={reference}", "--intermediate-check", "--no-event-log", "--out", str(out)]
            assert cli.main(args) == 0
            runs[case, reference] = out
    return runs


def tfa_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfa_sim", "check", *args], capture_output=True, text=True,
                          timeout=120)


def unpacked(case: str, directory: Path) -> Path:
    """A copy of a fixture's dumps as main.cpp writes them (raw .bin)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, f in meta(case)["files"].items():
        (directory / name).write_bytes(gzip.decompress((CPU_SIM_DATA / case / f["stored_as"]).read_bytes()))
    return directory


@pytest.mark.parametrize("case", CASES)
def test_check_kernel_dumps_exact_passes_in_cpu_sim_mode(fixture_runs, case):
    """The committed .bin.gz files are read as they are; every tensor is bit-equal."""
    r = tfa_check(str(fixture_runs[case, "cpu_sim"]), "--kernel-dumps", str(CPU_SIM_DATA / case), "--exact")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every compared element is bit-equal" in r.stdout, r.stdout
    report = json.loads((fixture_runs[case, "cpu_sim"] / "check.json").read_text())
    assert report["passed"] and all(t["bit_equal_fraction"] == 1.0 for t in report["tensors"].values())
    assert all(t["elements"] > 0 for name, t in report["tensors"].items() if name != "o_out.bin")


@pytest.mark.parametrize("name", ["qk_out.bin", "p_out.bin", "exp_max_ififo.bin", "out2.bin", "o_out.bin"])
def test_one_flipped_bit_fails_exact_naming_the_tensor(fixture_runs, tmp_path, name):
    case = "H64_S0_128_S1_768_T256_seed2024"
    dumps = unpacked(case, tmp_path / "dumps")
    f = meta(case)["files"][name]
    a = np.frombuffer((dumps / name).read_bytes(), dtype=f["dtype"]).reshape(f["shape"]).copy()
    where = {"qk_out.bin": (0, 2, 1, 5, 9), "p_out.bin": (0, 1, 0, 7, 3), "exp_max_ififo.bin": (0, 2, 11),
             "out2.bin": (0, 1, 4, 60), "o_out.bin": (100, 3)}[name]
    bits = a.view(np.uint16 if a.dtype == np.float16 else np.uint32)
    bits[where] ^= 1
    (dumps / name).write_bytes(a.tobytes())
    r = tfa_check(str(fixture_runs[case, "cpu_sim"]), "--kernel-dumps", str(dumps), "--exact")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL: {name} not bit-equal" in r.stdout, r.stdout
    assert f"first divergence (data-flow order): {name}" in r.stdout, r.stdout


def test_npu_mode_passes_the_kernel_rule_but_not_exact(fixture_runs):
    """Default mode: within the kernel's comparison rule of CPU_SIM, not bit-equal (docs/guide/numerics.md)."""
    case = "H128_S0_128_S1_512_T256_seed7"
    run_dir = fixture_runs[case, "npu"]
    r = tfa_check(str(run_dir), "--kernel-dumps", str(CPU_SIM_DATA / case))
    assert r.returncode == 0, r.stdout + r.stderr
    r = tfa_check(str(run_dir), "--kernel-dumps", str(CPU_SIM_DATA / case), "--exact")
    assert r.returncode == 1 and "not bit-equal" in r.stdout, r.stdout
    report = json.loads((run_dir / "check.json").read_text())
    assert report["tensors"]["qk_out.bin"]["bit_equal_fraction"] == 1.0
    assert report["tensors"]["out2.bin"]["bit_equal_fraction"] < 0.5


def test_single_tile_output_is_not_compared(tmp_path):
    """One logical tile, non-causal: the kernel does not divide O, tfa-sim does — the report says so."""
    from tfa_sim import cli
    from tfa_sim.views.kernel_dumps import FILES, check_kernel_dumps

    out = tmp_path / "run"
    assert cli.main(["run", "--set", "case.head=64", "--set", "case.s1=256", "--set", "numerics.reference=cpu_sim",
                     "--intermediate-check", "--no-event-log", "--out", str(out)]) == 0
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for kf in FILES:  # a kernel that agrees with the run everywhere but O (left undivided)
        shape = {"qk_out.bin": (1, 8, 2, 128, 128), "p_out.bin": (1, 8, 2, 128, 128), "exp_max_ififo.bin": (1, 8, 128),
                 "out2.bin": (1, 8, 128, 64), "o_out.bin": (128, 64)}[kf.file]
        a = np.zeros(shape, kf.dtype)
        run_tile = np.load(out / "dumps" / f"block0_{kf.dump}0.npy")
        if kf.file in ("qk_out.bin", "p_out.bin"):
            a[0, 0] = run_tile.reshape(128, 2, 128).transpose(1, 0, 2)
        elif kf.file == "out2.bin":
            a[0, 0] = run_tile
        (dumps / kf.file).write_bytes(a.tobytes())
    report = check_kernel_dumps(out, dumps, exact=True)
    assert report["passed"], report
    assert report["tensors"]["o_out.bin"]["elements"] == 0
    assert any("does not divide" in note for note in report["not_compared"])


def test_bad_kernel_dump_directories_exit_2(fixture_runs, tmp_path):
    case = "H64_S0_128_S1_512_T256_seed11"
    run_dir = str(fixture_runs[case, "cpu_sim"])
    r = tfa_check(run_dir, "--kernel-dumps", str(tmp_path / "missing"), "--exact")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a directory" in r.stderr, r.stderr
    dumps = unpacked(case, tmp_path / "short")
    (dumps / "out2.bin").write_bytes((dumps / "out2.bin").read_bytes()[:1000])
    r = tfa_check(run_dir, "--kernel-dumps", str(dumps))
    assert r.returncode == 2 and "out2.bin has 1000 bytes" in r.stderr, r.stderr
    dumps = unpacked(case, tmp_path / "gone")
    (dumps / "o_out.bin").unlink()
    r = tfa_check(run_dir, "--kernel-dumps", str(dumps))
    assert r.returncode == 2 and "o_out.bin" in r.stderr and "not found" in r.stderr, r.stderr
    other = "H128_S0_128_S1_512_T256_seed7"  # HEAD 128: out2.bin and o_out.bin do not fit a HEAD 64 run
    r = tfa_check(run_dir, "--kernel-dumps", str(CPU_SIM_DATA / other))
    assert r.returncode == 2 and "belong to another case" in r.stderr, r.stderr
    gz = unpacked(case, tmp_path / "gz")
    (gz / "p_out.bin").unlink()
    (gz / "p_out.bin.gz").write_bytes(gzip.compress(b"\0" * 10)[:-6])
    r = tfa_check(run_dir, "--kernel-dumps", str(gz))
    assert r.returncode == 2 and "not a complete gzip file" in r.stderr, r.stderr
    r = tfa_check(run_dir, "--exact")
    assert r.returncode == 2 and "--exact applies to --kernel-dumps" in r.stderr, r.stderr
