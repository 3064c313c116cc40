"""Data generator and goldens against the reference generator's own files."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tfa_sim.backends import get_backend
from tfa_sim.numerics.compare import compare
from tfa_sim.numerics.golden import fp16_values, kernel_golden, reference_attention
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.sim.functional import run_functional
from tfa_sim.spec.load import load_config

H, S0, S1 = 128, 128, 1024
REF_FILES = {  # name: (dtype, shape)
    "qk": (np.float32, (S0, S1)), "p": (np.float16, (S0, S1)), "p_fp32": (np.float32, (S0, S1)),
    "pv": (np.float32, (S0, H)), "o": (np.float32, (S0, H)),
    **{f"pv_tile_fifo{t}": (np.float32, (S0, H)) for t in range(4)},
    **{f"o_part{t}": (np.float32, (S0, H)) for t in range(4)},
    **{f"exp_max_part{t}": (np.float32, (S0,)) for t in range(4)},
    **{f"global_sum_part{t}": (np.float32, (S0,)) for t in range(4)},
}


def read(directory, name):
    dtype, shape = REF_FILES[name]
    return np.fromfile(directory / f"{name}.bin", dtype=dtype).reshape(shape)


def test_gen_data_reproduces_reference_files(reference_dir, tmp_path):
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "gen-data", "case_float_H_128_S0_128_S1_1024",
                        "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in ("q", "k", "kt", "v", "vt"):
        assert (tmp_path / f"{name}.bin").read_bytes() == (reference_dir / f"{name}.bin").read_bytes(), name
    for name in REF_FILES:  # golden files: same rule the kernel test uses (BLAS differs by machine)
        eps = 1e-2 if name.startswith("exp_max") else 1e-3
        res = compare(read(tmp_path, name).astype(np.float32), read(reference_dir, name).astype(np.float32), eps)
        assert res.passed, f"{name}: {res}"


def test_model_output_matches_reference_o(reference_dir):
    config = load_config()
    o, _ = run_functional(get_backend("numpy"), config, generate_inputs(config))
    res = compare(o[0, 0], read(reference_dir, "o"))
    assert res.passed and res.max_rel_err < 0.01, res


def test_kernel_golden_agrees_with_float64_reference():
    config = load_config(overrides=["case.causal=true", "case.s0=512", "case.s1=512"])
    inputs = generate_inputs(config)
    golden = kernel_golden(inputs, config)
    ref = reference_attention(inputs, config)
    assert compare(golden.o, ref).passed
    # causal: row 0 attends only column 0, so its output is exactly V[0]
    np.testing.assert_allclose(golden.o[0, 0, 0], inputs.v[0, 0, 0].astype(np.float32), rtol=1e-6)


def test_reference_attention_is_softmax():
    config = load_config(overrides=["case.s1=512", "tiling.tile_s1=512"])
    inputs = generate_inputs(config)
    q = inputs.q[0, 0].astype(np.float64)
    k = inputs.k[0, 0].astype(np.float64)
    v = inputs.v[0, 0].astype(np.float64)
    s = q @ k.T / np.sqrt(128)
    w = np.exp(s - s.max(1, keepdims=True))
    expected = (w / w.sum(1, keepdims=True)) @ v
    # atol: the reference normalises after the product with V, a rounding apart for outputs near 0
    np.testing.assert_allclose(reference_attention(inputs, config)[0, 0], expected, rtol=1e-12, atol=1e-14)


def test_comparison_rule_counts():
    exp = np.ones(10_000, np.float32)
    got = exp.copy()
    got[:10] = 1.01  # 10 failures allowed (floor(1e4·1e-3) = 10)
    assert compare(got, exp).passed
    got[10] = 1.01
    res = compare(got, exp)
    assert not res.passed and res.failures == 11 and res.first_failure == 0
    got = exp.copy()
    got[5] = np.nan
    assert compare(got, exp).failures == 1


@pytest.mark.parametrize("chunk", [1, 7, 256, 1 << 30])
def test_comparison_in_chunks_equals_the_comparison_at_once(monkeypatch, chunk):
    """compare() works in chunks of COMPARE_CHUNK elements: every field (counts, maxima, the first failure) equals
    the one-chunk result, with failures, NaNs, infs, zeros and near-zeros spread over several chunks."""
    from tfa_sim.numerics import compare as module

    rng = np.random.default_rng(5)
    exp = rng.standard_normal((3, 50, 64)).astype(np.float32)
    got = exp + rng.standard_normal(exp.shape).astype(np.float32) * 1e-4
    got.flat[[900, 5000, 9001]] += 1.0
    exp.flat[[77, 4000]] = 0.0
    got.flat[[78, 4001]] = 1e-13  # near zero where the golden is not
    got.flat[333], exp.flat[8000], got.flat[8100] = np.nan, np.inf, -np.inf
    monkeypatch.setattr(module, "COMPARE_CHUNK", 1 << 30)
    whole = compare(got, exp)
    monkeypatch.setattr(module, "COMPARE_CHUNK", chunk)
    assert compare(got, exp) == whole
    assert whole.failures >= 5 and whole.first_failure == 77 and whole.near_zero == 2 and whole.max_rel_err == np.inf


def test_the_goldens_fp16_rounding_equals_numpys_casts_on_every_rounding_boundary():
    """fp16_values(x) is x.astype(fp16).astype(fp32), bit for bit: every finite fp16 value and inf, the fp32
    midpoints between neighbours (ties) and one fp32 ULP either side of both, fp32 subnormals, NaNs with various
    payloads (quiet and signalling), both signs, plus random bit patterns."""
    halves = np.arange(0x7C01, dtype=np.uint16).view(np.float16).astype(np.float64)  # 0 … 65504, inf
    upper = np.append(halves[1:-1], 65536.0)  # the next value up (65536: where rounding gives inf)
    exact = np.concatenate([halves[:-1], (halves[:-1] + upper) / 2]).astype(np.float32).view(np.uint32)
    special = np.array([0x7F800000, 0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FC00000, 0x7FFFFFFF, 0x00000001,
                        0x007FFFFF, 0x00800000, 0x33000000, 0x33000001, 0x387FE000, 0x387FF000, 0x477FEFFF,
                        0x477FF000, 0x7F7FFFFF], np.uint32)
    rng = np.random.default_rng(5)
    bits = np.concatenate([exact, exact - 1, exact + 1, special, rng.integers(0, 2 ** 32, 1 << 20, np.uint32)])
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    x = bits.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x.astype(np.float16).astype(np.float32).view(np.uint32)
    got = fp16_values(x).view(np.uint32)
    wrong = np.flatnonzero(got != expected)
    assert wrong.size == 0, [(hex(bits[i]), hex(expected[i]), hex(got[i])) for i in wrong[:5]]


def test_kernel_golden_in_row_chunks_records_what_the_whole_head_does(monkeypatch):
    """GOLDEN_ROWS bounds the rows per call.  In chunks of 48 rows (the last one short) of a causal case with two
    heads, every recorded intermediate and O agree with the whole-head recurrence up to BLAS's last-bit rounding
    (a chunk filed at the wrong rows, or masked from the wrong first row, would differ by whole values)."""
    from tfa_sim.numerics import golden

    config = load_config(overrides=["case.causal=true", "case.s0=200", "case.s1=512", "case.heads=2"])
    inputs = generate_inputs(config)
    whole = kernel_golden(inputs, config, record=True)
    monkeypatch.setattr(golden, "GOLDEN_ROWS", 48)
    chunked = kernel_golden(inputs, config, record=True)
    assert whole.tensors is not None and chunked.tensors is not None
    for name, want in [("o", whole.o), ("p_fp32", whole.p_fp32), *whole.tensors.items()]:
        got = chunked.o if name == "o" else chunked.p_fp32 if name == "p_fp32" else chunked.tensors[name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=1e-6,
                                   err_msg=name)
    assert compare(chunked.o, reference_attention(inputs, config)).passed
