"""The shipped presets against the measured kernel times, and the calibration machinery (docs/calibration.md)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tfa_sim.explore.calibrate import FITTED, _pipeline_step, load_points, solve_linear
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config


def preset(name):
    return load_hardware(build_config({"hardware": {"preset": name}}).hardware)


def model_us(point, hw=None):
    hw = hw or preset(point.preset)
    return simulate(point.config(), hw.with_cores(point.cores), None, log_events=False).time_us


def test_shipped_presets_predict_the_measured_times():
    """In sample over the 15 measured points: MAPE ≤ 10 %, no point off by more than 20 %."""
    points = load_points()
    assert len(points) == 15
    measured = np.array([p.time_us for p in points])
    error = np.array([model_us(p) for p in points]) / measured - 1
    table = "\n".join(f"{p.label}: {e:+.1%}" for p, e in zip(points, error))
    assert np.mean(np.abs(error)) <= 0.10, f"MAPE {np.mean(np.abs(error)):.2%}\n{table}"
    assert np.max(np.abs(error)) <= 0.20, f"max error {np.max(np.abs(error)):.2%}\n{table}"


@pytest.mark.parametrize("s1", [1024, 2048, 4096, 8192])
def test_time_grows_with_active_cores_for_the_same_per_core_work(s1):
    """The 910b1 rows: one block per core (S0 = 128·cores), so every core does the same work; the board takes
    longer on 4 cores than on 1 or 2, and so must the model."""
    times = [model_us(p) for p in load_points() if p.preset == "910b1" and p.s1 == s1]
    assert len(times) == 3 and times[0] < times[1] < times[2], times


def test_every_fitted_parameter_has_bounds_and_a_meaning():
    boards = {p.preset for p in load_points()}
    values = sum(len(boards) if p.per_board else 1 for p in FITTED)
    assert values <= 8, f"{values} fitted values"
    for p in FITTED:
        assert 0 <= p.low < p.high and p.meaning, p
        for board in boards:
            assert p.low <= preset(board).value(p.key) <= p.high, (board, p.key, preset(board).value(p.key))


def test_linear_parameters_solve_exactly_when_the_model_allows():
    """raw + kernel_start + blocks·dispatch + index·stagger: three single-wave points (one block per core) on 1,
    2 and 4 cores of one board whose times are exactly raw + 10 µs + (cores − 1)·2 µs give back a start plus
    one dispatch of 10 µs (one block each: the two are not separable here) and a stagger of 2 µs."""
    base = [p for p in load_points() if p.preset == "910b1" and p.s1 == 1024]
    raw = np.array([30.0, 31.0, 33.0])
    points = [p.__class__(**{**p.__dict__, "time_us": r + 10 + (p.cores - 1) * 2}) for p, r in zip(base, raw)]
    fit = solve_linear(points, raw)
    clock = preset("910b1").clock_mhz
    start = fit.boards["910b1"]["overhead.kernel_start"]
    assert start + fit.shared["overhead.block_dispatch"] == pytest.approx(10 * clock)
    assert fit.boards["910b1"]["overhead.core_stagger"] == pytest.approx(2 * clock)
    assert fit.predicted == pytest.approx([p.time_us for p in points])


def test_pipeline_step_recovers_the_value_that_made_the_times_from_a_start_far_off():
    """Times made by the model itself on one 910b1 core at repeat_scale 0.5 (the preset's overheads): step 1
    finds 0.5 again when handed 0.9 to start from (its global search reads no start)."""
    truth = preset("910b1").with_values({"vector.repeat_scale": 0.5})
    base = [p for p in load_points() if p.preset == "910b1" and p.cores == 1 and p.s1 in (1024, 4096)]
    points = [p.__class__(**{**p.__dict__, "time_us": model_us(p, truth)}) for p in base]
    found = _pipeline_step(points, {"vector.repeat_scale": 0.9, "sync.flag_latency": 1500.0})
    assert found["vector.repeat_scale"] == pytest.approx(0.5, rel=0.03)


def calibrate_cli(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "calibrate", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=120)


HEADER = "preset,cores,head,s0,s1,cube_s0,cube_s1,tile_s1,qk_preload,time_us\n"


@pytest.mark.parametrize("content, needle", [
    (HEADER, "holds no rows"),
    (HEADER + "910b1,1,128,128,1024,128,128,256,4,0\n", "times must be > 0"),
    (HEADER + "910b1,1,128,128,1024,128,128,256,4,nan\n", "times must be > 0"),
    (HEADER + "910b1,1,128,128,1000,128,128,256,4,40\n", "S1 % TILE_S1"),
    ("a,b\n1,2\n", "columns must be"),
    (b"\xff\xfe\x00garbage", "cannot be read"),
], ids=["header only", "zero time", "nan time", "illegal shape", "wrong columns", "not UTF-8"])
def test_bad_points_files_exit_2_with_one_line(tmp_path, content, needle):
    path = tmp_path / "points.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    r = calibrate_cli(tmp_path, "--points", str(path))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_excluding_every_row_or_a_missing_row_exits_2(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text(HEADER + "910b1,1,128,128,1024,128,128,256,4,42\n")
    for args, needle in ((["--exclude", "1"], "leaves no point"), (["--exclude", "2"], "rows are 1…1")):
        r = calibrate_cli(tmp_path, "--points", str(path), *args)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
