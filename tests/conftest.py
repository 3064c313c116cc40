"""Shared fixtures: the reference kernel's data files and small config helpers; how the suite spreads over
pytest-xdist's workers (the test command runs on every CPU: pyproject's addopts)."""
from __future__ import annotations

import compileall
import dataclasses
import gzip
from pathlib import Path

import numpy as np
import pytest

from tfa_sim.numerics.rounding import exp_tfa
from tfa_sim.spec.load import build_config, load_config

#: The reference kernel's own data generator output for (HEAD 128, S0 128, S1 1024, TILE_S1 256), generated as the
#: first case after seeding: raw little-endian arrays, each gzip-compressed (tests/data/README.md).
REFERENCE_DATA = Path(__file__).resolve().parent / "data" / "reference_case_H128_S0_128_S1_1024"
REFERENCE_CASES = [
    "case_float_H_128_S0_128_S1_1024", "case_float_H_128_S0_128_S1_2048", "case_float_H_128_S0_128_S1_8192",
    "case_float_H_128_S0_512_S1_1024", "case_float_H_128_S0_512_S1_2048", "case_float_H_128_S0_512_S1_8192",
    "case_float_H_128_S0_128_S1_1024_T_128", "case_float_H_128_S0_2048_S1_2048_T_512",
    "case_float_H_128_S0_128_S1_512_T_512",
]
# Beyond the reference cases: causal, HEAD=64, GQA (heads 8, kv_heads 2), batch 2.
EXTRA_CONFIGS = {
    "causal_H_128_S0_512_S1_512": {"case": {"s0": 512, "s1": 512, "causal": True}},
    "causal_tile_64_below_cube_s0": {"case": {"s0": 512, "s1": 512, "causal": True},
                                     "tiling": {"cube_s1": 64, "tile_s1": 64}},
    "H_64_S0_256_S1_1024": {"case": {"head": 64, "s0": 256, "s1": 1024}},
    "gqa_heads_8_kv_2": {"case": {"s0": 128, "s1": 512, "batch": 2, "heads": 8, "kv_heads": 2}},
}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile tfa_sim once, before the workers start: where ``PYTHONDONTWRITEBYTECODE`` is set (this
    machine, CI) every ``python -m tfa_sim`` a test starts would otherwise compile the package from source again,
    0.1–0.3 s each, hundreds of times (benchmarks/README.md, issue 44).  A read-only install is left alone."""
    if not hasattr(session.config, "workerinput"):  # the controller, or a run without workers
        import tfa_sim

        compileall.compile_dir(Path(tfa_sim.__file__).parent, quiet=2)


def reference_config(name: str):
    return load_config(case=name)


def extra_config(name: str):
    return build_config(EXTRA_CONFIGS[name])


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory) -> Path:
    """The reference files, decompressed once per session into a temporary directory."""
    files = sorted(REFERENCE_DATA.glob("*.bin.gz"))
    assert files, f"reference data missing in {REFERENCE_DATA}"
    out = tmp_path_factory.mktemp("reference_case")
    for path in files:
        (out / path.name[:-3]).write_bytes(gzip.decompress(path.read_bytes()))
    return out


def split_combine_by_hand(o_parts, maxes, sums, scale):
    """flash-decoding's combine of one row, scalar float32, chunk 0 … N−1 (docs/numerics.md "Split-S1 combine")."""
    big_m = max(float(m) for m in maxes)
    acc_o, acc_l = np.zeros(o_parts[0].shape, np.float32), np.float32(0)
    for o, m, l in zip(o_parts, maxes, sums):
        f = exp_tfa(np.array([(m - np.float32(big_m)) * scale], np.float32))[0]
        acc_o = (acc_o + f * o).astype(np.float32)
        acc_l = np.float32(acc_l + f * l)
    return acc_o / acc_l


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> Path:
    """A small run with numerics, dumps and the event log (read only: copy it to damage it)."""
    from tfa_sim import cli

    out = tmp_path_factory.mktemp("small") / "run"
    assert cli.main(["run", "--set", "case.s0=256", "--set", "case.s1=512", "--intermediate-check", "--out",
                     str(out)]) == 0
    return out


#: A small timing-only run on 4 cores (S0 = 512, S1 = 1024).
TIMING_SMALL = ("--set", "case.s0=512", "--set", "case.s1=1024", "--no-numerics")


@pytest.fixture(scope="session")
def timing_run(tmp_path_factory) -> Path:
    """The TIMING_SMALL run with events.npz, events.csv and trace.json (read only: copy it to damage it)."""
    from tfa_sim import cli

    out = tmp_path_factory.mktemp("timing") / "run"
    assert cli.main(["run", *TIMING_SMALL, "--out", str(out)]) == 0
    return out


def slow_vector(hw, factor: float):
    """``hw`` with every vector intrinsic's cycles per repeat ``factor`` times the preset's."""
    keys = [f.name for f in dataclasses.fields(hw.vector) if f.name.endswith("_per_repeat")]
    return hw.with_values({f"vector.{k}": factor * getattr(hw.vector, k) for k in keys})
