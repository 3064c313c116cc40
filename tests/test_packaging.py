"""What a build ships (issue 34): setuptools finds every package and data file of the tree by itself.

The editable install the tests run under reads the checkout, so it cannot see a file the wheel leaves out; these
tests ask setuptools what it would ship, without building."""
from __future__ import annotations

import shutil

from smoke.shipped import ROOT, missing, sdist_needs, setuptools_lists, tracked, wheel_needs

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
