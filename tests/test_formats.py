"""Formats other tools read: the version the installed package states, the event log as a Parquet table."""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import tfa_sim
from tfa_sim import cli
from tfa_sim.rundir.outputs import read_log


def test_the_version_is_the_installed_packages():
    installed = importlib.metadata.version("tfa-sim")
    assert tfa_sim.__version__ == installed
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "--version"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"tfa-sim {installed}\n"), r.stderr


def test_a_parquet_export_reads_back_with_pyarrow_into_the_events(timing_run, tmp_path, capsys):
    out = tmp_path / "events.parquet"
    assert cli.main(["trace", str(timing_run), "--out", str(out)]) == 0  # .parquet chooses the format
    assert "Parquet" in capsys.readouterr().out
    table = pq.read_table(out)
    with np.load(timing_run / "events.npz") as npz:
        ids, start = npz["ev_id"], npz["ev_start"]
        stages = npz["table_stages"][npz["ev_stage"]].tolist()
    assert table.num_rows == len(ids) > 500
    assert table.column("id").to_pylist() == ids.tolist() and table.column("start").to_pylist() == start.tolist()
    assert table.column("stage").to_pylist() == stages
    df = pd.read_parquet(out)
    assert len(df) == len(ids) and df.equals(tfa_sim.Events(read_log(timing_run / "events.npz")).to_pandas())


def test_a_parquet_window_holds_the_window(timing_run, tmp_path):
    out = tmp_path / "core1.pq"
    argv = ["trace", str(timing_run), "--cores", "1:2", "--tiles", "0:2", "--format", "parquet", "--out", str(out)]
    assert cli.main(argv) == 0
    table = pq.read_table(out)
    log = read_log(timing_run / "events.npz")
    assert table.num_rows == len(log.window(range(1, 2), (0, 2))) > 0
    assert {u.split(".")[0] for u in table.column("unit").to_pylist()} == {"core1"}
    assert set(table.column("tile").to_pylist()) == {0, 1}
