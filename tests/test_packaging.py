"""What a build ships (issue 34): setuptools finds every package and data file of the tree by itself, and the smoke
that .ci/run runs against the built wheel and sdist (tests/smoke/) covers every subcommand and API function.

The editable install the tests run under reads the checkout, so it cannot see a file the wheel leaves out; these
tests ask setuptools what it would ship, without building, and .ci/run checks the real wheel and sdist."""
from __future__ import annotations

import argparse
import ast
import inspect
import re
import shutil

from smoke.shipped import ROOT, missing, sdist_needs, setuptools_lists, tracked, wheel_needs

import tfa_sim
from tfa_sim.cli import build_parser
from tfa_sim.spec.extras import EXTRA_OF

SMOKE = ROOT / "tests" / "smoke"
#: Added to a copy of the tree: a new subpackage two levels down and a new kind of config file.
NEW_FILES = ("tfa_sim/explore/newer/__init__.py", "tfa_sim/explore/newer/deeper/__init__.py",
             "tfa_sim/explore/newer/deeper/module.py", "configs/newer/table.json")


def test_setuptools_ships_every_module_config_and_native_source_even_new_ones(tmp_path):
    files = tracked()
    for name in [*files, *NEW_FILES]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if name in NEW_FILES:
            (tmp_path / name).write_text("{}\n" if name.endswith(".json") else '"""A module added later."""\n')
        else:
            shutil.copy2(ROOT / name, tmp_path / name)
    wheel, sdist = setuptools_lists(tmp_path)
    everything = [*files, *NEW_FILES]
    assert missing(wheel, wheel_needs(everything)) == []
    assert missing(sdist, sdist_needs(everything)) == []
    assert {"tfa_sim/explore/tune/__init__.py", "tfa_sim/explore/newer/deeper/module.py",
            "tfa_sim/configs/hw/910b2.toml", "tfa_sim/configs/newer/table.json"} <= set(wheel)
    assert {"native/build_native.py", "native/tfa_native.c", "native/tfa_native.h", "configs/hw/910b2.toml",
            "MANIFEST.in"} <= set(sdist)
    assert not any(f.startswith("tests/") for f in sdist), "the sdist ships no half of the tests"


def test_a_module_config_or_extension_left_out_is_named():
    files = tracked()
    needed = wheel_needs(files)
    shipped = needed - {"tfa_sim/explore/tune/__init__.py", "tfa_sim/configs/hw/910b2.toml"}
    shipped |= {"tfa_sim/backends/_native.abi3.so"}
    assert missing(shipped, needed, ("tfa_sim/backends/_native.", "tfa_sim/_engine__mypyc.")) == [
        "tfa_sim/configs/hw/910b2.toml", "tfa_sim/explore/tune/__init__.py", "tfa_sim/_engine__mypyc.*.so"]
    assert "tfa_sim/configs/calibration/points.csv" in needed and "tfa_sim/spec/config.py" in needed


def subcommands() -> set[str]:
    """The subcommands of ``tfa-sim``, as its parser defines them."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_every_subcommand_has_a_smoke_line():
    lines = re.findall(r"^smoke +(\S+) +(\S+) +(tfa-sim|python) (\S+)", (SMOKE / "smoke.sh").read_text(), re.M)
    smoked = {command for name, _, program, command in lines if program == "tfa-sim" and name == command}
    assert {"run", "tune", "calibrate"} <= subcommands()
    assert subcommands() - smoked == set(), "add a `smoke NAME FILE tfa-sim NAME …` line to tests/smoke/smoke.sh"
    assert any(name == "api" for name, *_ in lines)


def test_the_core_smoke_runs_every_core_subcommand_and_refuses_each_extra():
    text = (SMOKE / "core.sh").read_text()
    smoked = set(re.findall(r"^smoke +\S+ +\S+ +tfa-sim (\S+)", text, re.M))
    assert subcommands() - smoked == {"profile"}, "only profile (its charts: [plots]) needs an extra"
    assert set(re.findall(r"^refused +(\S+)", text, re.M)) == set(EXTRA_OF.values())


def test_the_api_smoke_calls_every_function_tfa_sim_exports():
    tree = ast.parse((SMOKE / "api.py").read_text(encoding="utf-8"))
    called = {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "tfa_sim"}
    exported = {name for name in tfa_sim.__all__ if inspect.isfunction(getattr(tfa_sim, name))}
    assert {"load_config", "run", "check", "sweep", "tune"} <= exported
    assert exported - called == set(), "call it in tests/smoke/api.py"


def test_the_smoke_files_are_where_smoke_sh_and_api_py_expect_them():
    text = "".join((SMOKE / name).read_text() for name in ("smoke.sh", "core.sh", "api.py"))
    for name in re.findall(r'HERE(?:/| / ")(\w+\.\w+)', text):
        assert (SMOKE / name).is_file(), name
    assert set(re.findall(r'HERE(?:/| / ")(\w+\.\w+)', text)) >= {"sweep.toml", "points.csv", "api.py", "common.sh"}
