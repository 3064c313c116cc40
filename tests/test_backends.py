"""numpy and native backends: bit-identical on every intermediate; outputs pass against the fp64 golden."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import EXTRA_CONFIGS, REFERENCE_CASES, extra_config
from hypothesis import HealthCheck, given, settings
from test_engine import legal_configs

from tfa_sim.backends import get_backend
from tfa_sim.numerics.compare import compare
from tfa_sim.numerics.golden import reference_attention
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.numerics.intermediates import NAMES as INTERMEDIATES
from tfa_sim.sim.functional import run_functional
from tfa_sim.spec.load import load_config


def both_backends(config, reference="npu"):
    inputs = generate_inputs(config)
    runs = {name: run_functional(get_backend(name, "tfa", reference), config, inputs, record=True)
            for name in ("numpy", "native")}
    return inputs, runs


def assert_identical(runs, what):
    (o_np, rec_np), (o_nat, rec_nat) = runs["numpy"], runs["native"]
    pairs = [("o", o_np, o_nat)] + [(n, rec_np[n], rec_nat[n]) for n in INTERMEDIATES]
    for name, a, b in pairs:
        bits = np.uint16 if a.dtype == np.float16 else np.uint32
        diff = a.view(bits) != b.view(bits)
        assert not diff.any(), f"{what}: {name} differs in {int(diff.sum())} elements, first {np.argwhere(diff)[0]}"


@pytest.mark.parametrize("reference", ["npu", "cpu_sim"])
@pytest.mark.parametrize("name", REFERENCE_CASES + list(EXTRA_CONFIGS))
def test_backends_bit_identical_and_golden_passes(name, reference):
    """Both references: numpy = C on every intermediate, and the float64 golden check (the kernel's rule)."""
    config = load_config(case=name) if name in REFERENCE_CASES else extra_config(name)
    inputs, runs = both_backends(config, reference)
    assert_identical(runs, f"{name} [{reference}]")
    result = compare(runs["native"][0], reference_attention(inputs, config))
    assert result.passed, f"{name} [{reference}]: {result}"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(legal_configs())
def test_backends_bit_identical_on_random_legal_configs(config):
    if config is None:
        return
    for reference in ("npu", "cpu_sim"):
        inputs, runs = both_backends(config, reference)
        assert_identical(runs, f"{config} [{reference}]")
        assert compare(runs["numpy"][0], reference_attention(inputs, config)).passed


def test_references_differ_only_where_their_rules_do():
    """Same QK bits (one chain per sub-tile for HEAD ≤ 128); cpu_sim's exp and PV chains give other bits."""
    config = load_config()
    _inputs, npu = both_backends(config, "npu")
    _inputs, cpu = both_backends(config, "cpu_sim")
    (o_npu, rec_npu), (o_cpu, rec_cpu) = npu["native"], cpu["native"]
    assert np.array_equal(rec_npu["qk_fifo"].view(np.uint32), rec_cpu["qk_fifo"].view(np.uint32))
    assert not np.array_equal(rec_npu["pv_fifo"].view(np.uint32), rec_cpu["pv_fifo"].view(np.uint32))
    assert not np.array_equal(o_npu.view(np.uint32), o_cpu.view(np.uint32))


def test_reference_is_a_checked_choice():
    from tfa_sim.spec.errors import InputError

    with pytest.raises(InputError, match="numerics.reference"):
        load_config(overrides=['numerics.reference="board"'])
    with pytest.raises(InputError, match="exp_model=libm"):
        load_config(overrides=['numerics.reference="cpu_sim"', 'numerics.exp_model="libm"'])
    with pytest.raises(InputError, match="numerics.reference"):
        get_backend("numpy", "tfa", "board")


def test_libm_exp_model_runs_and_passes():
    config = load_config(overrides=['numerics.exp_model="libm"'])
    inputs = generate_inputs(config)
    for name in ("numpy", "native"):
        o, _ = run_functional(get_backend(name, "libm"), config, inputs)
        assert compare(o, reference_attention(inputs, config)).passed
