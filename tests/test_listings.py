"""The stage programs as listings (issue 48, docs/kernel.md "Listings"): the shipped listings are the sequences
the kernel sources give and price to the cycles the docs quote; a listing given by path runs as it reads; a
malformed one is one line naming file:line (exit 2); a race is refused naming both lines and the rule (exit 3);
a barrier added never speeds a run up and one the rules let go never slows it down; the numerics follow the
listing; no instruction sequence is left in the stage code."""
from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import tfa_sim
from tfa_sim.backends import get_backend
from tfa_sim.cli import main
from tfa_sim.listings.isa import ISA
from tfa_sim.listings.library import LISTINGS_DIR
from tfa_sim.listings.resolve import is_barrier
from tfa_sim.numerics import rounding as nx
from tfa_sim.spec.errors import InputError, ScheduleError
from tfa_sim.spec.load import build_config, load_config
from tfa_sim.stages.compute_p import VOCABULARY as P_NAMES
from tfa_sim.stages.compute_p import softmax_of
from tfa_sim.stages.driver import vector_ops
from tfa_sim.stages.plan import kernel_plan
from tfa_sim.views.listing import binds, call_names, instruction_table, names_table, priced

ROOT = Path(__file__).resolve().parents[1]
F32 = np.float32


def shipped(stage: str, name: str = "manual") -> str:
    return (LISTINGS_DIR / stage / f"{name}.lst").read_text()


def write(tmp_path: Path, text: str, name: str = "mine.lst") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


#: A compute_p listing's protocol around a body of vector lines: the loads, flags and stores.
HEAD = """listing compute_p
vec softmax
wait_flag(PIPE_V, PIPE_MTE2, qk)
if first_slice
    TPOP(qk_fifo)
end
TLOAD(qk, qk_fifo)
if last_slice
    TFREE(qk_fifo)
end
set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
wait_flag(PIPE_MTE3, PIPE_V, x_exp)
"""
TAIL = """sync spelled
set_flag(PIPE_V, PIPE_MTE2, qk)
set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
if first_slice
    TALLOC(p_fifo)
end
TSTORE(p_fifo, x_exp)
if last_slice
    TPUSH(p_fifo)
end
set_flag(PIPE_MTE3, PIPE_V, x_exp)
"""


def groups(plan, stage: str, **names) -> list[list[str]]:
    """The call's vector groups (instruction names between barriers) as the listing gives them."""
    steady, dims = call_names(plan, stage)
    listing = plan.listings[stage]
    call = {**steady, **names}
    steps = listing.steps(*(call[k] for k in listing.vocabulary.context))
    tiles = binds(listing, dims)
    return [[op.name for op in g] for s in steps if s.pipe == "V" and s.instructions for g in vector_ops(s, tiles)]


def vector_cycles(plan, stage: str, **names) -> float:
    steady, dims = call_names(plan, stage)
    return sum(c for _, pipe, c in priced(plan, stage, {**steady, **names}, dims) if pipe == "V" and c)


# ---- the shipped listings -------------------------------------------------------------------------------------
def test_the_manual_softmax_is_the_macros_sequence_with_its_barriers():
    """pto_macro_fa_softmax: instructions in order, a pipe_barrier(PIPE_V) between the groups."""
    plan = kernel_plan(load_config())
    assert groups(plan, "compute_p", first=True) == [
        ["TROWMAX"], ["TROWEXPANDSUB", "TMULS", "TEXP"], ["TROWSUM", "TCVT"]]
    assert groups(plan, "compute_p") == [
        ["TROWMAX"], ["TMAX"], ["TSUB"], ["TMULS"],
        ["TROWEXPANDSUB", "TMULS", "TMULS", "TEXP", "TEXP", "TCVT"], ["TMUL", "TROWSUM"], ["TADD"]]
    assert groups(plan, "compute_p", mask="partial")[:3] == [["TTRI"], ["TMULS"], ["TADD"]]
    assert groups(plan, "compute_p", mask="full") == [["TMULS", "TMULS"], ["TADDS"]]
    assert groups(plan, "compute_gu", first=True) == []
    assert groups(plan, "compute_gu", last=True, divide=True) == [["TROWEXPANDMUL", "TADD", "TROWEXPANDDIV"]]


def test_the_ports_softmax_has_the_compilers_barriers_and_the_documented_cycles():
    """emit_softmax under `sync auto` (ptoas --enable-insert-sync): one barrier more per later-tile slice than
    the macro; docs/timing.md quotes 1,503 cycles for the macro's later-tile 32 × 256 slice, 1,549 for the port's."""
    manual, port = (kernel_plan(load_config(overrides=[f"listings.compute_p={name}"])) for name in ("manual", "port"))
    assert groups(port, "compute_p", first=True) == [
        ["TROWMAX"], ["TROWEXPANDSUB", "TMOV"], ["TMULS"], ["TEXP"], ["TROWSUM", "TCVT"]]
    assert groups(port, "compute_p") == [
        ["TROWMAX"], ["TMAX"], ["TSUB"], ["TMOV", "TROWEXPANDSUB", "TMULS"], ["TMULS", "TEXP"], ["TEXP", "TMUL"],
        ["TROWSUM"], ["TADD", "TCVT"]]
    assert (vector_cycles(manual, "compute_p"), vector_cycles(port, "compute_p")) == (1503.0, 1549.0)


def test_sync_auto_inserts_a_barrier_at_every_direct_dependency(tmp_path):
    """ptoas's rule: a barrier before an instruction that reads what the ones since the last barrier wrote, or
    writes what they read or wrote; independent instructions share a group."""
    body = """tile a [rows, cols] f32
tile b [rows, cols] f32
tile c [rows, cols] f32
sync auto
TEXP(a, qk)
TEXP(b, qk)
TADD(c, a, b)
TMULS(qk, x_exp, 2.0)
TEXP(qk, c)
TMULS(c, a, 1.5)
"""
    path = write(tmp_path, HEAD + body + TAIL)
    plan = kernel_plan(load_config(overrides=[f"listings.compute_p={path}"]))
    assert groups(plan, "compute_p") == [["TEXP", "TEXP"], ["TADD", "TMULS"], ["TEXP"], ["TMULS"]]


# ---- a listing by path ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("build", ["manual", "dsl"])
def test_a_copy_of_every_shipped_listing_runs_with_the_same_cycles(build, tmp_path):
    overrides = {"kernel.build": build, "case.s1": 2048, "case.causal": build == "manual"}
    base = tfa_sim.run(overrides=overrides, numerics=False, event_log=False).total_cycles
    config = load_config(overrides=[f"kernel.build={build}"])
    copies = {}
    for stage in ("compute_qk", "compute_p", "compute_pv", "compute_gu", "epilogue", "combine"):
        name = getattr(config.listings, stage)
        copies[f"listings.{stage}"] = write(tmp_path, shipped(stage, name), f"{stage}.lst")
    again = tfa_sim.run(overrides={**overrides, **copies}, numerics=False, event_log=False).total_cycles
    assert again == base


def test_listings_are_config_keys_bundles_set_and_old_names_read():
    assert build_config({"kernel": {"build": "dsl"}}).listings.compute_p == "port"
    assert build_config({"kernel": {"softmax": "port"}}).listings.compute_p == "port"
    assert build_config({"kernel": {"vec_barriers": "insert_sync"}}).listings.compute_p == "port"
    with pytest.raises(InputError, match="kernel.softmax is the old name of listings.compute_p"):
        build_config({"kernel": {"softmax": "port"}, "listings": {"compute_p": "manual"}})
    with pytest.raises(InputError, match="'nope' is not a shipped listing; use one of manual, port"):
        kernel_plan(build_config({"listings": {"compute_p": "nope"}}))
    with pytest.raises(InputError, match="no such file"):
        kernel_plan(build_config({"listings": {"compute_p": "no/such.lst"}}))


def test_a_listing_given_for_another_stage_is_refused(tmp_path):
    path = write(tmp_path, shipped("compute_gu"))
    with pytest.raises(InputError, match=r"mine.lst:1: this is a compute_gu listing; give it as listings.compute_gu"):
        kernel_plan(build_config({"listings": {"compute_p": path}}))


# ---- a malformed listing: exit 2, file:line ---------------------------------------------------------------------
BROKEN = [
    ("TROWMAX(lm, qk, tmp)", "TROWMAXX(lm, qk, tmp)", "TROWMAXX is not an instruction tfa-sim models; did you mean "
                                                      "'TROWMAX'"),
    ("TROWMAX(lm, qk, tmp)", "TROWMAX(lm, qkk, tmp)", "unknown tile 'qkk'; did you mean 'qk'"),
    ("TROWMAX(lm, qk, tmp)", "TROWMAX(lm, qk)", "TROWMAX takes 3 operands (dst, src, tmp), got 2"),
    ("TMAX(lm, lm, m)", "TMAX(lm, lm, qk)", "TMAX is element-wise: its tiles have one shape"),
    ("TROWMAX(lm, qk, tmp)", "TROWMAX(lm, qk, tmp", "is not an instruction; write NAME(dst, src, …)"),
    ("if first_slice\n", "if first_slize\n", "the condition names 'first_slize', which is not one of this stage's "
                                             "names"),
    ("listing compute_p", "listing", "a listing starts with `listing STAGE`"),
    ("TLOAD(qk, qk_fifo)", "TLOAD(qk, qk_fifo, qk_fifo)", "TLOAD moves to L1 or UB; qk_fifo lives in GM"),
    ("tile tmp  [rows, cols] f32", "tile tmp  [rows, cols] f64", "tile tmp has type 'f64'; use one of f32, f16"),
    ("\nend\n\nset_flag(PIPE_V, PIPE_MTE2, qk)", "\n\nset_flag(PIPE_V, PIPE_MTE2, qk)", "this block has no `end`"),
]


@pytest.mark.parametrize(("old", "new", "needle"), BROKEN, ids=[b[2][:30] for b in BROKEN])
def test_a_malformed_listing_is_one_line_naming_file_and_line(old, new, needle, tmp_path, capsys):
    text = shipped("compute_p")
    assert old in text
    broken = text.replace(old, new, 1)
    path = write(tmp_path, broken)
    assert main(["run", "--no-numerics", "--set", f"listings.compute_p={path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and needle in err, err
    line = int(re.search(r"mine\.lst:(\d+):", err).group(1))
    assert 1 <= line <= broken.count("\n") + 1


# ---- races: exit 3, both lines, the rule --------------------------------------------------------------------
def without_line(text: str, line: str, after: str | None = None) -> str:
    """``text`` without the first ``line`` that follows ``after`` (a line of the file)."""
    lines = text.split("\n")
    start = lines.index(after) if after is not None else -1
    i = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith(line))
    return "\n".join(lines[:i] + lines[i + 1:])


RACES = [  # (line removed, after which line, the rule and the two instructions named)
    ("pipe_barrier(PIPE_V)", "    TROWMAX(lm, qk, tmp)", "V1", "TROWMAX(lm, qk, tmp)", "TMAX(lm, lm, m)"),
    ("pipe_barrier(PIPE_V)", "    TROWSUM(ls, qk, tmp)", "V1", "TROWSUM(ls, qk, tmp)", "TADD(l, l, ls)"),
    ("set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)", None, "X1", "TLOAD(qk, qk_fifo)", "TROWMAX("),
    ("set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)", None, "X1", "TCVT(x_exp, qk, CAST_ROUND)", "TSTORE(p_fifo, x_exp)"),
    ("set_flag(PIPE_V, PIPE_MTE2, qk)", None, "P3", None, "qk"),
    ("wait_flag(PIPE_V, PIPE_MTE2, qk)", None, "P1", None, "TLOAD(qk, qk_fifo)"),
    ("TFREE(qk_fifo)", None, "F1", None, "TLOAD(qk, qk_fifo)"),
]


@pytest.mark.parametrize(("line", "after", "rule", "first", "second"), RACES,
                         ids=[f"{r[2]}-{r[0][:20]}" for r in RACES])
def test_a_race_is_refused_naming_both_lines_and_the_rule(line, after, rule, first, second, tmp_path, capsys):
    path = write(tmp_path, without_line(shipped("compute_p"), line, after))
    assert main(["run", "--no-numerics", "--set", f"listings.compute_p={path}"]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f": {rule}, " in err and "docs/kernel.md, \"Race rules\"" in err, err
    assert second in err and (first is None or first in err), err
    if first is not None:
        assert err.index(first) < err.index(second)


def test_a_copy_of_a_file_that_races_is_refused_before_anything_runs(tmp_path):
    path = write(tmp_path, without_line(shipped("compute_gu"), "set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)"))
    with pytest.raises(ScheduleError, match="X1"):
        kernel_plan(build_config({"listings": {"compute_gu": path}}))


# ---- priced to the barrier ------------------------------------------------------------------------------------
def barrier_lines(text: str) -> list[int]:
    return [i for i, ln in enumerate(text.split("\n")) if ln.strip().startswith("pipe_barrier(PIPE_V)")]


def drop(text: str, index: int) -> str:
    lines = text.split("\n")
    return "\n".join(lines[:index] + lines[index + 1:])


CASES = [{"case.s1": 2048}, {"case.s1": 2048, "case.causal": True, "case.softcap": 20.0},
         {"case.s0": 512, "case.s1": 1024, "case.window": 300, "case.causal": True, "tiling.tile_s1": 512}]


def allowed(text: str, tmp_path: Path, index: int) -> str | None:
    """The path of ``text`` without barrier ``index``, or None when the rules refuse it."""
    path = write(tmp_path, drop(text, index), f"drop{index}.lst")
    try:
        kernel_plan(build_config({"listings": {"compute_p": path}}))
    except ScheduleError:
        return None
    return path


@pytest.mark.parametrize("name", ["manual", "port"])
def test_removing_a_barrier_the_rules_allow_never_slows_a_run_and_keeps_its_bits(name, tmp_path):
    text = shipped("compute_p", name)
    kept = refused = 0
    for index in barrier_lines(text):
        path = allowed(text, tmp_path, index)
        if path is None:
            refused += 1
            continue
        kept += 1
        for case in CASES[:2]:
            base = tfa_sim.run(overrides={**case, "listings.compute_p": name}, numerics=False, event_log=False)
            less = tfa_sim.run(overrides={**case, "listings.compute_p": path}, numerics=False, event_log=False)
            assert less.total_cycles <= base.total_cycles, (index, case)
    assert kept and (refused or name == "port")  # the port spells only its prefixes' barriers
    dropped = allowed(text, tmp_path, barrier_lines(text)[-1]) if name == "manual" else None
    if dropped is not None:  # the math is the same: the same bits
        a = tfa_sim.run(overrides={"case.s1": 1024, "listings.compute_p": name})
        b = tfa_sim.run(overrides={"case.s1": 1024, "listings.compute_p": dropped})
        assert np.array_equal(a.o.view(np.uint32), b.o.view(np.uint32))


def test_adding_a_barrier_anywhere_never_speeds_a_run(tmp_path):
    text = shipped("compute_p")
    lines = text.split("\n")
    inside = [i for i, ln in enumerate(lines) if re.match(r"\s+T[A-Z]+\(", ln)]
    for i in inside[::3]:
        indent = re.match(r"\s*", lines[i]).group(0)
        more = lines[:i + 1] + [f"{indent}pipe_barrier(PIPE_V)"] + lines[i + 1:]
        path = write(tmp_path, "\n".join(more), f"b{i}.lst")
        for case in CASES:
            base = tfa_sim.run(overrides=case, numerics=False, event_log=False)
            more = tfa_sim.run(overrides={**case, "listings.compute_p": path}, numerics=False, event_log=False)
            assert more.total_cycles >= base.total_cycles, (i, case)


# ---- numerics follow the listing --------------------------------------------------------------------------------
def slice_inputs(seed: int, rows: int = 32, cols: int = 256):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, (rows, cols)).astype(F32)
    m = rng.normal(0, 3, rows).astype(F32)
    return x, m, rng.uniform(1, 50, rows).astype(F32)


@pytest.mark.parametrize(("name", "reference"), [("manual", "npu"), ("port", "npu"), ("manual", "cpu_sim")])
def test_the_interpreter_gives_the_backends_bits_on_the_shipped_math(name, reference):
    """The lines one by one compute what the backend's stage kernel does: the instruction semantics are the
    rounding contract's."""
    plan = kernel_plan(load_config(overrides=[f"listings.compute_p={name}", f"numerics.reference={reference}"]))
    backend = get_backend("numpy", "tfa", reference)
    listing = plan.listings["compute_p"]
    listing.shipped_math = lambda *a: False  # force the lines
    for first, mask, seed in itertools.product((True, False), ("none", "partial"), range(3)):
        x, m, l = slice_inputs(seed)
        masked = nx.causal_mask(0, 100, 32, 256) if mask == "partial" else None
        names = {"first": first, "first_slice": True, "last_slice": False, "mask": mask, "softcap": False}
        got = softmax_of(listing, backend, names, masked, plan.shape, 32)(x, None if first else m, None if first else l)
        want = backend.compute_p(x, None if first else m, None if first else l, plan.shape.scale, mask=masked)
        for g, w in zip(got, want):
            if not (first and w is want.l1_exp_max):
                assert np.array_equal(np.asarray(g).view(np.uint16 if g.dtype == np.float16 else np.uint32),
                                      np.asarray(w).view(np.uint16 if w.dtype == np.float16 else np.uint32))


SCALE_FIRST_BODY = """tile tmp [rows, cols] f32
tile lm  [1, rows] f32
tile ls  [1, rows] f32
TMULS(qk, qk, scale)
pipe_barrier(PIPE_V)
if first
    TROWMAX(m, qk, tmp)
    pipe_barrier(PIPE_V)
    TROWEXPANDSUB(qk, qk, m)
    TEXP(qk, qk)
    pipe_barrier(PIPE_V)
    TROWSUM(l, qk, tmp)
    TCVT(x_exp, qk, CAST_ROUND)
else
    TROWMAX(lm, qk, tmp)
    pipe_barrier(PIPE_V)
    TMAX(lm, lm, m)
    pipe_barrier(PIPE_V)
    TSUB(exp_max, m, lm)
    pipe_barrier(PIPE_V)
    TMOV(m, lm)
    pipe_barrier(PIPE_V)
    TROWEXPANDSUB(qk, qk, lm)
    TEXP(exp_max, exp_max)
    TEXP(qk, qk)
    TCVT(x_exp, qk, CAST_ROUND)
    pipe_barrier(PIPE_V)
    TMUL(l, exp_max, l)
    TROWSUM(ls, qk, tmp)
    pipe_barrier(PIPE_V)
    TADD(l, l, ls)
end
"""


#: The scale applied before TROWMAX instead of inside the exponent: the running max in scaled units.
SCALE_FIRST = HEAD + SCALE_FIRST_BODY + TAIL


def scale_first_by_hand(x, m_prev, l_prev, s):
    """The edited step in the rounding contract's functions, independently of the interpreter."""
    y = x * s
    tile_max = nx.row_max(y)
    m = tile_max if m_prev is None else nx.maximum(tile_max, m_prev)
    e = nx.exp_tfa(y - m[:, None])
    exp_max = np.ones_like(m) if m_prev is None else nx.exp_tfa(m_prev - m)
    l = nx.row_sum(e) if l_prev is None else exp_max * l_prev + nx.row_sum(e)
    return nx.narrow(e, np.float16), exp_max, m, l


def test_an_edit_that_changes_the_math_runs_as_the_kernel_would(tmp_path, capsys):
    path = write(tmp_path, SCALE_FIRST)
    plan = kernel_plan(load_config(overrides=[f"listings.compute_p={path}"]))
    listing = plan.listings["compute_p"]
    assert listing.changes_math()
    backend = get_backend("numpy")
    for first in (True, False):
        x, m, l = slice_inputs(7)
        names = {"first": first, "first_slice": False, "last_slice": False, "mask": "none", "softcap": False}
        got = softmax_of(listing, backend, names, None, plan.shape, 32)(x, None if first else m, None if first else l)
        want = scale_first_by_hand(x, None if first else m, None if first else l, plan.shape.scale)
        for g, w in zip(got, want):
            assert np.array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))
    runs = [tfa_sim.run(overrides={"case.s1": 2048, "listings.compute_p": path, "numerics.backend": b})
            for b in ("numpy", "native")]
    shipped_run = tfa_sim.run(overrides={"case.s1": 2048})
    assert np.array_equal(runs[0].o.view(np.uint32), runs[1].o.view(np.uint32))  # native runs the lines too
    assert not np.array_equal(runs[0].o.view(np.uint32), shipped_run.o.view(np.uint32))
    assert all(r.passed for r in runs)  # the same attention, rounded another way
    assert runs[0].summary["listings"]["compute_p"]["math"] == "listing"
    assert main(["run", "--set", "case.s1=2048", "--set", f"listings.compute_p={path}", "--backend", "native",
                 "--out", str(tmp_path / "run")]) == 0
    assert "listings with math of their own: compute_p" in capsys.readouterr().out


def test_an_edit_that_keeps_the_math_keeps_the_bits_on_both_backends(tmp_path):
    """In-place temporaries renamed, independent instructions swapped, a barrier added: the same expressions."""
    text = shipped("compute_p")
    text = text.replace("    TMUL(l, exp_max, l)\n    TROWSUM(ls, qk, tmp)",
                        "    TROWSUM(ls, qk, tmp)\n    pipe_barrier(PIPE_V)\n    TMUL(l, exp_max, l)")
    path = write(tmp_path, text)
    assert not kernel_plan(load_config(overrides=[f"listings.compute_p={path}"])).listings["compute_p"].changes_math()
    for backend in ("numpy", "native"):
        a = tfa_sim.run(overrides={"case.s1": 2048, "case.causal": True, "numerics.backend": backend})
        b = tfa_sim.run(overrides={"case.s1": 2048, "case.causal": True, "numerics.backend": backend,
                                   "listings.compute_p": path})
        assert np.array_equal(a.o.view(np.uint32), b.o.view(np.uint32)), backend
        assert b.summary["listings"]["compute_p"]["math"] == "shipped"


# ---- the command ----------------------------------------------------------------------------------------------
def test_tfa_sim_listing_prices_each_line(capsys):
    assert main(["listing", "compute_p"]) == 0
    out = capsys.readouterr().out.strip().split("\n")
    assert out[0].startswith("compute_p: listing 'manual' (configs/listings/compute_p/manual.lst)")
    vector = [float(ln.split()[1]) for ln in out if ln.startswith("V ") and len(ln.split()) > 3
              and re.match(r"[0-9.]+$", ln.split()[1])]
    assert sum(vector) == 1503.0  # docs/timing.md's later-tile slice
    total = float(out[-1].split()[0])
    assert abs(sum(float(ln.split()[2].rstrip("%")) for ln in out[3:-1] if "%" in ln) - 100) < 0.5
    assert total > sum(vector)  # the loads and the store
    assert main(["listing", "compute_p", "--when", "mask=bogus"]) == 2
    assert "mask takes none, partial, full" in capsys.readouterr().err
    api = tfa_sim.listing("compute_qk", overrides={"kernel.cube_handoff": "unit_flag"})
    assert any("TMATMUL<Final>" in row["text"] for row in api["lines"])


def test_listing_keys_sweep_and_tune(tmp_path):
    """A listing is an axis of a sweep and of a tune's space; the port's softmax costs more at this shape, so
    the tune keeps the manual one, and its report names the listing of each candidate."""
    space = {"axes": {"listings.compute_p": ["manual", "port"]}}
    result = tfa_sim.tune(overrides={"case.s1": 2048}, space=space)
    assert result.best.listings.compute_p == "manual"
    assert "listings.compute_p" in result.report
    table = tfa_sim.sweep({"base": {"case": {"s1": 2048}}, "axes": {"listings.compute_p": ["manual", "port"]}},
                          out=tmp_path / "sweep")
    times = dict(zip(table["listings.compute_p"], table["time_us"]))
    assert set(times) == {"manual", "port"} and times["port"] > times["manual"]


# ---- no instruction sequence left in the stage code -----------------------------------------------------------
#: The listing reader and issuer, the cost rules per instruction class, where an instruction is made.
READER = {"driver.py", "site.py", "handoffs.py", "block_kernel.py"}


def test_no_instruction_sequence_remains_in_the_stage_code_or_the_costs():
    """Every instruction the model issues comes from a listing: the stage modules bind names and say what their
    vector and matmul groups compute; spec/costs.py prices instruction classes.  No yield of an instruction or a
    wait outside the issuer, no instruction made, no VectorOp built, no tuple or list of instruction names."""
    names = set(ISA)
    files = [*sorted((ROOT / "tfa_sim" / "stages").glob("*.py")), ROOT / "tfa_sim" / "spec" / "costs.py"]
    problems = []
    for path in files:
        if path.name in READER:
            continue
        tree = ast.parse(path.read_text())
        makers = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "instr"]
        made = {id(n) for maker in makers for n in ast.walk(maker)}  # the combine's instruction maker
        for node in ast.walk(tree):
            if id(node) in made:
                continue
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.FunctionDef) and ast.unparse(node.returns or ast.Constant(None)) == "Program":
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Yield):
                        problems.append(f"{path.relative_to(ROOT)}:{inner.lineno}: a stage program yields an "
                                        f"instruction or a wait itself")
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("Instr", "instr", "instr_at", "VectorOp", "Wait", "wait"):
                    problems.append(f"{where}: {called}(…) outside the issuer")
            if isinstance(node, (ast.Tuple, ast.List)):
                ops = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
                if len(ops) >= 2:
                    problems.append(f"{where}: a sequence of instructions {ops}")
    assert problems == []


def test_every_shipped_vector_listing_passes_its_own_rules_at_every_barrier_the_ablation_names():
    """Sanity for benchmarks/ablation.py's listing table: each shipped compute_p listing has barriers to take
    away, and the rules refuse some and allow others."""
    text = shipped("compute_p")
    assert len(barrier_lines(text)) >= 15
    plan = kernel_plan(load_config())
    steady = plan.listings["compute_p"].lines(call_names(plan, "compute_p")[0])
    assert sum(is_barrier(ln, "V") for ln in steady) == 6 and P_NAMES.label == "softmax"


@pytest.mark.parametrize("marker, make", [("listing-names", names_table), ("listing-isa", instruction_table)])
def test_docs_kernel_md_holds_the_tables_the_code_makes(marker, make):
    """docs/kernel.md's names and instruction tables are the stages' vocabularies and the ISA table."""
    text = (ROOT / "docs" / "kernel.md").read_text(encoding="utf-8")
    table = text.split(f"<!-- {marker}:start -->\n", 1)[1].split(f"\n<!-- {marker}:end -->", 1)[0]
    assert table.strip() == make(), f"regenerate docs/kernel.md's table: print(tfa_sim.views.listing.{make.__name__}())"
    assert all(f"| `{name}` |" in table for name in (ISA if make is instruction_table else ()))
