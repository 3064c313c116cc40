"""Your own module (issue 47): a plugin outside tfa_sim/ adds a stage order through the registry's public API, and
its value works through ``run``, a sweep axis and ``tune --space``; a broken plugin is one line, exit 2, and takes
back what it registered."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_readme import ROOT, follows, run_document

import tfa_sim
from tfa_sim.cli import main
from tfa_sim.spec import choices, plugins
from tfa_sim.spec.errors import InputError

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "plugins" / "gu_first.py"


@pytest.fixture(autouse=True)
def registries_as_they_were():
    """Each test's plugins taken back after it: the registries and the loaded plugins as before (other tests of the
    process name the shipped values in their messages)."""
    choices.load_providers()
    values = {k: (dict(r.values), r.numbers) for k, r in choices.REGISTRIES.items()}
    state = {name: dict(getattr(plugins, name)) for name in ("LOADED", "KEYS", "ORIGIN", "NAMED")}
    yield
    for k, (kept, numbers) in values.items():
        choices.REGISTRIES[k].values, choices.REGISTRIES[k].numbers = kept, numbers
    for name, saved in state.items():
        table = getattr(plugins, name)
        table.clear()
        table.update(saved)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The docs' worked example, copied outside the package, the working directory beside it."""
    monkeypatch.chdir(tmp_path)
    return Path(shutil.copy(EXAMPLE, tmp_path / "gu_first.py"))


def order(result, unit: str) -> list[tuple[str, int, int]]:
    """(instruction, tile, sub) of one unit's pipes, in start order (ties by log order)."""
    rows = [(r.start, n, r) for n, r in enumerate(result.events.log.records()) if r.unit == unit and r.tile >= 0]
    return [(r.kind, r.tile, r.sub) for _, _, r in sorted(rows, key=lambda x: x[:2])]


def run(order_name: str, plugins=(), **extra):
    return tfa_sim.run(overrides={"case.s1": 4096, "numerics.enabled": False, "kernel.stage_order": order_name,
                                  **extra}, plugins=list(plugins))


def test_the_plugins_order_issues_the_manual_cube_loop_and_the_ports_vector_loop(plugin):
    """Its AIC issues what qk_pv's does, in the same order, and each AIV what pv_qk's does (an independent
    expectation: the two shipped orders); its time is not the manual order's."""
    mine, manual, port = run("gu_first", [plugin]), run("qk_pv"), run("pv_qk")
    issued = lambda result, unit: [(k, t, s) for k, t, s in sorted(order(result, unit), key=lambda e: e[1:])]  # noqa
    for unit, like in (("core0.cubecore0", manual), ("core0.veccore0", port), ("core0.veccore1", port)):
        assert sorted(order(mine, unit)) == sorted(order(like, unit)), unit  # the same instructions
    program = lambda result, unit: [e for e in order(result, unit) if e[0] in ("TLOAD QK", "TLOAD PV")]  # noqa
    assert program(mine, "core0.veccore0") == program(port, "core0.veccore0")  # GU(t)'s load before P(t + preload)'s
    assert program(manual, "core0.veccore0") != program(port, "core0.veccore0")
    assert issued(mine, "core0.cubecore0") == issued(manual, "core0.cubecore0")
    assert mine.time_us != manual.time_us
    assert mine.o is None and "kernel.stage_order = gu_first never measured" in " ".join(
        mine.summary["interval_reasons"])


def test_the_plugin_runs_from_the_command_line_and_from_a_config(plugin, tmp_path, capsys):
    assert main(["run", "--no-numerics", "--no-event-log", "--plugin", "gu_first.py", "--set", "case.s1=4096",
                 "--set", "kernel.stage_order=gu_first", "--out", "a"]) == 0
    config = tmp_path / "mine.toml"
    config.write_text('[case]\ns1 = 4096\n[kernel]\nplugins = ["gu_first.py"]\nstage_order = "gu_first"\n')
    assert main(["run", "--no-numerics", "--no-event-log", str(config), "--out", "b"]) == 0
    summaries = [(tmp_path / d / "summary.json").read_text() for d in "ab"]
    import json

    a, b = (json.loads(s) for s in summaries)
    assert a["total_cycles"] == b["total_cycles"]
    assert b["config"]["kernel"]["plugins"] == [str(plugin.resolve())]  # resolved: runnable from anywhere


def test_the_plugins_value_is_a_sweep_axis_and_makes_a_hazardous_preload_safe(plugin, tmp_path):
    """compute_p runs one tile less ahead on the plugin's order: qk_preload = cv_fifo_size overwrites the ring on
    qk_pv (a schedule error) and runs on gu_first."""
    spec = {"base": {"case": {"s1": 4096}, "kernel": {"plugins": ["gu_first.py"]}},
            "axes": {"kernel.stage_order": ["qk_pv", "gu_first"], "schedule.qk_preload": [4, 8]}}
    table = tfa_sim.sweep(spec, out=tmp_path / "s")
    status = {(r["kernel.stage_order"], r["schedule.qk_preload"]): r["status"] for _, r in table.iterrows()}
    assert status == {("qk_pv", 4): "ok", ("qk_pv", 8): "schedule_error", ("gu_first", 4): "ok",
                      ("gu_first", 8): "ok"}
    row = table[(table["kernel.stage_order"] == "gu_first") & (table["schedule.qk_preload"] == 4)].iloc[0]
    assert row["time_us"] == run("gu_first", [plugin], **{"schedule.qk_preload": 4}).time_us


def test_the_plugins_value_is_tuned_and_named_in_the_report(plugin):
    space = {"axes": {"kernel.stage_order": ["qk_pv", "pv_qk", "gu_first"], "schedule.qk_preload": [2, 4]}}
    result = tfa_sim.tune(overrides={"case.s1": 4096}, space=space, plugins=["gu_first.py"])
    assert "kernel.stage_order: " in result.report and "gu_first" in result.report
    assert set(result.candidates["kernel.stage_order"]) == {"qk_pv", "pv_qk", "gu_first"}
    assert result.time_us == tfa_sim.run(result.best, event_log=False).time_us


@pytest.mark.parametrize(("text", "needle"), [
    ("import no_such_module_here\n", "failed to import: ModuleNotFoundError"),
    ("x = (\n", "failed to import: SyntaxError"),
    ("from tfa_sim.api.plugins import register\nregister('stage_order', 'qk_pv', __import__('sys'), 'd', 's')\n",
     "kernel.stage_order = qk_pv is registered already (by tfa_sim.stages.order_qk_pv)"),
    ("from tfa_sim.api.plugins import register\nregister('stage_order', 'half', object(), 'd', 's')\n",
     "breaks the registry's contract: it lacks aic_steady, aiv_steady"),
    ("from tfa_sim.api.plugins import register\nregister('no_such_choice', 'x', object(), 'd', 's')\n",
     "kernel.no_such_choice is not a design choice"),
    ("from tfa_sim.api.plugins import register\nregister('exp_ring', 'deep', lambda s: 99, '', 's')\n",
     "needs a doc line and a source"),
])
def test_a_broken_plugin_is_one_line_exit_2_and_takes_back_what_it_registered(text, needle, tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("from tfa_sim.api.plugins import register\n"
                   "register('gu_rows', 'early', lambda kf: 1, 'registered before the failure', 's')\n" + text)
    assert main(["run", "--no-numerics", "--no-event-log", "--plugin", str(bad), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err and str(bad) in err, err
    assert "early" not in choices.REGISTRIES["gu_rows"].values  # taken back
    assert not (tmp_path / "r").exists()


def test_a_plugin_file_that_does_not_exist_is_one_line():
    with pytest.raises(InputError, match="plugin file .*missing.py does not exist"):
        tfa_sim.load_config(overrides={"kernel.plugins": ["missing.py"]})


# ---- docs/guide/extending.md: its worked example runs as the page quotes it -------------------------------------
GUIDE = "docs/guide/extending.md"


def test_the_guides_worked_examples_run_as_written(tmp_path, monkeypatch, capsys):
    """The page followed from a checkout's top directory (its configs/ and docs/ beside the working directory):
    every block in order, every command's output as the page quotes it, a refusal exit 2 and one line."""
    for folder in ("configs", "docs"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)
    steps = run_document(GUIDE, capsys)
    for section in ("## A value of a design choice", "## A stage order", "## A listing", "## A chip preset",
                    "## A build of your own", "## A plugin: loading it"):
        assert (ROOT / GUIDE).read_text(encoding="utf-8").count(f"\n{section}\n") == 1, section
    assert [s.command.split()[:2] for s in steps].count(["tfa-sim", "run"]) >= 6
    for step in steps:
        refused = any(line.startswith("tfa-sim: error:") for line in step.expected)
        raced = refused and any('"Race rules"' in line for line in step.expected)  # a race: exit 3
        code = 3 if raced else 2 if refused else 0
        assert step.code == code, f"$ {step.command} exited {step.code}: {step.got[-3:]}"
        assert step.expected or not step.command.startswith("tfa-sim"), f"$ {step.command}: nothing quoted"
        assert follows(step.got, step.expected), f"$ {step.command} now prints:\n" + "\n".join(step.got)


def test_the_guide_says_what_each_registry_takes():
    text = (Path(__file__).resolve().parents[1] / GUIDE).read_text(encoding="utf-8")
    for choice in choices.choices():
        assert f"| `{choice.key}` | {choice.offers} |" in text, choice.key


# ---- a second look from outside: scoping, contracts kept at use, the sweep's base -------------------------------

SMALL = ["--no-numerics", "--no-event-log", "--set", "case.s0=512", "--set", "case.s1=2048"]


def write_plugin(path: Path, body: str) -> Path:
    path.write_text("from tfa_sim.api.plugins import register\n" + body, encoding="utf-8")
    return path


def test_a_value_is_a_configs_only_when_it_loads_its_plugin(tmp_path):
    """A plugin loaded by one config of the process (a sweep's other point) lends its value to no other."""
    ring = write_plugin(tmp_path / "ring_twice.py", "register('exp_ring', 'twice', lambda s: 2 * s.cv_fifo_size, "
                                                    "'twice the FIFO', 'a test')\n")
    assert tfa_sim.load_config(overrides={"kernel.exp_ring": "twice"}, plugins=[ring]).kernel.exp_ring == "twice"
    with pytest.raises(InputError, match=f"kernel.exp_ring = twice is a value of plugin {ring}, which this config "
                                         f"does not load; add the plugin"):
        tfa_sim.load_config(overrides={"kernel.exp_ring": "twice"})


def test_what_a_failed_plugin_registered_through_another_module_is_taken_back(tmp_path, monkeypatch):
    (tmp_path / "ring_helper.py").write_text("from tfa_sim.api.plugins import register\n"
                                             "def add(name, n):\n"
                                             "    register('exp_ring', name, lambda s: n, 'a helper', 'a test')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    bad = tmp_path / "via_helper.py"
    bad.write_text("import ring_helper\nring_helper.add('helped', 6)\nraise RuntimeError('after the helper')\n")
    with pytest.raises(InputError, match=r"failed to import: RuntimeError: after the helper \(line 3 of "):
        tfa_sim.load_config(plugins=[bad])
    assert "helped" not in choices.REGISTRIES["exp_ring"].values


@pytest.mark.parametrize("body, needle", [
    ("register('exp_ring', 'none_left', lambda s: 0, 'd', 's')\n", "answered 0; it must answer a whole number of "
                                                                    "entries ≥ 1"),
    ("register('exp_ring', 'broken', lambda s: 1 // 0, 'd', 's')\n", "raised ZeroDivisionError"),
    ("register('exp_ring', 'ruled', lambda s: 4, 'd', 's', rules=(lambda: None,))\n", "its rule <lambda> raised "
                                                                                      "TypeError"),
    ("register('exp_ring', 'yes', lambda s: 4, 'd', 's', rules=(lambda c: True,))\n", "its rule <lambda> answered "
                                                                                      "True"),
    ("register('prefetch', 'minus', lambda c: -5, 'd', 's')\n", "answered -5; it must answer a whole number of rows"),
])
def test_a_value_that_breaks_its_contract_when_used_is_one_line_naming_it(body, needle, tmp_path, capsys):
    path = write_plugin(tmp_path / "contract.py", body)
    key, name = body.split("'")[1], body.split("'")[3]
    assert main(["run", *SMALL, "--plugin", str(path), "--set", f"kernel.{key}={name}", "--out",
                 str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err and f"kernel.{key} = {name} ({path})" in err, err


@pytest.mark.parametrize("body", ["register('ub_union', 'true', object(), 'd', 's')\n",
                                  "register('prefetch', True, lambda c: 0, 'd', 's')\n"])
def test_true_and_false_are_a_yes_no_choices_values_only(body, tmp_path):
    with pytest.raises(InputError, match="true and false are the values of a yes/no choice only"):
        tfa_sim.load_config(plugins=[write_plugin(tmp_path / "spelled.py", body)])


def test_a_sweep_whose_base_plugin_fails_is_refused_before_any_point(tmp_path, capsys):
    bad = tmp_path / "raises.py"
    bad.write_text("raise RuntimeError('boom at import')\n")
    spec = tmp_path / "s.toml"
    spec.write_text('[base.case]\ns0 = 512\ns1 = 2048\n[axes]\n"schedule.qk_preload" = [2, 3]\n')
    assert main(["sweep", str(spec), "--plugin", str(bad), "--no-progress", "--no-plots", "--out",
                 str(tmp_path / "o")]) == 2
    assert "[base] kernel.plugins: plugin" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_a_bundle_loads_its_bases_plugins_and_its_own(tmp_path):
    """mine.toml (a plugin's ring) ← grand.toml (another plugin's value): both values are the config's."""
    write_plugin(tmp_path / "ring_six.py", "register('exp_ring', 'six', lambda s: 6, 'six entries', 'a test')\n")
    write_plugin(tmp_path / "rows_one.py", "register('gu_rows', 'one_call', lambda kf: 1, 'one call', 'a test')\n")
    (tmp_path / "mine.toml").write_text('base = "manual"\n[kernel]\nplugins = ["ring_six.py"]\nexp_ring = "six"\n')
    (tmp_path / "grand.toml").write_text('base = "mine.toml"\n[kernel]\nplugins = ["rows_one.py"]\n'
                                         'gu_rows = "one_call"\n')
    kernel = tfa_sim.load_config(overrides={"kernel.build": str(tmp_path / "grand.toml")}).kernel
    assert (kernel.exp_ring, kernel.gu_rows) == ("six", "one_call")


def test_a_long_chain_of_bases_is_not_called_a_loop(tmp_path):
    from tfa_sim.spec.builds import MAX_BASES

    (tmp_path / "c0.toml").write_text('base = "dsl"\n')
    for n in range(1, MAX_BASES + 2):
        (tmp_path / f"c{n}.toml").write_text(f'base = "c{n - 1}.toml"\n')
    with pytest.raises(InputError, match=f"more than {MAX_BASES}: start from a bundle nearer the build"):
        tfa_sim.load_config(overrides={"kernel.build": str(tmp_path / f"c{MAX_BASES + 1}.toml")})


def test_best_toml_names_a_bundle_by_its_absolute_path(tmp_path, monkeypatch):
    from tfa_sim.explore.tune.report import config_toml

    monkeypatch.chdir(tmp_path)
    assert f'build = "{tmp_path / "bund" / "mine.toml"}"' in config_toml({"kernel": {"build": "bund/mine.toml"}}, "c")


@pytest.mark.parametrize("body, needle", [
    ("register('exp_ring', 'x', lambda s: 4, 'd', 's', rules=None)\n", "rules must be a tuple of functions"),
    ("def broken(:\n", "SyntaxError: invalid syntax (line 2 of {path})"),
])
def test_a_plugins_mistake_is_named_where_it_is(body, needle, tmp_path):
    path = write_plugin(tmp_path / "mistake.py", body)
    with pytest.raises(InputError) as err:
        tfa_sim.load_config(plugins=[path])
    assert needle.format(path=path) in str(err.value) and "tfa_sim/api/plugins.py" not in str(err.value)


def test_the_tune_report_does_not_count_the_plugins_as_a_change():
    from tfa_sim.explore.tune.report import changes

    base = tfa_sim.load_config().to_dict()
    loaded = {**base, "kernel": {**base["kernel"], "plugins": ["/x/ring.py"], "exp_ring": 6}}
    assert changes(loaded, base) == {"kernel.exp_ring": 6}
