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


def both_backends(config):
    inputs = generate_inputs(config)
    runs = {name: run_functional(get_backend(name), config, inputs, record=True) for name in ("numpy", "native")}
    return inputs, runs


def assert_identical(runs, what):
    (o_np, rec_np), (o_nat, rec_nat) = runs["numpy"], runs["native"]
    pairs = [("o", o_np, o_nat)] + [(n, rec_np[n], rec_nat[n]) for n in INTERMEDIATES]
    for name, a, b in pairs:
        bits = np.uint16 if a.dtype == np.float16 else np.uint32
        diff = a.view(bits) != b.view(bits)
        assert not diff.any(), f"{what}: {name} differs in {int(diff.sum())} elements, first {np.argwhere(diff)[0]}"


@pytest.mark.parametrize("name", REFERENCE_CASES + list(EXTRA_CONFIGS))
def test_backends_bit_identical_and_golden_passes(name):
    config = load_config(case=name) if name in REFERENCE_CASES else extra_config(name)
    inputs, runs = both_backends(config)
    assert_identical(runs, name)
    result = compare(runs["native"][0], reference_attention(inputs, config))
    assert result.passed, f"{name}: {result}"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(legal_configs())
def test_backends_bit_identical_on_random_legal_configs(config):
    if config is None:
        return
    inputs, runs = both_backends(config)
    assert_identical(runs, str(config))
    assert compare(runs["numpy"][0], reference_attention(inputs, config)).passed


def test_libm_exp_model_runs_and_passes():
    config = load_config(overrides=['numerics.exp_model="libm"'])
    inputs = generate_inputs(config)
    for name in ("numpy", "native"):
        o, _ = run_functional(get_backend(name, "libm"), config, inputs)
        assert compare(o, reference_attention(inputs, config)).passed
