"""Sweep files: every hostile input is one line and exit 2 before anything runs; axes, ranges, point numbering."""
from __future__ import annotations

import itertools
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sweep import TINY, run_main, write

from tfa_sim.explore.sweep import load_sweep, point_at, read_results
from tfa_sim.explore.sweep.points import indices
from tfa_sim.explore.sweep.spec import axis_values

AXIS = '[axes]\n"schedule.qk_preload" = [2, 4]\n'

HOSTILE = {
    "axis_number": ('[axes]\n"case.s1" = 5\n', 'sweep axis case.s1 = 5: give a non-empty list'),
    "axes_number": ("axes = 3\n", "[axes] = 3 is not a table"),
    "base_number": ("base = 1\n" + AXIS, "[base] = 1 must be a table of config sections"),
    "base_section_list": ("[base]\ncase = []\n" + AXIS, "[base] case = [] must be a table"),
    "base_unknown_key": ("[base.case]\nheda = 1\n" + AXIS, "unknown config key 'case.heda'; did you mean 'head'?"),
    "base_unknown_section": ("[base.tile]\nx = 1\n" + AXIS, "unknown config section 'tile'"),
    "base_datetime": ("[base.case]\nname = 1979-05-27\n" + AXIS, "config values are numbers, booleans or strings"),
    "base_numerics": ("[base.numerics]\nenabled = true\n" + AXIS, "set [sweep] numerics"),
    "axes_missing": ("[sweep]\n", "[axes] is empty"),
    "axes_empty": ("[axes]\n", "[axes] is empty"),
    "empty_list": ('[axes]\n"schedule.qk_preload" = []\n', "give a non-empty list"),
    "no_section": ('[axes]\n"qk_preload" = [1]\n', "use a quoted section.key"),
    "unknown_axis": ('[axes]\n"schedule.preload" = [1]\n', "did you mean 'qk_preload'?"),
    "datetime_value": ('[axes]\n"case.s1" = [1979-05-27]\n', "is not a number, boolean or string"),
    "table_value": ('[axes]\n"case.s1" = [{a = 1}]\n', "is not a number, boolean or string"),
    "duplicate": ('[axes]\n"case.s1" = [256, 512, 256]\n', "value 256 is listed twice"),
    "step_0": ('[axes]\n"case.s1" = {start = 256, stop = 512, step = 0}\n', "step = 0 must be > 0"),
    "step_negative": ('[axes]\n"case.s1" = {start = 512, stop = 256, step = -256}\n', "step = -256 must be > 0"),
    "factor_1": ('[axes]\n"case.s1" = {start = 256, stop = 512, factor = 1}\n', "factor = 1 must be > 1"),
    "factor_half": ('[axes]\n"case.s1" = {start = 256, stop = 512, factor = 0.5}\n', "must be > 1"),
    "factor_from_0": ('[axes]\n"case.s1" = {start = 0, stop = 512, factor = 2}\n', "start = 0 > 0"),
    "start_string": ('[axes]\n"case.s1" = {start = "a", stop = 512, step = 1}\n', "start = 'a' must be a finite"),
    "stop_inf": ('[axes]\n"case.s1" = {start = 1, stop = inf, step = 1}\n', "stop = inf must be a finite"),
    "range_keys": ('[axes]\n"case.s1" = {start = 1, stop = 2, step = 1, factor = 2}\n', "give exactly"),
    "range_empty": ('[axes]\n"case.s1" = {start = 512, stop = 256, step = 1}\n', "gives no values; swap them"),
    "range_too_long": ('[axes]\n"case.s1" = {start = 0, stop = 1e18, step = 1}\n', "more than [sweep] max_points"),
    "step_too_small": ('[axes]\n"numerics.dump_limit_gib" = {start = 1e15, stop = 2e15, step = 0.001}\n',
                      "the step is too small"),
    "grid_too_big": ("[axes]\n" + "".join(f'"schedule.{k}" = {{start = 1, stop = 1000, step = 1}}\n' for k in
                                          ("l1_q", "l1_k", "l1_p", "l1_v", "l0a", "l0b", "l0c", "ub_src")),
                     "the grid has 1000000000000000000000000 points > [sweep] max_points = 100000; narrow the axes"),
    "grid_over_max": ('[sweep]\nmax_points = 3\n[axes]\n"schedule.qk_preload" = [1, 2]\n"case.s1" = [256, 512]\n',
                      "the grid has 4 points > [sweep] max_points = 3"),
    "constraint_number": ("[sweep]\nconstraints = 3\n" + AXIS, "constraints = 3 must be a string or a list"),
    "constraint_list_of_numbers": ("[sweep]\nconstraints = [1]\n" + AXIS, "must be a string or a list of strings"),
    "constraint_nested": ('[sweep]\nconstraints = [["a"]]\n' + AXIS, "must be a string or a list of strings"),
    "constraint_syntax": ('[sweep]\nconstraints = ["import os"]\n' + AXIS, "does not parse"),
    "constraint_call": ('[sweep]\nconstraints = ["__import__(\'os\')"]\n' + AXIS, "only numbers, section.key"),
    "constraint_power": ('[sweep]\nconstraints = ["schedule.l1_q ** 99999999"]\n' + AXIS, "only numbers"),
    "constraint_key": ('[sweep]\nconstraints = ["schedule.qk_prelaod < 3"]\n' + AXIS, "did you mean 'qk_preload'?"),
    "constraint_name": ('[sweep]\nconstraints = ["x < 3"]\n' + AXIS, "only numbers, section.key"),
    "constraint_long": ('[sweep]\nconstraints = ["' + "1 + " * 200 + '1"]\n' + AXIS, "longer than 500 characters"),
    "budget_string": ('[sweep]\nmode = "random"\nbudget = "10"\n' + AXIS, "budget = '10' must be an integer"),
    "budget_float": ('[sweep]\nmode = "random"\nbudget = 1.5\n' + AXIS, "budget = 1.5 must be an integer"),
    "budget_bool": ('[sweep]\nmode = "random"\nbudget = true\n' + AXIS, "budget = True must be an integer"),
    "budget_missing": ('[sweep]\nmode = "random"\n' + AXIS, "needs 1 ≤ budget ≤ max_points"),
    "budget_over_max": ('[sweep]\nmode = "random"\nbudget = 11\nmax_points = 10\n' + AXIS, "got budget = 11"),
    "seed_string": ('[sweep]\nseed = "x"\n' + AXIS, "seed = 'x' must be an integer"),
    "mode_unknown": ('[sweep]\nmode = "sobol"\n' + AXIS, "mode = 'sobol': use one of grid, random"),
    "mode_list": ("[sweep]\nmode = []\n" + AXIS, "mode = []: use one of grid, random"),
    "numerics_string": ('[sweep]\nnumerics = "false"\n' + AXIS, "numerics = 'false' must be true or false"),
    "numerics_int": ("[sweep]\nnumerics = 1\n" + AXIS, "numerics = 1 must be true or false"),
    "metric_unknown": ('[sweep]\nmetric = "speed"\n' + AXIS, "metric = 'speed': use one of time_us"),
    "metric_number": ("[sweep]\nmetric = 5\n" + AXIS, "metric = 5: use one of"),
    "max_points_0": ("[sweep]\nmax_points = 0\n" + AXIS, "max_points = 0 must be an integer ≥ 1"),
    "timeout_negative": ("[sweep]\npoint_timeout = -1\n" + AXIS, "point_timeout = -1 must be a number ≥ 0"),
    "timeout_nan": ("[sweep]\npoint_timeout = nan\n" + AXIS, "point_timeout = nan must be a number"),
    "sweep_key": ("[sweep]\nbudgte = 3\n" + AXIS, "unknown [sweep] key(s) ['budgte']"),
    "sweep_number": ("sweep = 3\n" + AXIS, "[sweep] = 3 must be a table"),
    "unknown_table": ("[sweeps]\n" + AXIS, "unknown table(s) ['sweeps']"),
    "toml_syntax": ("[axes\n", "does not parse"),
    "toml_nesting": ("x = " + "[" * 5000 + "]" * 5000 + "\n", "does not parse"),
}


@pytest.mark.parametrize("text, needle", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_sweep_file_is_one_line_exit_2(tmp_path, text, needle):
    code, out, err = run_main("sweep", write(tmp_path / "bad.toml", text), "--out", tmp_path / "o", "--no-progress")
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()  # refused before the output directory is made


def test_not_utf8_missing_directory_and_unreadable_files(tmp_path, monkeypatch):
    cases = {tmp_path / "latin1.toml": "is not UTF-8 text", tmp_path / "missing.toml": "not found",
             tmp_path: "is not a regular file"}
    (tmp_path / "latin1.toml").write_bytes("# caf\xe9\n".encode("latin-1") + AXIS.encode())
    for path, needle in cases.items():
        code, _, err = run_main("sweep", path, "--out", tmp_path / "o")
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    locked = write(tmp_path / "locked.toml", AXIS)
    real_read = pathlib.Path.read_bytes

    def read_bytes(self):  # root ignores chmod 000, so refuse the read the way the OS would
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", read_bytes)
    code, _, err = run_main("sweep", locked, "--out", tmp_path / "o")
    assert code == 2 and "cannot read sweep file" in err and "Permission denied" in err, err


@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_jobs_below_one_is_refused(tmp_path, jobs):
    code, _, err = run_main("sweep", write(tmp_path / "s.toml", TINY), "--out", tmp_path / "o", "--jobs", jobs)
    assert code == 2 and f"--jobs {jobs}: give at least 1 worker" in err and len(err.splitlines()) == 1


def test_values_the_config_rejects_are_illegal_points_not_errors(tmp_path):
    spec = write(tmp_path / "mixed.toml", '[base.case]\ns0 = 128\ns1 = 256\n'
                 '[axes]\n"schedule.qk_preload" = [2, "four", 4.5, true]\n')
    code, out, err = run_main("sweep", spec, "--out", tmp_path / "o", "--jobs", "1", "--no-progress")
    assert code == 0, err
    rows = {repr(r["overrides"]["schedule.qk_preload"]): r for r in read_results(tmp_path / "o" / "results.jsonl")}
    assert rows["2"]["status"] == "ok"
    for value in ("'four'", "4.5", "True"):
        assert rows[value]["status"] == "illegal"
        assert rows[value]["message"] == f"config error: schedule.qk_preload = {value} must be an integer " \
                                         f"(e.g. qk_preload = 4)"


def test_ranges_expand_inclusively_without_float_drift():
    assert axis_values("case.s1", {"start": 1024, "stop": 16384, "factor": 2}) == [1024, 2048, 4096, 8192, 16384]
    assert axis_values("case.s1", {"start": 256, "stop": 1000, "step": 256}) == [256, 512, 768]
    assert axis_values("numerics.dump_limit_gib", {"start": 0.1, "stop": 0.5, "step": 0.1}) == [0.1, 0.2, 0.3, 0.4,
                                                                                                 0.5]


def test_random_mode_samples_a_huge_grid_without_building_it(tmp_path):
    axes = "".join(f'"schedule.{k}" = {{start = 1, stop = 100000, step = 1}}\n' for k in ("l1_q", "l1_k", "l1_p",
                                                                                        "l1_v", "l0a", "ub_src"))
    spec = write(tmp_path / "r.toml", f'[sweep]\nmode = "random"\nbudget = 50\nseed = 3\n[axes]\n{axes}')
    sweep = load_sweep(spec)
    assert sweep.size == 100000 ** 6
    chosen = indices(sweep)
    assert len(set(chosen)) == 50 and chosen == sorted(chosen) and all(0 <= i < sweep.size for i in chosen)
    assert chosen == indices(load_sweep(spec))  # the seed decides
    other = load_sweep(write(tmp_path / "r2.toml", spec.read_text().replace("seed = 3", "seed = 4")))
    assert indices(other) != chosen
    # the overrides of point i are the digits of i in the mixed radix of the axis lengths
    for i in chosen[:5]:
        digits = [(i // 100000 ** (5 - d)) % 100000 for d in range(6)]
        assert list(point_at(sweep, i)["overrides"].values()) == [d + 1 for d in digits]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_point_numbers_follow_the_grid_order(lengths):
    """For every small grid, point i is the i-th combination of itertools.product over the axes."""
    keys = ["schedule.l1_q", "schedule.l1_k", "schedule.l1_p", "schedule.l1_v"][:len(lengths)]
    text = "[axes]\n" + "".join(f'"{k}" = {list(range(1, n + 1))}\n' for k, n in zip(keys, lengths))
    sweep = _load_text(text)
    expected = list(itertools.product(*[range(1, n + 1) for n in lengths]))
    got = [tuple(point_at(sweep, i)["overrides"].values()) for i in indices(sweep)]
    assert got == expected
    assert len({point_at(sweep, i)["key"] for i in indices(sweep)}) == len(expected)


def _load_text(text: str):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return load_sweep(write(pathlib.Path(tmp) / "s.toml", text))

