"""Four mechanisms engineers changed in public, each through its registry or knob (issue 47, docs/kernel.md
"Mechanisms"): TPipe's consumer-local slots (``schedule.local_slot_num``), the cube's unit-flag hand-off
(``kernel.cube_handoff``), the UB union (``kernel.ub_union``) and the exp ring as a slot count
(``kernel.exp_ring = N``).  Each runs, sweeps and tunes; its legality errors are one line naming the rule."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tfa_sim
from tfa_sim.cli import main
from tfa_sim.spec.errors import InputError, ScheduleError
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

LONG = {"case.s1": 4096}
#: CUBE_S0 64: 16 KiB source tiles, so three fit the UB (three of the default 32 KiB ones do not).
SMALL = {"tiling.cube_s0": 64}


def run(numerics: bool = False, **overrides):
    return tfa_sim.run(overrides={"numerics.enabled": numerics, **overrides})


def records(result, kind: str | None = None, unit: str = "core0"):
    return [r for r in result.events.log.records() if r.unit.startswith(unit) and (kind is None or r.kind == kind)]


# ---- schedule.local_slot_num ----------------------------------------------------------------------------------
def test_local_slots_are_the_consumers_landing_tiles_unless_given():
    small = {"tiling": {"cube_s0": 64}}
    plan = kernel_plan(build_config({**small, "schedule": {"local_slot_num": 3}}))
    assert (plan.buffers.ub_src, plan.buffers.l1_p) == (3, 3)
    given = kernel_plan(build_config({**small, "schedule": {"local_slot_num": 3, "ub_src": 1}}))
    assert (given.buffers.ub_src, given.buffers.l1_p) == (1, 3)  # an explicit count wins
    assert kernel_plan(build_config({"kernel": {"build": "dsl"}})).buffers.l1_p == 1  # the port pins its own


def test_three_local_slots_run_as_three_tiles_and_rotate_through_them():
    three = run(**LONG, **SMALL, **{"schedule.local_slot_num": 3})
    assert three.total_cycles == run(**LONG, **SMALL, **{"schedule.ub_src": 3, "schedule.l1_p": 3}).total_cycles
    src = {r.slots["veccore0.UB.src"] for r in records(three, "TLOAD QK", "core0.veccore0")}
    p = {r.slots["L1.p"] for r in records(three, "TLOAD P", "core0.cubecore0")}
    assert src == p == {0, 1, 2}


@pytest.mark.parametrize(("value", "needle"), [(0, "schedule.local_slot_num=0 must be ≥ 1"),
                                               (8, "UB holds 365568 bytes > 196608"),
                                               (9, "UB holds 398336 bytes > 196608")])
def test_local_slot_legality_is_one_line(value, needle):
    with pytest.raises(InputError, match=needle) as err:
        build_config({"schedule": {"local_slot_num": value}})
    assert "\n" not in str(err.value)


# ---- kernel.cube_handoff = unit_flag --------------------------------------------------------------------------
def test_unit_flags_start_fix_on_the_first_final_fractal_and_keep_the_bits():
    """QK 128×128 over HEAD 128 is one K panel of 8·8·8 + 6 = 518 cycles; its first L0C fractal is final after
    the panel's 6 cycles of overhead and 128/16 = 8 steps: FIX may start 14 cycles in, and its last fractal
    (1/64 of the 64 KiB) follows the matmul's end."""
    flags, units = run(True), run(True, **{"kernel.cube_handoff": "unit_flag"})
    assert np.array_equal(flags.o.view(np.uint32), units.o.view(np.uint32))
    first = [r for r in records(units, "TMATMUL", "core0.cubecore0") if r.stage == "compute_qk"]
    rest = [r for r in records(units, "TMATMUL final units", "core0.cubecore0") if r.stage == "compute_qk"]
    assert len(first) == len(rest) == 8 and all(r.end - r.start == 14 for r in first)
    assert all(r.end - r.start == 518 - 14 for r in rest)
    stores = [r for r in records(units, "FIXPIPE →qk_tile_fifo", "core0.cubecore0") if r.nbytes]
    lasts = records(units, "FIXPIPE →qk_tile_fifo (last unit)", "core0.cubecore0")
    assert stores[0].start == first[0].end < rest[0].end  # the idle FIX starts before the matmul ends
    for head, tail, m1, m2 in zip(stores, lasts, first, rest):
        assert head.start >= m1.end and tail.start >= max(m2.end, head.end)
        assert head.nbytes + tail.nbytes == 128 * 128 * 4 and tail.nbytes == 1024
    assert units.total_cycles < flags.total_cycles  # the FIX-bound cube gains the overlap


def test_a_matmul_of_one_fractal_has_nothing_to_overlap():
    """A 16×16 accumulator is one unit: the hand-off is the whole matmul's either way."""
    from tfa_sim.spec.costs import Costs
    from tfa_sim.spec.hardware import load_hardware

    costs = Costs(load_hardware(build_config({}).hardware))
    assert costs.fractals(16, 16) == 1 and costs.fractals(128, 128) == 64
    assert costs.matmul_first_unit(128, 128, 256, 128) == 518 + 6 + 8  # the earlier panel, then overhead and 8 steps


# ---- kernel.ub_union --------------------------------------------------------------------------------------------
def test_without_the_union_gu_loads_into_tiles_of_its_own_and_takes_no_turns():
    settings = {**LONG, "kernel.ub_union": False, "schedule.ub_src": 1}
    apart = run(True, **settings)
    union = run(True, **{**LONG, "schedule.ub_src": 1})
    assert np.array_equal(apart.o.view(np.uint32), union.o.view(np.uint32))
    pv = records(apart, "TLOAD PV", "core0.veccore0")
    assert pv and all("veccore0.UB.pv" in r.slots and "veccore0.UB.src" not in r.slots for r in pv)
    qk = records(apart, "TLOAD QK", "core0.veccore0")
    assert all(r.slots["veccore0.UB.src"] == 0 for r in qk)
    assert apart.total_cycles < union.total_cycles  # with one tile the union makes P and GU take turns


def test_the_union_is_what_makes_the_default_tiling_fit_ub():
    """Apart, the source (32 KiB) and GU input (32 KiB) tiles take 2 × 64 KiB instead of 2 × 32 KiB: the default
    tiling overflows the 192 KiB UB, one line naming it; with one tile each it fits."""
    with pytest.raises(InputError, match=r"UB holds 234496 bytes > 196608 \(.*'src': 65536, 'pv': 65536"):
        build_config({"kernel": {"ub_union": False}})
    assert build_config({"kernel": {"ub_union": False}, "schedule": {"ub_src": 1}})


# ---- kernel.exp_ring = N ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("order", "preload", "safe"), [("qk_pv", 4, 5), ("pv_qk", 4, 4), ("qk_pv", 2, 3)])
def test_a_ring_of_n_entries_is_safe_beyond_how_far_p_runs_ahead(order, preload, safe):
    """compute_p runs qk_preload tiles ahead of compute_gu on qk_pv, one fewer on pv_qk: a ring with more entries
    than that runs (the same cycles as the FIFO-deep ring), one entry fewer is overwritten (exit 3)."""
    base = {**LONG, "kernel.stage_order": order, "schedule.qk_preload": preload}
    assert run(**base, **{"kernel.exp_ring": safe}).total_cycles == run(**base).total_cycles
    with pytest.raises(ScheduleError, match=f"the ring has {safe - 1} entries — give kernel.exp_ring more than "
                                            f"{safe - 1}"):
        run(**base, **{"kernel.exp_ring": safe - 1})


def test_the_ring_takes_its_entries_in_ub_and_the_dumps_name_the_slot(tmp_path):
    assert kernel_plan(build_config({"kernel": {"exp_ring": 6}})).buffers.exp_ring == 6
    result = tfa_sim.run(overrides={**LONG, "kernel.exp_ring": 6, "numerics.intermediate_check": True},
                         out=tmp_path / "r")
    import json

    manifest = json.loads((tmp_path / "r" / "dumps" / "manifest.json").read_text())
    slots = {d["tile"]: d["slot"] for d in manifest  # the per-block dumps (the full-S0 files have no slot)
             if d["name"] == "exp_max" and d["tile"] > 0 and d["slot"] is not None}
    assert slots and all(slot == tile % 6 for tile, slot in slots.items()), slots
    assert result.passed


def test_exp_ring_numbers_outside_the_range_are_one_line(capsys):
    assert main(["run", "--no-numerics", "--set", "kernel.exp_ring=0"]) == 2
    assert "kernel.exp_ring = 0 is not one of fifo, preload, 1…64" in capsys.readouterr().err


# ---- each sweeps and tunes ------------------------------------------------------------------------------------------
def test_the_four_mechanisms_sweep(tmp_path):
    spec = {"base": {"case": {"s1": 2048}, "schedule": {"ub_src": 1}},
            "axes": {"kernel.cube_handoff": ["flags", "unit_flag"], "kernel.ub_union": [True, False],
                     "schedule.local_slot_num": [1, 2], "kernel.exp_ring": ["fifo", 5]}}
    table = tfa_sim.sweep(spec, out=tmp_path / "s")
    assert len(table) == 16 and set(table["status"]) == {"ok"}
    times = table.set_index(["kernel.cube_handoff", "kernel.ub_union", "schedule.local_slot_num",
                             "kernel.exp_ring"])["time_us"]
    assert times["unit_flag", True, 2, "fifo"] < times["flags", True, 2, "fifo"]
    assert times["flags", True, 2, 5] == times["flags", True, 2, "fifo"]  # a 5-entry ring is never overwritten


def test_the_four_mechanisms_tune():
    space = {"axes": {"kernel.cube_handoff": ["flags", "unit_flag"], "kernel.ub_union": [True, False],
                      "schedule.local_slot_num": [1, 2, 3], "kernel.exp_ring": [5, "fifo"]},
             "base": {"schedule": {"ub_src": 1}}}
    result = tfa_sim.tune(overrides={"case.s1": 2048}, space=space)
    for knob in ("kernel.cube_handoff", "kernel.ub_union", "schedule.local_slot_num", "kernel.exp_ring"):
        assert f"{knob}: " in result.report
    assert result.best.kernel.cube_handoff == "unit_flag"
    assert math.isclose(result.time_us, tfa_sim.run(result.best, event_log=False).time_us)
