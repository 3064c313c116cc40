"""Sweeps: grid and resume, local and dask executors agree, rows equal single runs, the report."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tfa_sim.config import CONFIG_DIR
from tfa_sim.sweep import load_sweep, points, read_results, sweep_report

PRELOAD_TILING = CONFIG_DIR / "sweeps" / "preload_tiling.toml"


def sweep_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "sweep", *args], capture_output=True, text=True,
                          timeout=600, **kw)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "local"
    r = sweep_cli(str(PRELOAD_TILING), "--out", str(out), "--jobs", "2")
    assert r.returncode == 0, r.stderr
    return out, r


def test_200_point_sweep_runs_with_progress_and_names_a_best_point(local_sweep):
    out, r = local_sweep
    rows = read_results(out / "results.jsonl")
    assert len(rows) == 200 and len({row["key"] for row in rows}) == 200
    assert "200/200" in r.stderr and "pt/s" in r.stderr  # tqdm: done/total, rate
    status = {s: sum(row["status"] == s for row in rows) for s in ("ok", "illegal", "excluded")}
    legal_preload_8 = sum(row["overrides"]["schedule.qk_preload"] == 8 and row["status"] != "illegal" for row in rows)
    assert status["ok"] > 100 and status["illegal"] > 0 and status["excluded"] == legal_preload_8 > 0, status
    illegal = next(row for row in rows if row["status"] == "illegal")
    assert illegal["message"].startswith("illegal config: ")
    excluded = next(row for row in rows if row["status"] == "excluded")
    assert excluded["message"] == "constraint schedule.qk_preload < schedule.cv_fifo_size is false"
    assert "best time_us" in r.stdout and "vs the kernel defaults" in r.stdout
    assert (out / "results.csv").read_text().count("\n") == 201


def test_dask_executor_gives_identical_results(local_sweep, tmp_path):
    out, _ = local_sweep
    r = sweep_cli(str(PRELOAD_TILING), "--out", str(tmp_path / "dask"), "--jobs", "2", "--executor", "dask",
                  "--no-progress")
    assert r.returncode == 0, r.stderr
    strip = lambda rows: {row["key"]: {k: v for k, v in row.items()} for row in rows}  # noqa: E731
    assert strip(read_results(tmp_path / "dask" / "results.jsonl")) == strip(read_results(out / "results.jsonl"))


def test_sweep_rows_equal_single_runs(local_sweep, tmp_path):
    out, _ = local_sweep
    ok = [row for row in read_results(out / "results.jsonl") if row["status"] == "ok"]
    for i, row in enumerate(ok[:: max(1, len(ok) // 4)][:4]):
        cfg = tmp_path / f"c{i}.yaml"
        cfg.write_text(yaml.safe_dump(row["config"]))
        r = subprocess.run([sys.executable, "-m", "tfa_sim", "run", str(cfg), "--out", str(tmp_path / f"r{i}"),
                            "--no-event-log"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        s = json.loads((tmp_path / f"r{i}" / "summary.json").read_text())
        assert (s["total_cycles"], s["bound_pipe"]) == (row["total_cycles"], row["bound_pipe"]), row["overrides"]


SLOW_SWEEP = """
[base.case]
s0 = 1024
[base.hardware]
cores = 2
[axes]
"schedule.qk_preload" = [2, 3, 4, 5, 6]
"case.s1" = [8192, 16384]
"tiling.tile_s1" = [128, 256]
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_sweep_resumes_with_every_point_once(tmp_path, sig):
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW_SWEEP)
    total = len(points(load_sweep(spec)))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tfa_sim", "sweep", str(spec), "--out", str(out), "--jobs", "1",
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = (out / "results.jsonl").read_text().count("\n") if (out / "results.jsonl").exists() else 0
        if done >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    first = read_results(out / "results.jsonl")
    assert 3 <= len(first) < total, f"killed after {len(first)} of {total}: make the sweep slower"
    if sig == signal.SIGINT:
        assert proc.returncode == 130
    r = sweep_cli(str(spec), "--out", str(out), "--jobs", "2", "--no-progress")
    assert r.returncode == 0, r.stderr
    rows = read_results(out / "results.jsonl")
    keys = [row["key"] for row in rows]
    assert len(keys) == total and len(set(keys)) == total
    assert {p["key"] for p in points(load_sweep(spec))} == set(keys)


def test_report_speedup_pareto_and_plots(local_sweep):
    out, _ = local_sweep
    report = sweep_report(out)
    assert len(report["shapes"]) == 4  # s1 = 1024 … 8192
    for s in report["shapes"]:
        assert s["best"]["status"] == "ok" and s["speedup"] >= 1.0
        times = [r["time_us"] for r in s["pareto_ub"]]
        assert times == sorted(times, reverse=True) and s["best"]["time_us"] == times[-1]
    assert {p.split("/")[-1] for p in report["plots"]} == {"plot_preload.png", "heatmap.png"}


@pytest.mark.parametrize("text, needle", [
    ("[axes]\n", "[axes] is empty"),
    ('[axes]\n"schedule.qk_preload" = []\n', "give a non-empty list"),
    ('[axes]\n"qk_preload" = [1]\n', "use section.key"),
    ('[sweep]\nmetric = "speed"\n[axes]\n"schedule.qk_preload" = [2]\n', "metric = 'speed'"),
    ('[sweep]\nconstraints = ["import os"]\n[axes]\n"schedule.qk_preload" = [2]\n', "does not parse"),
], ids=["empty", "empty_list", "no_section", "metric", "constraint"])
def test_bad_sweep_files(tmp_path, text, needle):
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    r = sweep_cli(str(spec), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
