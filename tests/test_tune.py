"""``tfa-sim tune``: its pick against an exhaustive evaluation of a small space, best.toml reproducing the
reported time exactly, resuming without repeating a simulation, the bad-input lines, the report's wording."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib

import pytest
from test_sweep import run_main, write

import tfa_sim
from tfa_sim.explore.sweep import read_results
from tfa_sim.explore.sweep.execute import TEST_SIGNAL_ENV
from tfa_sim.explore.tune.report import config_toml, verdicts
from tfa_sim.explore.tune.screen import Screen
from tfa_sim.explore.tune.search import MARGIN, Search
from tfa_sim.explore.tune.space import Candidate, default_axes
from tfa_sim.spec.load import build_config, load_config, parse_config

#: 4 × 3 × 2 = 24 points, 20 legal (TILE_S1 1024 over CUBE_S1 64 breaks Vec_S0); 4 blocks of 8…32 tiles on
#: 4 cores: a simulation takes a few hundredths of a second.
SPACE = """
[base.case]
s0 = 512
s1 = 4096
[base.hardware]
cores = 4
[axes]
"tiling.tile_s1" = [128, 256, 512, 1024]
"schedule.qk_preload" = [2, 4, 6]
"tiling.cube_s1" = [64, 128]
"""


def tune_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tfa_sim", "tune", *map(str, args), "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The small space tuned (API, one job) and swept exhaustively, full simulations both."""
    tmp = tmp_path_factory.mktemp("tune")
    space = write(tmp / "space.toml", SPACE)
    result = tfa_sim.tune(space=space, out=tmp / "tune", jobs=1)
    swept = tfa_sim.sweep(space, jobs=1)
    return result, swept, tmp


def test_the_pick_is_within_one_percent_of_the_exhaustive_best_with_fewer_simulations(tuned):
    result, swept, tmp = tuned
    ok = swept[swept.status == "ok"]
    assert result.time_us <= ok.time_us.min() * (1 + MARGIN)
    simulated = read_results(tmp / "tune" / "results.jsonl")
    assert 3 <= len(simulated) < len(ok) / 2, "the screen spared most of the simulations"
    table = result.candidates
    assert len(table) == 24 and set(table.status) <= {"ok", "illegal", "screened", "twin", "schedule_error"}
    assert (table.status == "illegal").sum() == (swept.status == "illegal").sum()
    assert set(table.stage) == {"legality", "screen", "simulated"}
    assert result.summary["search"]["stop"]
    # each simulated candidate's time is the sweep's for the same point
    axes = ("tiling.tile_s1", "schedule.qk_preload", "tiling.cube_s1")
    by_point = {json.dumps({k: r[k] for k in axes}, sort_keys=True): r["time_us"] for r in ok.to_dict("records")}
    for c in result.summary["candidates"]:
        if c["status"] == "ok":
            assert c["time_us"] == by_point[json.dumps(c["overrides"], sort_keys=True)]


def test_best_toml_reproduces_the_reported_time_exactly(tuned):
    result, _, tmp = tuned
    best = tmp / "tune" / "best.toml"
    assert best.read_text().startswith("# tfa-sim tune: the best of 24 points")
    assert load_config(best).to_dict() == result.summary["best"]["config"] == result.best.to_dict()
    code, out, err = run_main("run", best, "--out", tmp / "run")
    assert code == 0, err
    reported = json.loads((tmp / "tune" / "tune.json").read_text())["best"]["time_us"]
    assert json.loads((tmp / "run" / "summary.json").read_text())["time_us"] == reported == result.time_us
    assert f"time_us {reported}" in best.read_text()


def test_outputs_and_report(tuned):
    result, _, tmp = tuned
    names = sorted(os.listdir(tmp / "tune"))
    assert names == sorted([".tfa-sim-files.json", "best.toml", "landscape.png", "report.txt", "results.jsonl",
                            "space.json", "tune.json"])
    assert (tmp / "tune" / "landscape.png").read_bytes()[:4] == b"\x89PNG"
    s = result.summary
    assert s["best"]["changes"] and s["best"]["gain"] >= 1.0 and s["defaults"]["status"] == "ok"
    assert len(s["top"]) <= 5 and s["top"][0]["metric"] == s["best"]["metric"]
    assert s["search"]["agreement"]["simulated"] >= 3
    assert "the model cannot tell them apart" in result.report or "clear winner" in result.report
    assert (tmp / "tune" / "report.txt").read_text() == result.report + "\n"


def test_verdicts_say_when_the_model_cannot_tell_the_best_from_the_runner_up():
    def row(t):
        return {"metric": t, "time_us": t, "time_interval_us": [0.9 * t, 1.1 * t]}

    close = verdicts([row(100.0), row(105.0)], {**row(130.0), "status": "ok"}, "time_us")
    assert "the runner-up (105) lies inside the best's 90 % interval (90–110): the model cannot tell them apart" \
        in close[0]
    assert "lie outside" in close[1] and "beyond the model's uncertainty" in close[1]
    far = verdicts([row(100.0), row(120.0)], {**row(108.0), "status": "ok"}, "time_us")
    assert "clear winner" in far[0] and "the gain is within the model's uncertainty" in far[1]


def test_an_interrupted_tune_resumes_without_repeating_a_simulation(tmp_path):
    space = write(tmp_path / "space.toml", SPACE)
    whole = tune_cli("--space", space, "--out", tmp_path / "whole", "--jobs", 1)
    assert whole.returncode == 0, whole.stderr
    expected = [r["key"] for r in read_results(tmp_path / "whole" / "results.jsonl")]
    out = tmp_path / "cut"
    env = {**os.environ, TEST_SIGNAL_ENV: "SIGKILL:2"}
    killed = tune_cli("--space", space, "--out", out, "--jobs", 1, env=env)
    assert killed.returncode == -signal.SIGKILL
    first = (out / "results.jsonl").read_bytes()
    assert len(read_results(out / "results.jsonl")) == 2 and not (out / "tune.json").exists()
    again = tune_cli("--space", space, "--out", out, "--jobs", 1)
    assert again.returncode == 0, again.stderr
    rows = read_results(out / "results.jsonl")  # refuses a key recorded twice
    assert (out / "results.jsonl").read_bytes().startswith(first)
    assert len(rows) == len(expected) and {r["key"] for r in rows} == set(expected)
    # rerunning a finished tune simulates nothing
    assert tune_cli("--space", space, "--out", out, "--jobs", 1).returncode == 0
    assert len(read_results(out / "results.jsonl")) == len(expected)
    other = write(tmp_path / "other.toml", SPACE.replace("[2, 4, 6]", "[2, 4]"))
    code, _, err = run_main("tune", "--space", other, "--out", out, "--no-progress")
    assert code == 2 and "records another tune" in err and len(err.strip().splitlines()) == 1


BAD = {
    "unknown knob": ('[axes]\n"schedule.qk_preloda" = [2, 4]\n', (),
                     "unknown config key 'schedule.qk_preloda'; did you mean 'qk_preload'?"),
    "malformed": ("[axes\n", (), "does not parse"),
    "axis of the problem": ('[axes]\n"case.s1" = [1024, 2048]\n', (), "axis case.s1 is part of the problem"),
    "numerics": ('[sweep]\nnumerics = true\n[axes]\n"schedule.qk_preload" = [2, 4]\n', (), "numerics = true"),
    "no legal point": ('[axes]\n"tiling.tile_s1" = [300, 700]\n', (),
                       "has no legal candidate: 2 of its 2 points are removed by \"illegal config: S1 % TILE_S1"),
    "budget 0": ('[axes]\n"schedule.qk_preload" = [2, 4]\n', ("--budget-s", "0"), "--budget-s 0.0: give a number"),
    "budget < 0": ('[axes]\n"schedule.qk_preload" = [2, 4]\n', ("--budget-s", "-3"), "--budget-s -3.0"),
    "budget nan": ('[axes]\n"schedule.qk_preload" = [2, 4]\n', ("--budget-s", "nan"), "--budget-s nan"),
    "top 0": ('[axes]\n"schedule.qk_preload" = [2, 4]\n', ("--top", "0"), "--top 0: give at least 1"),
}


@pytest.mark.parametrize("text, extra, needle", list(BAD.values()), ids=list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, text, extra, needle):
    space, out = write(tmp_path / "space.toml", text), tmp_path / "out"
    code, stdout, err = run_main("tune", "--space", space, "--out", out, "--no-progress", *extra)
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and not stdout
    assert not out.exists()


def test_the_api_raises_tfa_sim_errors(tmp_path):
    with pytest.raises(tfa_sim.InputError, match="--budget-s"):
        tfa_sim.tune(space={"axes": {"schedule.qk_preload": [2]}}, budget_s=float("nan"))
    with pytest.raises(tfa_sim.InputError, match="has no legal candidate"):
        tfa_sim.tune(space={"axes": {"tiling.cube_s1": [100]}}, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_spent_budget_still_answers_with_the_first_finalist_and_the_defaults(tmp_path):
    space = write(tmp_path / "space.toml", SPACE)
    r = tfa_sim.tune(space=space, budget_s=1e-6, out=tmp_path / "t")
    assert r.summary["search"]["stop"] == "the --budget-s was spent"
    assert len(read_results(tmp_path / "t" / "results.jsonl")) == 2  # the first finalist and the defaults


def test_the_default_space_has_the_knobs_that_apply():
    def axes(**case):
        return dict(default_axes(build_config({"case": case})))

    prefill = axes(s0=8192, s1=8192)
    assert set(prefill) == {"tiling.tile_s1", "tiling.cube_s1", "tiling.cube_s0", "schedule.qk_preload",
                            "schedule.cv_fifo_cons_sync_period"}
    assert prefill["tiling.tile_s1"] == [128, 256, 512, 1024, 2048]
    assert prefill["schedule.qk_preload"] == list(range(1, 9))
    assert "schedule.block_order" in axes(s0=4096, s1=4096, causal=True)
    decode = axes(s0=1, s1=131072, heads=32, kv_heads=8)
    assert decode["schedule.gqa_pack"] == [False, True] and "auto" in decode["schedule.s1_split"]
    assert axes(s0=1000, s1=1536)["tiling.tile_s1"] == [128, 256, 512]  # the powers of two dividing S1
    assert "schedule.s1_split" not in axes(s0=32768, s1=32768)  # 256 blocks on 24 cores: 3 % idle


def test_the_screen_shares_probes_and_finds_hazards():
    base = {"case": {"s0": 128, "s1": 8192, "causal": True, "heads": 4}, "hardware": {"cores": 4}}
    configs = [build_config({**base, "schedule": {"block_order": order, "s1_split": split}})
               for order in ("row", "zigzag", "longest_first") for split in (1, 2)]
    screen = Screen(configs[0])
    found = screen.estimate(configs)
    assert all(f["estimate_cycles"] > 0 for f in found)
    assert len(screen.probes) == 2  # one per block class (whole, chunk): the orders cost no probe
    hazard = build_config({"case": {"s0": 128, "s1": 8192}, "schedule": {"qk_preload": 8}})
    assert "l1_exp_max slot 1 overwritten" in Screen(hazard).estimate([hazard])[0]["error"]


def test_the_search_stops_by_the_rule_and_simulates_the_defaults_second():
    cands = [Candidate(i, {"i": i}, key=f"k{i}", config=build_config({}), status="screened", estimate=100.0 + i)
             for i in range(10)]
    search = Search(cands, build_config({"tiling": {"tile_s1": 512}}).to_dict(), "time_us", {})
    tasks = search.tasks()
    first, second = next(tasks), next(tasks)
    assert first["point"]["key"] == "k0" and second["reference"]
    drawn = [first, next(tasks), next(tasks)]
    for i, t in enumerate(drawn):
        search.record(t, {"key": t["point"]["key"], "status": "ok", "time_us": 102.0 + (i == 1) * 1.0})
    # k3 is decided on k0 and k1 (the last one, k2, runs while k3 is drawn): too few rows to stop
    third = next(tasks)
    assert third["point"]["key"] == "k3"
    search.record(third, {"key": "k3", "status": "ok", "time_us": 110.0})
    # k4 on k0…k2: best 102 at estimate 100 → ratio 1.0 … k4's estimate 104 × 1.0 ≥ 102 × 0.99: stop
    assert [t["point"]["key"] for t in tasks] == [] and "cannot beat 102, the best of the 3 simulations" in search.stop


def test_the_search_answers_the_same_whichever_worker_finishes_first():
    """A candidate drawn while a row its decision reads is missing is simulated ahead; it counts only if the
    search reaches it once every row is in, so the answer does not depend on the order rows arrive in."""
    cands = [Candidate(i, {"i": i}, key=f"k{i}", config=build_config({}), status="screened", estimate=100.0 + i)
             for i in range(10)]
    search = Search(cands, None, "time_us", {})
    tasks = search.tasks()
    drawn = [next(tasks)["point"]["key"] for _ in range(5)]  # no row yet: k2…k4 drawn ahead
    assert drawn == ["k0", "k1", "k2", "k3", "k4"]
    times = {"k0": 102.0, "k1": 103.0, "k2": 102.0, "k3": 102.0, "k4": 50.0}  # k4 the fastest, past the stop
    for key in ("k4", "k1", "k3", "k2", "k0"):
        search.record({}, {"key": key, "status": "ok", "time_us": times[key]})
    assert list(tasks) == []
    search.settle()
    # decided on k0…k2 (best 102, ratio 1.0), k4's estimate 104 ≥ 102 × 0.99 ends the search before k4
    assert [c.key for c in search.simulated()] == ["k0", "k1", "k2", "k3"] and search.decided == 4
    assert search.stop.startswith("the next candidate's estimate 104 ")


def test_config_toml_round_trips():
    config = build_config({"case": {"s0": 300, "window": 64, "causal": True, "softcap": 30.5},
                           "schedule": {"s1_split": "auto"}}).to_dict()
    text = config_toml(config, "a comment")
    assert parse_config(tomllib.loads(text)).to_dict() == config
    assert text.startswith("# a comment\n")


def test_the_dask_executor_gives_the_same_answer(tuned):
    result, _, tmp = tuned
    r = tune_cli("--space", tmp / "space.toml", "--executor", "dask", "--jobs", 2, "--out", tmp / "dask")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp / "dask" / "tune.json").read_text())["best"]["time_us"] == result.time_us


@pytest.mark.parametrize("build", ["dsl", "jit"])
def test_a_space_whose_base_names_a_build_tunes_that_build(build):
    """[base.kernel] build = … : every candidate runs that build's choices (not the command's build's, kept
    beside it), as the defaults' row does; only the axis' knob differs from the build's bundle."""
    from tfa_sim.explore.tune.space import legal_candidates, load_space

    space = load_space(load_config(None, None, []), {"base": {"case": {"s0": 512, "s1": 2048},
                                                                "kernel": {"build": build}},
                                                       "axes": {"kernel.cube_handoff": ["flags", "unit_flag"]}})
    bundle = load_config(None, None, [f"kernel.build={build}", "case.s0=512", "case.s1=2048"])
    for cand in legal_candidates(space):
        assert cand.config is not None and cand.config.kernel.build == build
        changed = {k: v for k, v in vars(cand.config.kernel).items() if getattr(bundle.kernel, k) != v}
        assert set(changed) <= {"cube_handoff"}, changed
        assert cand.config.schedule == bundle.schedule and cand.config.tiling == bundle.tiling
