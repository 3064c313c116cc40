"""The shipped presets against the measured launches, the calibration machinery and the error bars
(docs/calibration.md)."""
from __future__ import annotations

import subprocess
import sys
import tomllib

import numpy as np
import pytest

from tfa_sim.explore.calibrate import (
    FITTED,
    POINTS_FILE,
    Point,
    Simulator,
    fit,
    load_points,
    predicted,
    solve_linear,
)
from tfa_sim.sim.prediction import prediction
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config


def preset(name):
    return load_hardware(build_config({"hardware": {"preset": name}}).hardware)


def measured_by_model(point, hw=None):
    """What ``point`` would measure on the shipped (or given) preset."""
    hw = hw or preset(point.preset)
    kernel = simulate(point.config(), hw, None, log_events=False).time_us
    return predicted(point, kernel, {f"launch.gap_{h}": hw.launch.gap(h) for h in ("aarch64", "x86_64")})


def test_shipped_presets_predict_the_measured_launches():
    """In sample over the 18 measured launch periods of the current kernel: MAPE ≤ 6 %, none off by > 12 %."""
    points = load_points()
    assert len(points) == 18 and {p.kernel for p in points} == {"jit"}
    measured = np.array([p.time_us for p in points])
    error = np.array([measured_by_model(p) for p in points]) / measured - 1
    table = "\n".join(f"{p.label}: {e:+.1%}" for p, e in zip(points, error))
    assert np.mean(np.abs(error)) <= 0.06, f"MAPE {np.mean(np.abs(error)):.2%}\n{table}"
    assert np.max(np.abs(error)) <= 0.12, f"max error {np.max(np.abs(error)):.2%}\n{table}"


def slope(points, blocks, time):
    """µs per logical tile between S1 = 2048 and 8192 (256-wide tiles), mean over the hosts."""
    pts = [p for p in points if p.blocks == blocks]
    per_host = [(time(next(p for p in pts if p.host == h and p.s1 == 8192))
                 - time(next(p for p in pts if p.host == h and p.s1 == 2048))) / 24 for h in ("aarch64", "x86_64")]
    return float(np.mean(per_host))


def test_per_tile_cost_and_its_growth_with_active_cores_match_the_board():
    """The board's one-block slope (1.95 µs per 256-wide tile) within 10 %, and the 16-block/1-block slope
    ratio (1.47) within 0.2: both from the measured points, not from the model."""
    points = load_points()
    board = [slope(points, b, lambda p: p.time_us) for b in (1, 16)]
    model = [slope(points, b, measured_by_model) for b in (1, 16)]
    assert model[0] == pytest.approx(board[0], rel=0.10), (model, board)
    assert abs(model[1] / model[0] - board[1] / board[0]) <= 0.2, (model, board)


def test_every_fitted_parameter_is_bounded_physical_and_inside_its_bounds():
    assert len(FITTED) <= 10
    hw = preset("910b2")
    for p in FITTED:
        assert 0 <= p.low < p.high and p.meaning, p
        assert p.low <= hw.value(p.key) <= p.high, (p.key, hw.value(p.key))
    assert hw.calibration.measured and not preset("910b1").calibration.measured


def synthetic(points, values):
    """``points`` with the times the model itself gives them at ``values`` (the other values the preset's)."""
    sim = Simulator()
    searched = {k: v for k, v in values.items() if not k.startswith("launch.")}
    return [Point(**{**p.__dict__, "time_us": predicted(p, sim.kernel(p, searched)[0], values)}) for p in points]


def test_linear_parameters_solve_exactly_when_the_model_allows():
    """Times exactly raw + last core·stagger + the host's gap give back that stagger and those gaps."""
    points = load_points()
    raw = np.linspace(10.0, 60.0, len(points))
    last = np.array([p.blocks - 1 for p in points], float)
    clock = preset("910b2").clock_mhz
    gaps = {"aarch64": 9000.0, "x86_64": 4000.0}
    times = raw + last * 300 / clock + np.array([gaps[p.host] / clock for p in points])
    pts = [Point(**{**p.__dict__, "time_us": t}) for p, t in zip(points, times)]
    values, pred = solve_linear(pts, raw, last)
    assert values["overhead.core_stagger"] == pytest.approx(300)
    assert values["launch.gap_aarch64"] == pytest.approx(9000) and values["launch.gap_x86_64"] == pytest.approx(4000)
    assert pred == pytest.approx(times)


def test_the_fit_recovers_the_values_that_made_the_times():
    """Times made by the model at a known L2 bandwidth, flag latency, stagger and gaps on four shapes: the
    search (which starts from no preset value) finds the bandwidth within its grid's resolution and predicts
    every point within 2 %."""
    truth = {"gm.l2_bandwidth": 2500.0, "sync.flag_latency": 300.0, "overhead.core_stagger": 200.0,
             "launch.gap_aarch64": 8000.0, "launch.gap_x86_64": 5000.0}
    base = [p for p in load_points() if p.s1 in (1024, 8192) and p.blocks in (1, 16)]
    found = fit(synthetic(base, truth))
    assert found.values["gm.l2_bandwidth"] == pytest.approx(2500, rel=0.10), found.values
    assert np.max(np.abs(found.errors)) <= 0.02, found.errors


def test_prediction_intervals_widen_outside_the_calibrated_domain_and_say_why():
    hw = preset("910b2")

    def predict(**case):
        config = build_config({"case": {"s0": 128, "s1": 2048, **case},
                               "schedule": {"cv_fifo_cons_sync_period": 1}, "hardware": {"host": "x86_64"}})
        return prediction(config, hw, 36000.0, config.case.s0 // 128, 1)

    inside = predict()
    assert inside["interval_reasons"] == [] and inside["interval_half_width"] == hw.calibration.half_width
    lo, hi = inside["time_interval_us"]
    assert lo < 20.0 < hi and inside["launch_period_us"] == pytest.approx(20.0 + hw.launch.gap_x86_64 / 1800, abs=1e-3)
    longer = predict(s1=65536)
    assert longer["interval_half_width"] > inside["interval_half_width"]
    assert any("S1 = 65536 outside" in r for r in longer["interval_reasons"])
    causal = predict(causal=True)
    assert any("causal" in r for r in causal["interval_reasons"])
    other_board = prediction(build_config({"hardware": {"preset": "910b1", "host": "x86_64"}}), preset("910b1"),
                             36000.0, 1, 1)
    assert any("no measured points" in r for r in other_board["interval_reasons"])


POINTS_HEADER = ("preset,kernel,timing,host,blocks,head,s0,s1,cube_s0,cube_s1,tile_s1,qk_preload,cv_fifo_size,"
                 "sync_period,causal,time_us\n")
ROW = "910b2,jit,stream,x86_64,1,128,128,1024,128,128,256,4,8,1,false,17\n"


def calibrate_cli(tmp_path, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "calibrate", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("content, needle", [
    (POINTS_HEADER, "holds no rows"),
    (POINTS_HEADER + ROW.replace(",17\n", ",0\n"), "times must be > 0"),
    (POINTS_HEADER + ROW.replace(",17\n", ",nan\n"), "times must be > 0"),
    (POINTS_HEADER + ROW.replace(",1024,", ",1000,"), "S1 % TILE_S1"),
    (POINTS_HEADER + ROW.replace("stream", "wallclock"), "timing 'wallclock'"),
    (POINTS_HEADER + ROW.replace("x86_64", ""), "names its host class"),
    (POINTS_HEADER + ROW.replace(",1,128,128,", ",2,128,128,"), "is not S0/CUBE_S0"),
    (POINTS_HEADER + ROW + ROW.replace("jit", "manual"), "mix kernel revisions"),
    ("a,b\n1,2\n", "column preset"),
    (b"\xff\xfe\x00garbage", "cannot be read"),
], ids=["header only", "zero time", "nan time", "illegal shape", "unknown timing", "stream without host",
        "blocks disagree", "two revisions", "wrong columns", "not UTF-8"])
def test_bad_points_files_exit_2_with_one_line(tmp_path, content, needle):
    path = tmp_path / "points.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    r = calibrate_cli(tmp_path, "--points", str(path))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_calibrate_writes_presets_that_run_and_a_cross_validated_report(tmp_path):
    """Two shapes of the shipped points, one revision selected from a file holding two: the written 910b2
    preset runs as --hw FILE, and carries the cross-validated half-width and the measured domain."""
    rows = [ln for ln in open(POINTS_FILE, encoding="utf-8") if ",8192," in ln and ",16," not in ln]
    path = tmp_path / "points.csv"
    path.write_text(POINTS_HEADER + "".join(rows) + ROW.replace("jit", "older"), encoding="utf-8")
    r = calibrate_cli(tmp_path, "--points", str(path), "--kernel", "jit")
    assert r.returncode == 0, r.stderr
    assert "held out (k-fold by shape)" in r.stdout
    written = tmp_path / "out" / "910b2.toml"
    data = tomllib.loads(written.read_text())
    assert data["calibration"]["points"] == 4 and data["calibration"]["s1"] == [8192]
    assert 0 < data["calibration"]["half_width"] < 1
    run = subprocess.run([sys.executable, "-m", "tfa_sim", "run", "--no-numerics", "--no-event-log", "--hw",
                          str(written), "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "launch period" in run.stdout, run.stderr


def test_excluding_every_row_or_a_missing_row_exits_2(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text(POINTS_HEADER + ROW)
    for args, needle in ((["--exclude", "1"], "leaves no point"), (["--exclude", "2"], "rows are 1…1")):
        r = calibrate_cli(tmp_path, "--points", str(path), *args)
        assert r.returncode == 2 and needle in r.stderr, r.stderr

