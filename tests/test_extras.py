"""The light core and its extras (issue 44, docs/dependencies.md): a command or API function that needs a missing
extra stops with the one line naming ``pip install "tfa-sim[EXTRA]"`` before it writes anything; the core commands
run with every extra missing; pyproject.toml's extras bring what tfa_sim.spec.extras says they do.

A missing package is simulated the way Python blocks an import: ``None`` in ``sys.modules`` (in this process), or a
finder that answers "no module named …" for the extras' modules (in a subprocess that runs the core commands)."""
from __future__ import annotations

import importlib.metadata as md
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tfa_sim
from tfa_sim import cli
from tfa_sim.api.library import TuneResult
from tfa_sim.spec.extras import EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SMOKE = ROOT / "tests" / "smoke"
PROFILE = ROOT / "tests" / "data" / "msprof" / "a2_op_single"
PROFILE_SETTINGS = {"case.s0": 512, "case.s1": 2048, "schedule.cv_fifo_cons_sync_period": 1}
CASE = "case_float_H_128_S0_128_S1_1024"


def line(what: str, module: str, extra: str) -> str:
    """The missing-extra message, written out here as docs/dependencies.md gives it."""
    return f'{what} needs {module}, which is not installed: pip install "tfa-sim[{extra}]"'


# ---- pyproject.toml and the table of extras


def brings(requirements: list[str], distribution: str) -> bool:
    """Whether installing ``requirements`` installs ``distribution`` (directly, or through an extra of one)."""
    want = canonicalize_name(distribution)
    for text in requirements:
        req = Requirement(text)
        if canonicalize_name(req.name) == want:
            return True
        for extra in req.extras:
            for sub in map(Requirement, md.requires(req.name) or []):
                if canonicalize_name(sub.name) == want and sub.marker and sub.marker.evaluate({"extra": extra}):
                    return True
    return False


def test_each_extra_brings_the_modules_tfa_sim_asks_it_for():
    extras = PYPROJECT["optional-dependencies"]
    for module, extra in EXTRA_OF.items():
        (distribution,) = md.packages_distributions()[module]
        assert brings(extras[extra], distribution), f"[{extra}] does not install {module}"
    assert not any(brings(PYPROJECT["dependencies"], md.packages_distributions()[m][0]) for m in EXTRA_OF), \
        "a module of an extra is a core dependency"


def test_all_holds_every_extra_and_the_test_extra_holds_all():
    """[all] is every extra of the package's own (not [test], nor [docs]: the site's tools, which tfa_sim never
    imports); [test] holds [all]."""
    extras = PYPROJECT["optional-dependencies"]
    (everything,) = [Requirement(r) for r in extras["all"]]
    assert everything.name == "tfa-sim" and everything.extras == set(extras) - {"all", "test", "docs"}
    assert set(EXTRA_OF.values()) <= everything.extras
    assert "tfa-sim[all]" in extras["test"], "the README's first command must install everything the tests use"


# ---- the commands: exit 2, the one line, nothing written


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("extras") / "run"
    assert cli.main(["run", "--set", "case.s0=256", "--set", "case.s1=512", "--no-numerics", "--out", str(out)]) == 0
    return out


def refused(capsys, argv: list[str]) -> str:
    """Run the command; it must exit 2 and print one line on stderr and nothing on stdout: that line."""
    capsys.readouterr()
    assert cli.main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, (out, err)
    return err.removeprefix("tfa-sim: error: ").rstrip("\n")


@pytest.mark.parametrize("module, extra, name, format_", [
    ("pyarrow", "parquet", "e.parquet", "parquet"), ("perfetto", "perfetto", "e.pftrace", "perfetto")])
def test_trace_formats_of_an_extra(run_dir, tmp_path, capsys, monkeypatch, module, extra, name, format_):
    monkeypatch.setitem(sys.modules, module, None)
    assert refused(capsys, ["trace", run_dir, "--out", tmp_path / name]) == line(
        f"trace --format {format_}", module, extra)
    assert refused(capsys, ["trace", run_dir, "--format", format_, "--out", tmp_path / "e.bin"]) == line(
        f"trace --format {format_}", module, extra)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module, extra, name", [("matplotlib", "plots", "t.png"), ("plotly", "html", "t.html")])
def test_figures_of_an_extra(run_dir, tmp_path, capsys, monkeypatch, module, extra, name):
    monkeypatch.setitem(sys.modules, module, None)
    assert refused(capsys, ["timeline", run_dir, "-o", tmp_path / name]) == line(f"-o {name}", module, extra)
    assert refused(capsys, ["plan", run_dir, "-o", tmp_path / name]) == line(f"-o {name}", module, extra)
    assert list(tmp_path.iterdir()) == []


def test_profile_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.chdir(tmp_path)
    settings = [a for k, v in PROFILE_SETTINGS.items() for a in ("--set", f"{k}={v}")]
    assert refused(capsys, ["profile", PROFILE, *settings]) == line(
        "writing profile.png and profile.svg", "matplotlib", "plots")
    assert list(tmp_path.iterdir()) == [], "not even runs/"


@pytest.mark.parametrize("module", ["dask", "distributed"])
def test_the_dask_executor_without_dask(tmp_path, capsys, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)
    expected = line("--executor dask", module, "dask")
    assert refused(capsys, ["sweep", SMOKE / "sweep.toml", "--out", tmp_path / "s", "--executor", "dask",
                            "--no-progress"]) == expected
    assert refused(capsys, ["tune", "--case", CASE, "--space", SMOKE / "sweep.toml", "--out", tmp_path / "u",
                            "--executor", "dask", "--no-progress"]) == expected
    assert list(tmp_path.iterdir()) == []


# ---- the API: InputError with the same line


@pytest.fixture(scope="module")
def result():
    return tfa_sim.run(case=CASE, overrides={"numerics.enabled": False})


@pytest.fixture(scope="module")
def board():
    return tfa_sim.profile(PROFILE, case=CASE, overrides=PROFILE_SETTINGS)


def raised(call) -> str:
    with pytest.raises(tfa_sim.InputError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("module, extra, what, call", [
    ("pyarrow", "parquet", "Events.to_arrow()", lambda r, b: r.events.to_arrow()),
    ("pyarrow", "parquet", "Events.to_pandas()", lambda r, b: r.events.to_pandas()),
    ("pandas", "pandas", "Events.to_pandas()", lambda r, b: r.events.to_pandas()),
    ("matplotlib", "plots", "Result.timeline()", lambda r, b: r.timeline()),
    ("pandas", "pandas", "ProfileResult.to_pandas()", lambda r, b: b.to_pandas()),
    ("matplotlib", "plots", "ProfileResult.figure()", lambda r, b: b.figure()),
])
def test_api_functions_of_an_extra(result, board, monkeypatch, module, extra, what, call):
    monkeypatch.setitem(sys.modules, module, None)
    assert raised(lambda: call(result, board)) == line(what, module, extra)


def test_api_writers_of_an_extra_write_nothing(board, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    charts = line("writing profile.png and profile.svg", "matplotlib", "plots")
    assert raised(lambda: board.save(tmp_path / "saved")) == charts
    assert raised(lambda: tfa_sim.profile(PROFILE, case=CASE, overrides=PROFILE_SETTINGS,
                                          out=tmp_path / "profiled")) == charts
    monkeypatch.setitem(sys.modules, "pandas", None)
    assert raised(lambda: tfa_sim.sweep(SMOKE / "sweep.toml", out=tmp_path / "swept")) == line(
        "tfa_sim.sweep() (its DataFrame)", "pandas", "pandas")
    assert list(tmp_path.iterdir()) == []


def test_tune_candidates_are_a_dataframe_only_when_asked_for(monkeypatch):
    summary = {"axes": {"schedule.qk_preload": [2, 4]},
               "candidates": [{"overrides": {"schedule.qk_preload": 2}, "stage": "simulated", "status": "ok",
                               "estimate": 10.5, "time_us": 11.0, "launch_period_us": 12.0, "bound_pipe": "vec.V"},
                              {"overrides": {"schedule.qk_preload": 4}, "stage": "screen", "status": "screened",
                               "estimate": 13.0, "message": "not simulated"}]}
    tuned = TuneResult(tfa_sim.load_config(), 11.0, 11.0, summary, "report", None)
    table = tuned.candidates
    assert list(table.columns) == ["schedule.qk_preload", "stage", "status", "estimate", "time_us",
                                   "launch_period_us", "bound_pipe", "message"]
    first, second = table.to_dict("records")
    assert first == {"schedule.qk_preload": 2, "stage": "simulated", "status": "ok", "estimate": 10.5,
                     "time_us": 11.0, "launch_period_us": 12.0, "bound_pipe": "vec.V", "message": first["message"]}
    assert {k: v for k, v in second.items() if v == v and v is not None} == {
        "schedule.qk_preload": 4, "stage": "screen", "status": "screened", "estimate": 13.0, "message": "not simulated"}
    assert first["message"] != first["message"] or first["message"] is None, "no message: missing"
    monkeypatch.setitem(sys.modules, "pandas", None)
    assert raised(lambda: tuned.candidates) == line("TuneResult.candidates", "pandas", "pandas")


# ---- the core: every core command runs with every extra missing


#: Runs in a fresh interpreter: the extras' modules are "not installed", then the commands run one after the other
#: and the API's core functions; prints a JSON line per step: its name, exit code, stdout.
CORE = r'''
import contextlib, io, json, sys
from importlib.abc import MetaPathFinder

MISSING, SMOKE, CASE, steps = json.loads(sys.argv[1])


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
from tfa_sim.cli import main

for argv in steps:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    print(json.dumps([argv[0], code, out.getvalue()]), flush=True)
import tfa_sim

tuned = tfa_sim.tune(case=CASE, space=SMOKE + "/sweep.toml")
run = tfa_sim.run(case=CASE)
print(json.dumps(["api", 0 if run.passed and tuned.time_us > 0 else 1, tuned.report]), flush=True)
'''


def test_the_core_commands_import_no_extra(tmp_path):
    steps = [["run", "--case", CASE, "--intermediate-check", "--out", "r"], ["check", "r"],
             ["timeline", "r", "-o", "t.svg"], ["plan", "r", "-o", "p.svg"], ["trace", "r", "--out", "e.json"],
             ["gen-data", CASE, "--out", "g"], ["sweep", str(SMOKE / "sweep.toml"), "--out", "s", "--no-progress"],
             ["sweep-report", "s"], ["calibrate", "--check", "--points", str(SMOKE / "points.csv"), "--out", "k"],
             ["calibrate", "--points", str(SMOKE / "points.csv"), "--out", "c"],
             ["tune", "--case", CASE, "--space", str(SMOKE / "sweep.toml"), "--out", "u", "--no-progress"]]
    done = subprocess.run([sys.executable, "-c", CORE, json.dumps([sorted(EXTRA_OF), str(SMOKE), CASE, steps])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(text) for text in done.stdout.splitlines()]
    assert [(name, code) for name, code, _ in results] == [(s[0], 0) for s in steps] + [("api", 0)], done.stderr
    printed = {name: text for name, _, text in results}
    plot = line("plot_preload.png", "matplotlib", "plots")
    assert f"plot skipped: {plot}\n" in printed["sweep"] and f"plot skipped: {plot}\n" in printed["sweep-report"]
    landscape = line("landscape.png", "matplotlib", "plots")
    assert re.search(f"^  {re.escape(landscape)}$", printed["tune"], re.M)
    assert printed["api"].endswith(landscape)
    assert (tmp_path / "t.svg").stat().st_size > 0 and (tmp_path / "c" / "910b2.toml").is_file()
    assert not (tmp_path / "u" / "landscape.png").exists() and (tmp_path / "u" / "best.toml").is_file()
