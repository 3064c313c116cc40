"""``tfa-sim check`` after the inputs changed: it says so instead of blaming the dumps (issue 12, class 6)."""
from __future__ import annotations

import hashlib
import json

import numpy as np
from test_hostile_cli import assert_refused, tfa

from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.spec.load import load_config

SHAPE = ["--set", "case.s1=512"]


def test_inputs_edited_after_the_run_are_named(tmp_path):
    inputs = generate_inputs(load_config(overrides=["case.s1=512"]))
    d = tmp_path / "in"
    d.mkdir()
    for name in ("q", "k", "v"):
        np.save(d / f"{name}.npy", getattr(inputs, name)[0, 0])
    run = tmp_path / "run"
    assert tfa("run", *SHAPE, "--inputs", str(d), "--intermediate-check", "--no-event-log", "--out", str(run)).code == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["input_hashes"] == {f"{n}.npy": hashlib.sha256((d / f"{n}.npy").read_bytes()).hexdigest()
                                       for n in "qkv"}
    assert tfa("check", str(run)).code == 0
    k = np.load(d / "k.npy")
    k[3, 7] += np.float16(0.5)
    np.save(d / "k.npy", k)
    assert_refused(tfa("check", str(run)), "inputs changed since the run", str(d / "k.npy"), "rerun tfa-sim run")
    assert not json.loads((run / "check.json").read_text()).get("failed")  # the earlier, passing check stays


def test_inputs_removed_after_the_run_are_named(tmp_path):
    d = tmp_path / "in"
    assert tfa("gen-data", "case_float_H_128_S0_128_S1_1024", *SHAPE, "--out", str(d)).code == 0
    run = tmp_path / "run"
    assert tfa("run", *SHAPE, "--inputs", str(d), "--intermediate-check", "--no-event-log", "--out", str(run)).code == 0
    (d / "v.bin").unlink()
    assert_refused(tfa("check", str(run)), "inputs changed since the run", "v.bin (gone)")


def test_generated_inputs_are_recorded_by_their_arrays(tmp_path):
    run = tmp_path / "run"
    assert tfa("run", *SHAPE, "--intermediate-check", "--no-event-log", "--out", str(run)).code == 0
    summary = json.loads((run / "summary.json").read_text())
    inputs = generate_inputs(load_config(overrides=["case.s1=512"]))
    assert summary["input_hashes"] == {n: hashlib.sha256(getattr(inputs, n).tobytes()).hexdigest() for n in "qkv"}
    summary["input_hashes"]["q"] = "0" * 64  # as if the generator had drawn other numbers
    (run / "summary.json").write_text(json.dumps(summary))
    assert_refused(tfa("check", str(run)), "inputs changed since the run", "generated q")
