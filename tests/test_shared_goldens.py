"""The goldens shared between a forked child and the run (tfa_sim/numerics/shared_goldens.py): the same bits as the
goldens computed alone, whoever computes which unit, and nothing lost when the child dies."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from tfa_sim.numerics import shared_goldens
from tfa_sim.numerics.golden import kernel_golden, reference_attention
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.numerics.shared_goldens import CHILD, PENDING, RUN, SharedGoldens
from tfa_sim.spec.load import load_config

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the child is forked")

#: Two heads over one KV head, causal, 3 reference blocks and one kernel chunk per head (8 units).
OVERRIDES = ["case.heads=2", "case.kv_heads=1", "case.s0=300", "case.s1=8192", "case.causal=true",
             "numerics.seed=7"]


@pytest.fixture(scope="module")
def case():
    config = load_config(overrides=OVERRIDES)
    inputs = generate_inputs(config)
    return config, inputs, reference_attention(inputs, config), kernel_golden(inputs, config).o


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _slow_child(monkeypatch, parent: int, delay: float) -> None:
    """The child waits ``delay`` seconds before each unit it claimed (the run's units are not delayed)."""
    compute = SharedGoldens._compute

    def slow(self, i, who):
        if os.getpid() != parent:
            time.sleep(delay)
        compute(self, i, who)

    monkeypatch.setattr(SharedGoldens, "_compute", slow)


def _wait_for_claim(shared: SharedGoldens) -> None:
    deadline = time.monotonic() + 30
    while shared._front[0] < 1:
        assert time.monotonic() < deadline, "the child never claimed a unit"
        time.sleep(0.001)


def test_the_child_and_the_run_split_the_units_and_give_the_goldens_bits(case, monkeypatch):
    config, inputs, fp64, kernel_o = case
    _slow_child(monkeypatch, os.getpid(), 0.3)
    shared = SharedGoldens(inputs, config, fork=True)
    try:
        assert len(shared.work) == 8 and [k for k, _ in shared.work[:2]] == [True, True]  # largest first
        _wait_for_claim(shared)
        got_fp64, got_kernel = shared.result()
    finally:
        shared.close()
    done = list(shared.done)
    assert done[0] == CHILD and done[-1] == RUN and PENDING not in done
    assert _same_bits(got_fp64, fp64) and _same_bits(got_kernel, kernel_o)


def test_units_a_dead_child_claimed_are_computed_by_the_run(case, monkeypatch):
    config, inputs, fp64, kernel_o = case
    parent, compute = os.getpid(), SharedGoldens._compute

    def die_in_child(self, i, who):
        if os.getpid() != parent:
            os._exit(1)  # killed while holding its first unit
        compute(self, i, who)

    monkeypatch.setattr(SharedGoldens, "_compute", die_in_child)
    shared = SharedGoldens(inputs, config, fork=True)
    try:
        _wait_for_claim(shared)
        got_fp64, got_kernel = shared.result()
    finally:
        shared.close()
    assert set(shared.done) == {RUN}  # unit 0 as well, which the child had claimed
    assert _same_bits(got_fp64, fp64) and _same_bits(got_kernel, kernel_o)


def test_without_a_child_the_run_computes_everything(case):
    config, inputs, fp64, kernel_o = case
    shared = SharedGoldens(inputs, config, fork=False)
    got_fp64, got_kernel = shared.result()
    assert set(shared.done) == {RUN}
    assert _same_bits(got_fp64, fp64) and _same_bits(got_kernel, kernel_o)


def test_an_error_in_the_goldens_reaches_the_run(case, monkeypatch):
    """The child's error is not swallowed: the run computes the unit again and raises it itself."""
    config, inputs, _, _ = case

    def broken(*_args):
        raise FloatingPointError("broken golden")

    monkeypatch.setattr(shared_goldens.Reference, "__call__", broken)
    shared = SharedGoldens(inputs, config, fork=True)
    try:
        with pytest.raises(FloatingPointError, match="broken golden"):
            shared.result()
    finally:
        shared.close()
