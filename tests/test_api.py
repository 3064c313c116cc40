"""The Python API (``import tfa_sim``): the same runs, bits and messages as the ``tfa-sim`` command."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tfa_sim
from tfa_sim.rundir.outputs import json_default, read_log

#: Cases and overrides the issue does not show: causal on 910b1, HEAD 64 with preload 2 on 910b3, a longer S1
#: on the numpy backend on 910b4, a timing-only GQA run.
RUNS = {
    "causal_910b1": dict(case="case_float_H_128_S0_128_S1_2048", overrides={"case.causal": True, "case.s0": 256},
                         hw="910b1"),
    "head64_910b3": dict(case="case_float_H_128_S0_512_S1_1024", overrides={"case.head": 64,
                                                                              "schedule.qk_preload": 2}, hw="910b3"),
    "s1_3072_numpy_910b4": dict(overrides={"case.s1": 3072}, hw="910b4", backend="numpy"),
    "gqa_timing": dict(overrides={"case.heads": 4, "case.kv_heads": 2, "case.s0": 384}, numerics=False),
}


def command_line(case: str | None = None, overrides: dict | None = None, hw: str | None = None,
                 backend: str | None = None, numerics: bool = True) -> list[str]:
    """The ``tfa-sim run`` options of the same run."""
    argv = ["--case", case] if case else []
    for key, value in (overrides or {}).items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    argv += ["--hw", hw] if hw else []
    argv += ["--backend", backend] if backend else []
    return argv + ([] if numerics else ["--no-numerics"])


def as_json(data: dict) -> dict:
    """``data`` as summary.json holds it (tuples as lists, numpy scalars as numbers)."""
    return json.loads(json.dumps(data, default=json_default))


def tfa(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfa_sim", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.mark.parametrize("name", RUNS)
def test_the_api_gives_the_commands_run(tmp_path, monkeypatch, name):
    kwargs = RUNS[name]
    r = tfa("run", *command_line(**kwargs), "--out", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    monkeypatch.chdir(tmp_path / "run")  # nothing may be written, here or anywhere relative
    before = sorted(os.listdir())
    result = tfa_sim.run(**kwargs)
    assert sorted(os.listdir()) == before and result.out_dir is None
    assert (result.time_us, result.total_cycles) == (summary["time_us"], summary["total_cycles"]), name
    assert len(result.events) == summary["event_log"]["events"] == len(read_log(tmp_path / "run" / "events.npz"))
    if kwargs.get("numerics", True):
        o = np.load(tmp_path / "run" / "o.npy")
        assert result.o is not None and result.o.tobytes() == o.tobytes(), f"{name}: o differs from o.npy"
        assert result.summary["golden"] == summary["golden"] and result.passed
    else:
        assert result.o is None and "golden" not in result.summary
    assert as_json(result.summary) == {k: v for k, v in summary.items() if k != "event_log"}


@pytest.fixture(scope="module")
def small():
    """A small run with numerics and the event log, in memory."""
    return tfa_sim.run(overrides={"case.s0": 256, "case.s1": 512})


def test_events_to_pandas_has_a_row_per_event_with_names(small):
    df = small.events.to_pandas()
    assert len(df) == len(small.events) == len(small.events.log) > 100
    assert list(df.columns) == ["id", "unit", "pipe", "stage", "block", "tile", "sub", "kind", "start", "end",
                                "bytes", "flops"]
    for column in ("unit", "pipe", "stage", "kind"):
        assert all(isinstance(v, str) for v in df[column]), f"{column} holds {df[column].iloc[0]!r}"
    assert all(re.fullmatch(r"core\d+\.(cubecore0|veccore[01])", u) for u in df["unit"])
    assert set(df["stage"]) == {"dispatch", "compute_qk", "compute_p", "compute_pv", "compute_gu", "epilogue"}
    assert any(kind.startswith("TMATMUL") for kind in df["kind"])
    assert (df["end"] >= df["start"]).all() and df["id"].is_unique
    first = next(small.events.log.decoded())
    assert tuple(df.iloc[0]) == first


def test_events_to_arrow_is_the_same_table(small):
    table = small.events.to_arrow()
    assert table.num_rows == len(small.events)
    assert table.column("stage").to_pylist() == list(small.events.to_pandas()["stage"])


def test_timeline_is_a_matplotlib_figure_and_the_notebook_view_shows_the_run(small):
    from matplotlib.figure import Figure

    fig = small.timeline(by="unit", cores=[0], tiles=(0, 2))
    assert isinstance(fig, Figure) and fig.axes
    html = small._repr_html_()
    assert f"{small.time_us:.2f} µs" in html and "PASS" in html and "<svg" in html and "<?xml" not in html


def test_save_writes_the_run_directory(small, tmp_path):
    out = small.save(tmp_path / "saved")
    assert out == tmp_path / "saved" and small.out_dir == out
    assert np.array_equal(np.load(out / "o.npy"), small.o)
    assert json.loads((out / "summary.json").read_text())["time_us"] == small.time_us
    assert len(read_log(out / "events.npz")) == len(small.events)
    again = small.save(tmp_path / "again")  # the counters are stored once, however often the run is saved
    assert (again / "events.npz").read_bytes() == (out / "events.npz").read_bytes()


def test_run_writes_only_with_out(tmp_path):
    result = tfa_sim.run(overrides={"case.s1": 256}, numerics=False, event_log=False, out=tmp_path / "r")
    assert result.out_dir == tmp_path / "r" and result.events is None
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == as_json(result.summary)


def test_a_config_object_takes_overrides():
    config = tfa_sim.load_config(case="case_float_H_128_S0_128_S1_2048", overrides={"schedule.qk_preload": 2})
    assert isinstance(config, tfa_sim.Config) and config.schedule.qk_preload == 2 and config.case.s1 == 2048
    result = tfa_sim.run(config, overrides={"case.s1": 512}, numerics=False, event_log=False)
    assert result.config.case.s1 == 512 and result.config.schedule.qk_preload == 2
    assert result.config.name == "case_float_H_128_S0_128_S1_512"


@pytest.mark.parametrize("kwargs, argv", [
    (dict(overrides={"case.s1": 1000}), ["--set", "case.s1=1000"]),
    (dict(overrides={"schedule.qk_prelaod": 2}), ["--set", "schedule.qk_prelaod=2"]),
    (dict(overrides={"case.head": "128"}), ["--set", "case.head=\"128\""]),
    (dict(case="no_such_case"), ["--case", "no_such_case"]),
    (dict(hw="no/such/preset.toml"), ["--hw", "no/such/preset.toml"]),
    (dict(backend="cuda"), ["--set", "numerics.backend=\"cuda\""]),
])
def test_bad_arguments_raise_the_commands_message(tmp_path, kwargs, argv):
    r = tfa("run", *argv, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("tfa-sim: error: ")
    with pytest.raises(tfa_sim.TfaSimError) as raised:
        tfa_sim.run(**kwargs)
    assert isinstance(raised.value, tfa_sim.InputError) and raised.value.exit_code == 2
    assert f"tfa-sim: error: {raised.value}\n" == r.stderr


def test_an_override_that_is_not_a_key_is_refused():
    with pytest.raises(tfa_sim.TfaSimError, match="expected section.key"):
        tfa_sim.load_config(overrides={"s1": 512})


def test_a_schedule_that_cannot_run_raises_a_schedule_error():
    with pytest.raises(tfa_sim.ScheduleError) as raised:
        tfa_sim.run(overrides={"schedule.l0c": 1, "case.s1": 2048}, numerics=False, event_log=False)
    assert raised.value.exit_code == 3 and isinstance(raised.value, tfa_sim.TfaSimError)


def test_check_compares_a_runs_dumps(tmp_path):
    tfa_sim.run(overrides={"case.s1": 512, "numerics.intermediate_check": True}, event_log=False, out=tmp_path)
    report = tfa_sim.check(tmp_path, stages=["compute_p"])
    assert report["passed"] and (tmp_path / "check.json").is_file()
    with pytest.raises(tfa_sim.TfaSimError, match="--eps"):
        tfa_sim.check(tmp_path, eps=0)


def test_sweep_returns_a_frame_of_its_points(tmp_path, monkeypatch):
    spec = {"base": {"case": {"s1": 512}}, "axes": {"schedule.qk_preload": [2, 4], "tiling.tile_s1": [128, 256]}}
    monkeypatch.chdir(tmp_path)
    points = tfa_sim.sweep(spec)
    assert os.listdir(tmp_path) == []  # without out, nothing stays
    assert len(points) == 4 and list(points[["schedule.qk_preload", "tiling.tile_s1"]].itertuples(index=False)) == \
        [(2, 128), (2, 256), (4, 128), (4, 256)]
    assert (points["status"] == "ok").all() and (points["time_us"] > 0).all()
    kept = tfa_sim.sweep(spec, out=tmp_path / "sweep")
    assert kept.equals(points) and (tmp_path / "sweep" / "results.csv").is_file()


def test_every_exported_name_resolves():
    assert all(getattr(tfa_sim, name) is not None for name in tfa_sim.__all__)
    with pytest.raises(AttributeError):
        tfa_sim.no_such_name  # noqa: B018
