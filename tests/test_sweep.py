"""Sweeps end to end: a shipped 200-point sweep, dask agrees with the local pool, rows equal single runs,
the report; shared helpers for the other test_sweep_* files."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from tfa_sim.cli import main
from tfa_sim.explore.sweep import read_results, sweep_report
from tfa_sim.spec.config import CONFIG_DIR

PRELOAD_TILING = CONFIG_DIR / "sweeps" / "preload_tiling.toml"
#: 2 × 3 × 2 = 12 quick points (S0 128, one block each); qk_preload 4 with tile_s1 256 is the kernel default
TINY = """
[base.case]
s0 = 128
[axes]
"case.s1" = [256, 512]
"schedule.qk_preload" = [2, 3, 4]
"tiling.tile_s1" = [128, 256]
"""


def sweep_cli(*args, env=None, timeout=600):
    """``tfa-sim sweep ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "tfa_sim", "sweep", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def run_main(*args) -> tuple[int, str, str]:
    """``tfa-sim ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "local"
    r = sweep_cli(PRELOAD_TILING, "--out", out, "--jobs", "2")
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
    # every shape's defaults (tile_s1 256, cube_s0 128, preload 4) are points of this sweep: nothing extra ran
    assert (out / "references.jsonl").read_text() == ""


def test_dask_executor_gives_identical_results(local_sweep, tmp_path):
    out, _ = local_sweep
    r = sweep_cli(PRELOAD_TILING, "--out", tmp_path / "dask", "--jobs", "2", "--executor", "dask", "--no-progress")
    assert r.returncode == 0, r.stderr
    by_key = lambda rows: {row["key"]: row for row in rows}  # noqa: E731
    assert by_key(read_results(tmp_path / "dask" / "results.jsonl")) == by_key(read_results(out / "results.jsonl"))


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


def test_report_speedup_pareto_and_plots(local_sweep):
    out, _ = local_sweep
    report = sweep_report(out)
    assert len(report["shapes"]) == 4  # s1 = 1024 … 8192
    for s in report["shapes"]:
        assert s["best"]["status"] == "ok" and s["speedup"] >= 1.0
        times = [r["time_us"] for r in s["pareto_ub"]]
        assert times == sorted(times, reverse=True) and s["best"]["time_us"] == times[-1]
    assert {Path(p["file"]).name for p in report["plots"]} == {"plot_preload.png", "heatmap.png"}
    for plot in report["plots"]:  # one panel per S1, each naming its S1
        assert [p["title"] for p in plot["panels"]] == [f"s1 = {s1}" for s1 in (1024, 2048, 4096, 8192)]


def test_report_speedup_is_against_the_points_with_default_tiling_and_schedule(local_sweep):
    out, _ = local_sweep
    rows = read_results(out / "results.jsonl")
    for s in sweep_report(out, plots=False)["shapes"]:
        s1 = s["best"]["config"]["case"]["s1"]
        default = next(r for r in rows if r["overrides"] == {"tiling.tile_s1": 256, "schedule.qk_preload": 4,
                                                             "tiling.cube_s0": 128, "case.s1": s1})
        assert s["default_metric"] == default["time_us"]
        assert s["speedup"] == pytest.approx(default["time_us"] / s["best"]["time_us"])
