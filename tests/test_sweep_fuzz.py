"""For every sweep file and every results/sweep.json content: exit 0, 1, 2 or 3, no traceback, no hang,
nothing written outside --out.  In-process ``tfa-sim`` calls on one-block shapes, few examples each."""
from __future__ import annotations

import datetime
import json
import math
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from test_sweep import run_main

#: two one-block points (S0 128, S1 256)
SMALL_BASE = {"case": {"s0": 128, "s1": 256}}
SMALL_AXES = {"schedule.qk_preload": [2, 4]}
#: what bounds the runs whose [base] and [axes] are arbitrary: at most 50 points of at most 2 s each
BOUNDED = {"max_points": 50, "point_timeout": 2}
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def toml(value) -> str:
    """A TOML inline value (tables as inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value) if isinstance(value, str) else str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"


def document(tables: dict) -> str:
    return "".join(f"{name} = {toml(value)}\n" for name, value in tables.items())


scalars = st.one_of(st.integers(-4096, 4096), st.sampled_from([0, -1, 2 ** 63 - 1, -2 ** 63]),
                    st.floats(allow_nan=True), st.booleans(), st.text(max_size=12),
                    st.sampled_from(["910b1", "910b4", "numpy", "grid", "random", "time_us", "false"]),
                    st.dates(), st.times(), st.datetimes())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)
ranges = st.dictionaries(st.sampled_from(["start", "stop", "step", "factor", "x"]), values, max_size=4)
sweep_keys = st.sampled_from(["metric", "mode", "budget", "seed", "numerics", "constraints", "max_points",
                              "point_timeout", "other"])
axis_keys = st.sampled_from(["case.s1", "case.head", "schedule.qk_preload", "tiling.tile_s1", "hardware.preset",
                             "numerics.backend", "qk_preload", "case.nope", "a.b.c"])
config_keys = st.sampled_from(["s0", "s1", "head", "causal", "tile_s1", "cube_s0", "qk_preload", "preset",
                               "cores", "backend", "enabled", "other"])
sections = st.sampled_from(["case", "tiling", "schedule", "hardware", "numerics", "other"])


class Hang(Exception):
    pass


@contextmanager
def isolated(limit: float = 120):
    """A fresh empty working directory, restored afterwards, and SIGALRM after ``limit`` seconds."""
    def alarm(*_):
        raise Hang(f"no exit within {limit} s")

    old_dir, old_handler = os.getcwd(), signal.signal(signal.SIGALRM, alarm)
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            yield Path(cwd)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            os.chdir(old_dir)


def check(*args) -> int:
    """Run ``tfa-sim ARGS`` in the current directory and check the exit contract."""
    code, _out, err = run_main(*args)
    assert code in (0, 1, 2, 3), (code, err)
    assert "Traceback" not in err, err
    if code:
        assert len(err.strip().splitlines()) == 1, err
    event(f"exit {code}")
    assert set(os.listdir(".")) <= {"out"}, os.listdir(".")
    return code


def sweep_with(tables: dict) -> int:
    with tempfile.TemporaryDirectory() as src, isolated():
        spec = Path(src) / "fuzz.toml"
        spec.write_text(document(tables))
        return check("sweep", spec, "--out", "out", "--jobs", "1", "--no-progress", "--no-plots")


@SETTINGS
@given(st.dictionaries(sweep_keys, values, max_size=4))
def test_any_sweep_table(opts):
    sweep_with({"sweep": opts, "base": SMALL_BASE, "axes": SMALL_AXES})


@SETTINGS
@given(st.dictionaries(axis_keys, st.one_of(st.lists(scalars, min_size=1, max_size=3), values, ranges), max_size=3),
       st.dictionaries(sections, st.one_of(st.dictionaries(config_keys, scalars, max_size=3), values), max_size=3))
@example(axes={}, base={"case": {"\x1e": 0}})  # a key with a line-breaking control character, quoted raw once
def test_any_axes_and_base(axes, base):
    sweep_with({"sweep": BOUNDED, "base": base, "axes": axes})


@SETTINGS
@given(st.binary(max_size=64))
def test_any_bytes_as_a_sweep_file(data):
    with tempfile.TemporaryDirectory() as src, isolated():
        spec = Path(src) / "fuzz.toml"
        spec.write_bytes(data)
        check("sweep", spec, "--out", "out", "--no-progress", "--no-plots")


_FINISHED: dict[str, Path] = {}


def finished_sweep() -> Path:
    """A finished two-point sweep directory (made once), to copy and damage."""
    if "dir" not in _FINISHED:
        base = Path(tempfile.mkdtemp(prefix="tfa-sweep-fuzz-"))
        (base / "s.toml").write_text(document({"base": SMALL_BASE, "axes": SMALL_AXES}))
        assert run_main("sweep", base / "s.toml", "--out", base / "out", "--jobs", "1", "--no-progress",
                        "--no-plots")[0] == 0
        _FINISHED["dir"] = base
    return _FINISHED["dir"]


@SETTINGS
@given(st.sampled_from(["results.jsonl", "references.jsonl", "sweep.json"]),
       st.one_of(st.binary(max_size=200),
                 st.lists(st.one_of(values.map(lambda v: json.dumps(v, default=str)),
                                    st.just('{"key": "x", "status": "ok"}')), max_size=3)
                 .map(lambda lines: "\n".join(lines).encode())))
def test_any_bytes_in_the_sweep_directory(name, data):
    made = finished_sweep()
    with isolated():
        shutil.copytree(made / "out", "out")
        Path("out", name).write_bytes(data)
        check("sweep", made / "s.toml", "--out", "out", "--jobs", "1", "--no-progress", "--no-plots")
        Path("out", name).write_bytes(data)
        check("sweep-report", "out", "--no-plots")


known_axes = st.sampled_from(["case.s1", "case.head", "case.causal", "schedule.qk_preload", "tiling.tile_s1",
                              "hardware.preset", "hardware.cores", "numerics.backend"])
case_keys = st.sampled_from(["s0", "s1", "head", "causal", "batch", "heads", "kv_heads", "name"])


@SETTINGS
@given(st.dictionaries(known_axes, st.lists(scalars, min_size=1, max_size=3, unique_by=repr), min_size=1,
                       max_size=2),
       st.dictionaries(case_keys, scalars, max_size=2))
def test_any_values_of_known_keys(axes, case):
    """Well-formed sweeps whose values the config may reject: those points are recorded, the sweep ends."""
    sweep_with({"sweep": BOUNDED, "base": {"case": {**SMALL_BASE["case"], **case}}, "axes": axes})
