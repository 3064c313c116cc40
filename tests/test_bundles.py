"""A build is data (docs/kernel.md, "Builds"): bundle files of design choices, each choice carried alone onto
another build runs or is refused in one line, legality is per choice, and no code names a build."""
from __future__ import annotations

import ast
import itertools
import shutil
from pathlib import Path

import pytest

import tfa_sim
from tfa_sim.spec.builds import BUILDS_DIR, SHIPPED, load_bundle
from tfa_sim.spec.config import CHOICE_KEYS, SECTION_TYPES, KernelConfig
from tfa_sim.spec.errors import InputError, ScheduleError
from tfa_sim.spec.load import build_config

PACKAGE = Path(tfa_sim.__file__).parent


def cycles(overrides, case="case_float_H_128_S0_128_S1_1024", fold=False):
    return tfa_sim.run(case=case, overrides={"numerics.enabled": False, **overrides}, event_log=False,
                       fold=fold).total_cycles


def test_the_shipped_bundles_are_the_builds_the_loader_lists():
    assert sorted(p.stem for p in BUILDS_DIR.glob("*.toml")) == sorted(SHIPPED)


def test_the_schemas_kernel_defaults_are_the_manual_bundles_choices():
    """Config() is the manual build: the dataclass defaults and manual.toml say the same."""
    defaults = {key: getattr(KernelConfig(), key) for key in CHOICE_KEYS}
    assert load_bundle("manual").choices == defaults


@pytest.mark.parametrize("build", SHIPPED)
def test_the_shipped_bundles_say_every_choice(build):
    """A bundle may leave a choice to its default; the shipped ones say each explicitly."""
    assert set(load_bundle(build).choices) == set(CHOICE_KEYS)


@pytest.mark.parametrize("build", SHIPPED)
@pytest.mark.parametrize(("case", "extra"), [({"case.s0": 2048, "case.s1": 4096}, {}),
                                             ({"case.s0": 256, "case.s1": 32768}, {}),
                                             ({"case.s0": 1, "case.s1": 8192, "case.heads": 4},
                                              {"schedule.s1_split": 3})])
def test_a_copy_of_a_shipped_bundle_runs_as_the_named_build(build, case, extra, tmp_path, monkeypatch):
    """kernel.build = "path/to/copy.toml" (relative to the working directory): the same cycles as the named
    build, its [[when]] defaults (the port's TILE_S1 512 from S1 = 32768) included."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    shutil.copy(BUILDS_DIR / f"{build}.toml", tmp_path / "mine" / "copy.toml")
    named = build_config({"kernel": {"build": build}, "case": {k[5:]: v for k, v in case.items()}})
    copied = build_config({"kernel": {"build": "mine/copy.toml"}, "case": {k[5:]: v for k, v in case.items()}})
    assert (copied.tiling, copied.schedule) == (named.tiling, named.schedule)
    assert vars(copied.kernel) == {**vars(named.kernel), "build": "mine/copy.toml"}
    settings = {**case, **extra}
    assert cycles({**settings, "kernel.build": "mine/copy.toml"}) == cycles({**settings, "kernel.build": build})


@pytest.mark.parametrize(("text", "needle"), [
    ("{all}\nstage_order2 = 'x'\n", "unknown key kernel.stage_order2; did you mean 'stage_order'"),
    ("{all}", None),
    ("{bad_value}", "kernel.talloc = 'after_store' is not one of before_store, before_load"),
    ("{all}\nbuild = 'dsl'\n", "names none: drop kernel.build"),
    ("{all}\n[hardware]\npreset = '910b1'\n", "unknown section [hardware]"),
    ("{all}\n[schedule]\nqk_preload = 'three'\n", "schedule.qk_preload = 'three' must be an integer"),
    ("{all}\n[[when]]\ns1_at_least = 0\n", "s1_at_least = 0 must be an integer ≥ 1"),
    ("{all}\n[[when]]\ntiling = { tile_s1 = 512 }\n", "each [[when]] holds s1_at_least"),
    ("{all}\n[[when]]\ns1_at_least = 4\ncase = { s1 = 1 }\n", "each [[when]] holds s1_at_least"),
    ("[kernel\n", "does not parse"),
])
def test_a_bad_bundle_is_refused_in_one_line_naming_the_file(text, needle, tmp_path):
    manual = (BUILDS_DIR / "manual.toml").read_text().split("[listings]")[0]  # its [kernel] table, last
    text = text.replace("{all}", manual).replace("{bad_value}", manual.replace('"before_store"', '"after_store"'))
    path = tmp_path / "bundle.toml"
    path.write_text(text)
    if needle is None:  # the manual bundle itself, as a file
        assert build_config({"kernel": {"build": str(path)}}).kernel.launch_grid == "blocks"
        return
    with pytest.raises(InputError) as err:
        build_config({"kernel": {"build": str(path)}})
    message = str(err.value)
    assert needle in message and str(path) in message and "\n" not in message, message


@pytest.mark.parametrize(("build", "needle"), [("mnual", "did you mean 'manual'"), ("no/such.toml", "no/such.toml"),
                                               (7, "must be a string")])
def test_an_unknown_build_is_refused_in_one_line(build, needle):
    with pytest.raises(InputError, match=needle):
        build_config({"kernel": {"build": build}})


def test_a_bundle_that_leaves_choices_out_takes_their_defaults(tmp_path):
    """Bundles written before a choice existed keep running: a choice left out is today's behaviour."""
    path = tmp_path / "old.toml"
    path.write_text("[kernel]\nlaunch_grid = 'persistent'\nvec_barriers = 'insert_sync'\n")  # and an old name
    config = build_config({"kernel": {"build": str(path)}})
    kernel = config.kernel
    assert (kernel.launch_grid, config.listings.compute_p) == ("persistent", "port")  # vec_barriers' new home
    assert {key: getattr(kernel, key) for key in CHOICE_KEYS if key != "launch_grid"} == \
        {key: getattr(KernelConfig(), key) for key in CHOICE_KEYS if key != "launch_grid"}


@pytest.mark.parametrize("base", ["dsl", "{dir}/dsl_copy.toml"])
def test_a_bundle_may_start_from_another_and_set_only_what_it_changes(base, tmp_path):
    """base = "dsl" (or a path, relative to the bundle): the base's settings under the bundle's own."""
    shutil.copy(BUILDS_DIR / "dsl.toml", tmp_path / "dsl_copy.toml")
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "mine.toml"
    path.write_text(f"base = {base.format(dir='..')!r}\n[kernel]\ngu_rows = 'whole'\n[schedule]\nqk_preload = 2\n")
    mine = build_config({"kernel": {"build": str(path)}, "case": {"s1": 32768}})
    dsl = build_config({"kernel": {"build": "dsl"}, "case": {"s1": 32768}})
    assert vars(mine.kernel) == {**vars(dsl.kernel), "build": str(path), "gu_rows": "whole"}
    assert mine.schedule.qk_preload == 2 and mine.schedule.l1_p == dsl.schedule.l1_p == 1
    assert mine.tiling.tile_s1 == dsl.tiling.tile_s1 == 512  # the base's [[when]] applies


def test_bundles_whose_bases_loop_are_refused(tmp_path):
    (tmp_path / "a.toml").write_text("base = 'b.toml'\n")
    (tmp_path / "b.toml").write_text("base = 'a.toml'\n")
    with pytest.raises(InputError, match="leads back to a bundle already read"):
        build_config({"kernel": {"build": str(tmp_path / "a.toml")}})


def test_the_cli_refuses_a_bad_bundle_with_exit_2(tmp_path, capsys):
    from tfa_sim.cli import main

    path = tmp_path / "b.toml"
    path.write_text((BUILDS_DIR / "dsl.toml").read_text().replace('exp_ring = "preload"', 'exp_ring = "deep"'))
    assert main(["run", "--no-numerics", "--set", f"kernel.build={path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "kernel.exp_ring = 'deep' is not one of fifo, preload, 1…64" in err


# ---- mixing: each choice of one build carried alone onto another --------------------------------------------
def carried(source: str, target: str) -> list[tuple[str, object]]:
    """The (key, value) of each design choice and section default where ``source`` differs from ``target`` (a
    key a bundle does not set has the schema's default)."""
    a, b = load_bundle(source).defaults(4096), load_bundle(target).defaults(4096)

    def value(settings, section, key):
        return settings.get((section, key), getattr(SECTION_TYPES[section](), key))

    return [(f"{s}.{k}", value(a, s, k)) for s, k in sorted({*a, *b}) if value(a, s, k) != value(b, s, k)]


#: The rules a carried choice may be refused by, each naming the choice (its registry value's rules).
RULES = ("kernel.stage_order = pv_qk", "kernel.launch_grid = persistent", "kernel.masks = false",
         "UB holds")  # the port's 8 local slots on a build whose consumers load into them
#: The one rule of every exp ring that is diagnosed when it happens (tfa_sim.buffers.fifo.Ring.write, exit 3).
RING = "l1_exp_max slot"


@pytest.mark.parametrize(("source", "target"), [p for p in itertools.permutations(SHIPPED, 2)])
def test_each_choice_carried_alone_onto_another_build_runs_or_is_refused_by_its_rule(source, target):
    """Every choice where two builds differ, carried alone: it runs (a timing-only 1024 × 4096 launch of 8 units
    on 4 cores, and 2 tiles past the prologue for the exp ring), or legality refuses it in one line naming the
    choice's rule — never a deadlock or a traceback."""
    base = {"kernel.build": target, "case.s0": 1024, "case.s1": 4096, "hardware.cores": 4}
    ran, refused = [], []
    for key, value in carried(source, target):
        try:
            result = cycles({**base, key: value})
        except InputError as exc:
            assert "\n" not in str(exc) and any(rule in str(exc) for rule in RULES), str(exc)
            refused.append(key)
        except ScheduleError as exc:  # the exp ring's overwrite (its size, or an order running P further ahead)
            assert key in ("kernel.exp_ring", "kernel.stage_order") and RING in str(exc), (key, str(exc))
            assert "give kernel.exp_ring more than" in str(exc), str(exc)
            refused.append(key)
        else:
            assert result > 0
            ran.append(key)
    assert ran, (source, target)
    if target == "manual":  # the line: at least half of what differs from the port runs on the manual kernel
        assert len(ran) >= len(refused), (ran, refused)


def test_a_choice_carried_onto_a_build_changes_what_its_rule_says():
    """The port's exp ring (qk_preload entries) on the manual order: compute_p runs qk_preload tiles ahead of
    compute_gu and overwrites an entry before GU reads it (exit 3, diagnosed); with the port's order it runs only
    qk_preload − 1 ahead, as in the port; a ring of one more entry is safe on the manual order too; a block too
    short for the overwrite runs."""
    long = {"case.s1": 4096}
    with pytest.raises(ScheduleError, match="runs compute_p 4 tiles ahead of compute_gu and the ring has 4 entries"):
        cycles({**long, "kernel.exp_ring": "preload"})
    assert cycles({**long, "kernel.exp_ring": "preload", "kernel.stage_order": "pv_qk"}) > 0
    assert cycles({**long, "kernel.exp_ring": 5}) == cycles(long)  # 5 entries: never overwritten, the same cycles
    assert cycles({"kernel.exp_ring": "preload", "case.s1": 1280}) > 0  # 5 tiles: tile 1 + 4 does not exist


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"kernel.build": "dsl", "kernel.masks": True, "case.causal": True, "case.s0": 512, "case.s1": 512}, "runs"),
    ({"kernel.launch_grid": "persistent", "schedule.block_order": "zigzag"}, "contiguous range"),
    ({"kernel.stage_order": "pv_qk", "schedule.qk_preload": 0}, "qk_preload = 0"),
    ({"kernel.build": "dsl", "kernel.exp_ring": "fifo", "schedule.qk_preload": 0}, "qk_preload = 0"),
])
def test_legality_is_written_per_choice(overrides, expected):
    if expected == "runs":
        assert cycles(overrides) > 0
        return
    with pytest.raises(InputError, match=expected):
        cycles(overrides)


def test_the_interval_is_widened_by_choice_and_value():
    """A value some measured launch had, carried onto another build: no widening; a value none had: one factor
    per such choice, each named."""
    plain = tfa_sim.run(overrides={"numerics.enabled": False}, event_log=False).summary
    mixed = tfa_sim.run(overrides={"numerics.enabled": False, "kernel.gu_rows": "slices"}, event_log=False).summary
    new = tfa_sim.run(overrides={"numerics.enabled": False, "kernel.cube_handoff": "unit_flag",
                                 "kernel.ub_union": False, "schedule.ub_src": 1}, event_log=False).summary
    assert not any("kernel." in r for r in plain["interval_reasons"] + mixed["interval_reasons"])
    assert mixed["interval_half_width"] == plain["interval_half_width"]
    assert "kernel.cube_handoff = unit_flag never measured (measured: flags)" in new["interval_reasons"]
    assert "kernel.ub_union = false never measured (measured: true)" in new["interval_reasons"]
    assert new["interval_half_width"] == pytest.approx(plain["interval_half_width"] * 1.25 ** 2, abs=2e-4)
    assert not any("ub_src" in r for r in new["interval_reasons"])  # not a knob the fit lists


# ---- no code branches on a build's name ---------------------------------------------------------------------
def test_no_module_but_the_loader_compares_a_build_name():
    """No ``x == "dsl"``, ``!= "manual"``, ``in ("jit", …)`` anywhere in tfa_sim/ outside spec/builds.py."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() == "spec/builds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in SHIPPED]
                if names:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {names}")
    assert not found, found


# ---- sweeps and the tuner take the knobs ---------------------------------------------------------------------
def test_a_sweep_varies_design_choices_against_its_builds_reference(tmp_path):
    """kernel.* axes are knobs within one shape: every point is compared with the build as built (the shape's
    reference), and each point's time is the time of the config it names."""
    from tfa_sim.explore.sweep import sweep_report

    spec = {"base": {"case": {"s0": 1024, "s1": 2048}},
            "axes": {"kernel.build": ["manual", "dsl"], "kernel.gu_rows": ["whole", "slices"]}}
    table = tfa_sim.sweep(spec, out=tmp_path / "s")
    assert len(table) == 4 and set(table["status"]) == {"ok"}
    for _, row in table.iterrows():
        assert row["total_cycles"] == cycles({"case.s0": 1024, "case.s1": 2048, "kernel.build": row["kernel.build"],
                                              "kernel.gu_rows": row["kernel.gu_rows"]})
    report = sweep_report(tmp_path / "s", plots=False)
    assert len(report["shapes"]) == 2  # one per build, each with its reference: the build as built
    for shape in report["shapes"]:
        build = "dsl" if "kernel.build dsl" in shape["shape"] else "manual"
        built = tfa_sim.run(overrides={"case.s0": 1024, "case.s1": 2048, "kernel.build": build,
                                       "numerics.enabled": False}, event_log=False)
        assert shape["default_metric"] == built.time_us


def test_a_space_with_a_kernel_axis_tunes_and_the_report_names_the_knob():
    space = {"axes": {"kernel.launch_grid": ["blocks", "persistent"], "kernel.pv_loads": ["v_first", "p_first"],
                      "schedule.qk_preload": [2, 4]}}
    result = tfa_sim.tune(overrides={"case.s0": 2048, "case.s1": 2048}, space=space)
    assert {"kernel.launch_grid", "kernel.pv_loads"} <= set(result.candidates.columns)
    assert "kernel.launch_grid: " in result.report and "kernel.pv_loads: " in result.report
    best = result.summary["best"]
    for key, value in best["changes"].items():
        assert f"{key}={value}" in result.report
    assert result.time_us == tfa_sim.run(result.best, event_log=False).time_us  # best.toml reproduces it
    with pytest.raises(InputError, match="axis kernel.build is part of the problem"):
        tfa_sim.tune(overrides={"case.s0": 2048}, space={"axes": {"kernel.build": ["manual", "dsl"]}})


@pytest.mark.parametrize("table", ["[schedule]\nlocal_slot_num = -2\n",
                                   "[[when]]\ns1_at_least = 1\n[when.tiling]\ntile_s1 = 0\n"])
def test_a_value_out_of_range_in_a_bundle_names_the_bundle(tmp_path, table):
    bundle = tmp_path / "neg.toml"
    bundle.write_text('base = "dsl"\n' + table)
    with pytest.raises(InputError, match=f"build bundle {bundle}: .* must be ≥ 1"):
        tfa_sim.load_config(overrides={"kernel.build": str(bundle)})
