"""A sweep constraint that cannot be evaluated stops the sweep, naming it, before any point runs (CLI and API)."""
from __future__ import annotations

import subprocess
import sys

import pytest

import tfa_sim

#: Constraints that raise on the sweep's points, and what the one line says about each.
BROKEN = {
    "modulo_by_zero": ("schedule.qk_preload % 0 == 0", "cannot be evaluated (integer modulo by zero)"),
    "not_a_key": ("schedule.qk_prelaod < 4", "unknown config key 'schedule.qk_prelaod'; did you mean 'qk_preload'?"),
    "string_against_number": ("hardware.preset < 3", "cannot be evaluated"),
    "zero_on_one_point": ("case.s1 // (schedule.qk_preload - 4) > 0", "cannot be evaluated (integer division"),
}
AXES = {"schedule.qk_preload": [2, 4]}


def spec_file(tmp_path, constraint: str):
    path = tmp_path / "sweep.toml"
    path.write_text(f'[sweep]\nconstraints = ["{constraint}"]\n[base.case]\ns1 = 512\n[axes]\n'
                    '"schedule.qk_preload" = [2, 4]\n')
    return path


@pytest.mark.parametrize("name", BROKEN)
def test_the_command_exits_2_naming_the_constraint_before_any_point(tmp_path, name):
    constraint, needle = BROKEN[name]
    r = subprocess.run([sys.executable, "-m", "tfa_sim", "sweep", str(spec_file(tmp_path, constraint)), "--out",
                        str(tmp_path / "out"), "--jobs", "1", "--no-progress"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"tfa-sim: error: constraint '{constraint}'")
    assert needle in r.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()


@pytest.mark.parametrize("name", BROKEN)
def test_the_api_raises_naming_the_constraint_before_any_point(tmp_path, monkeypatch, name):
    constraint, needle = BROKEN[name]
    monkeypatch.setattr("tfa_sim.explore.sweep.execute.WorkerPool", None)  # a point that ran would fail otherwise
    with pytest.raises(tfa_sim.TfaSimError) as raised:
        tfa_sim.sweep({"sweep": {"constraints": [constraint]}, "base": {"case": {"s1": 512}}, "axes": AXES},
                      out=tmp_path / "out")
    assert str(raised.value).startswith(f"constraint '{constraint}'") and needle in str(raised.value)
    assert raised.value.exit_code == 2


def test_a_constraint_is_not_evaluated_on_a_point_of_the_wrong_type(tmp_path):
    """``"four"`` is recorded as an illegal point, as before; the constraint holds or fails on the others."""
    spec = {"sweep": {"constraints": ["schedule.qk_preload < 4"]}, "base": {"case": {"s1": 512}},
            "axes": {"schedule.qk_preload": [2, 4, "four"]}}
    points = tfa_sim.sweep(spec)
    assert list(points["status"]) == ["ok", "excluded", "illegal"]
