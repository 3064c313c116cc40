"""Board tables read as points (tfa_sim.explore.points) and ``tfa-sim calibrate --check``: the presets against
measured points, each beside what ``tfa-sim run`` predicts for it (tfa_sim.explore.check_points)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tfa_sim
from tfa_sim.explore.check_points import check_points, check_record
from tfa_sim.explore.points import POINTS_FILES, TABLE_EVIDENCE, load_points
from tfa_sim.sim.prediction import prediction
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

#: The board tables' own columns, and rows of the shared full-chip file in them (tests/data has none of it).
TABLE_HEADER = ("source,kernel,card,timing,units,grid,head,s0,s1,cube_s0,cube_s1,tile_s1,qk_preload,cv_fifo_size,"
                "sync_period,s1_split,causal,time_us\n")
MANUAL = "manual_910b2_table,manual,910b2,unknown,32,32,128,4096,4096,128,128,,4,8,4,1,false,88.902\n"
DSL_AB = "dsl_sync_period_ab,dsl,a3_24,sync,32,24,128,4096,4096,128,128,256,3,8,4,1,false,115.52\n"
DSL_STREAM = "dsl_readme_expected,dsl,a3_24,stream,8,8,128,1024,1024,128,128,256,3,8,4,1,false,21\n"
#: The same launch as DSL_AB's in two S1 halves per row block (the port's KV_SPLIT 2; its time is made up).
DSL_SPLIT = DSL_AB.replace(",32,24,128,4096,", ",64,24,128,4096,").replace(",4,1,false,115.52", ",4,2,false,110")


def table(tmp_path, *rows):
    path = tmp_path / "table.csv"
    path.write_text(TABLE_HEADER + "".join(rows), encoding="utf-8")
    return path


def test_a_board_table_row_reads_as_the_point_it_means(tmp_path):
    """card a3_24 runs on the 910b2 preset; units / s1_split are the row blocks; an empty tile_s1 is the build's;
    an unknown timing naming no evidence may be any figure the table reports; a split row keeps its split."""
    manual, dsl, halves = load_points(table(tmp_path, MANUAL, DSL_AB, DSL_SPLIT))
    assert (manual.preset, manual.row_blocks, manual.tile_s1, manual.timing_evidence) == \
        ("910b2", 32, 256, TABLE_EVIDENCE)
    assert set(manual.timings) == {"kernel", "stream", "sync"}
    assert (dsl.preset, dsl.kernel, dsl.timing, dsl.row_blocks, dsl.qk_preload, dsl.s1_split) == \
        ("910b2", "dsl", "sync", 32, 3, 1)
    assert halves.row_blocks == 32 and halves.s1_split == 2 and halves.config().schedule.s1_split == 2
    assert halves.shape != dsl.shape and "split 2" in halves.label
    shipped = [p for p in load_points(POINTS_FILES[1]) if p.source.startswith("dsl_sync_period_ab")
               and p.s1 == 4096 and p.sync_period == 4]
    assert [dsl.shape] == [p.shape for p in shipped]  # the same launch as the shipped file's row


def cli(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "calibrate", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("row, needle", [
    (DSL_AB.replace("a3_24", "a5_32"), "card 'a5_32' has no preset"),
    (DSL_AB.replace(",4,1,false,", ",4,3,false,"), "units '32' must be a whole number of row blocks"),
    (DSL_AB.replace(",32,24,", ",32,32,"), "grid 32, but kernel dsl launches 24"),
    (MANUAL.replace(",32,32,", ",32,24,"), "grid 24, but kernel manual launches 32"),
    (DSL_AB.replace(",32,24,", ",16,16,"), "is not S0/CUBE_S0 = 32"),
    (DSL_STREAM.replace(",8,8,128,", ",64,24,128,").replace(",4,1,false,", ",4,8,false,"),
     "s1_split 8 must be 1 … S1/TILE_S1 = 4"),
], ids=["unknown card", "units not split", "dsl grid", "manual grid", "units disagree", "split beyond tiles"])
def test_bad_board_table_rows_exit_2_with_one_line(tmp_path, row, needle):
    r = cli(tmp_path, "--check", "--points", str(table(tmp_path, row)))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def run_figures(point):
    """What ``tfa-sim run`` prints for the point's config: its three figures and their intervals."""
    config = point.config(host=point.host)
    hw = load_hardware(config.hardware)
    sim = simulate(kernel_plan(config, hw), None, log_events=False)
    return {"kernel": sim.time_us, **prediction(kernel_plan(config, hw), sim.total_cycles)}


FIGURE = {"kernel": ("kernel", "time_interval_us"), "stream": ("launch_period_us", "launch_period_interval_us"),
          "sync": ("host_sync_us", "host_sync_interval_us")}


def test_check_sets_each_point_beside_what_run_predicts_for_it(tmp_path):
    """Each point's figure (the one its timing measures; an unknown timing the nearest its evidence allows) and
    interval are tfa-sim run's for its config (a split one's too); the summary counts what the rows say."""
    rows = check_points(load_points(table(tmp_path, MANUAL, DSL_AB, DSL_STREAM, DSL_SPLIT)))
    for r in rows:
        run = run_figures(r.point)
        figure, interval = FIGURE[r.how]
        # run's summary rounds its launch figures to 4 decimals: half a unit of the last one apart at most
        assert r.predicted == pytest.approx(run[figure], abs=5e-5) and [r.low, r.high] == run[interval]
        assert r.error == pytest.approx(r.predicted / r.point.time_us - 1)
        assert r.covered == (run[interval][0] <= r.point.time_us <= run[interval][1])
    manual = rows[0]
    nearest = min(("kernel", "stream", "sync"), key=lambda how: abs(run_figures(manual.point)[FIGURE[how][0]]
                                                                   - manual.point.time_us))
    assert manual.how == nearest and [r.how for r in rows[1:]] == ["sync", "stream", "sync"]
    record = check_record(rows)
    assert record["mape"] == pytest.approx(sum(abs(r.error) for r in rows) / 4)
    assert record["covered"] == sum(r.covered for r in rows) and len(record["points"]) == 4
    assert record["by_build"]["dsl"]["points"] == 3


def test_calibrate_check_writes_its_report_and_refuses_to_write_presets(tmp_path):
    path = table(tmp_path, MANUAL, DSL_STREAM)
    r = cli(tmp_path, "--check", "--points", str(path))
    assert r.returncode == 0, r.stderr
    assert "2 points: MAPE" in r.stdout and "the 90 % interval covers" in r.stdout
    saved = json.loads((tmp_path / "out" / "check.json").read_text())
    assert [p["row"] for p in saved["points"]] == [1, 2] and (tmp_path / "out" / "check.txt").exists()
    refused = subprocess.run([sys.executable, "-m", "tfa_sim", "calibrate", "--check", "--write-presets",
                              "--points", str(path)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "writes no presets" in refused.stderr


def test_a_split_is_inside_the_domain_only_where_a_measured_launch_had_it(tmp_path):
    """The presets record the measured s1_split values ([1]: the shipped points are unsplit); a preset written
    before they did reads as [1]; a fit to a split point widens nothing for that split."""
    shipped = (POINTS_FILES[0].parent.parent / "hw" / "910b2.toml").read_text(encoding="utf-8")
    older = tmp_path / "older.toml"
    older.write_text("".join(ln for ln in shipped.splitlines(True) if not ln.startswith("s1_split")))
    fitted = tmp_path / "fitted.toml"
    fitted.write_text(shipped.replace("s1_split = [1]", "s1_split = [1, 2]"))

    def reasons(preset_file, split):
        config = build_config({"case": {"s0": 1024, "s1": 4096}, "kernel": {"build": "dsl"},
                               "schedule": {"s1_split": split},
                               "hardware": {"file": str(preset_file), "host": "x86_64"}})
        return prediction(kernel_plan(config), 180000.0)["interval_reasons"]

    assert load_hardware(build_config({"hardware": {"file": str(older)}}).hardware).calibration.s1_split == [1]
    assert reasons(older, 1) == [] and reasons(older, 2) == ["schedule.s1_split = 2 never measured (measured: 1)"]
    assert reasons(fitted, 2) == [] and reasons(fitted, 4) == [
        "schedule.s1_split = 4 never measured (measured: 1, 2)"]


def test_the_api_checks_as_the_command_does_and_writes_only_when_asked(tmp_path):
    """tfa_sim.calibrate(check=True) is what `calibrate --check` runs: the same record; without ``out`` nothing
    is written."""
    path = table(tmp_path, MANUAL, DSL_STREAM)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = tfa_sim.calibrate([path], check=True)
    assert result.out_dir is None and sorted(p.name for p in tmp_path.iterdir()) == before
    assert result.record == check_record(check_points(load_points(path)))
    assert "\n2 points: MAPE" in result.report
    with pytest.raises(tfa_sim.InputError, match="writes no presets"):
        tfa_sim.calibrate([path], check=True, write_presets=True)
