"""``compute_gu`` on an AIV: update ``running_o`` (the AIV's CUBE_S0/2 rows × HEAD) with one PV tile, as its
listing says (``listings.compute_gu``: configs/listings/compute_gu/, docs/kernel.md "Listings").

The listing is the call's program: the PV FIFO's ``TPOP``, the ``TLOAD`` of the AIV's rows of the PV tile (tile 0
straight into ``running_o``, later ones into the UB input tile of this call), the ``TFREE``, the update
(``pto_macro_fa_gu``: ``O = l1_exp_max ⊙row O + PV_t`` from tile 1 on, ``O ⊘row L`` after the last tile) and,
after the block's last tile, the ``TSTORE`` of the rows of O — or, for a split-S1 block (one chunk of several),
of its unnormalised O and the rows' running max and sum, fp32, for the combine launch; that block does not
divide.  An AIV with no rows (a one-row block) keeps the handshakes and moves nothing.  This module binds the
listing's names and says what its vector lines compute (:func:`update`, or the lines themselves).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP32
from tfa_sim.buffers.data import Compute, Const, View
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, Instr
from tfa_sim.listings.library import StageListing
from tfa_sim.listings.program import Step
from tfa_sim.listings.vocabulary import Tile, Vocabulary, declare
from tfa_sim.spec.choices import GU_ROWS
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.driver import Bind, Binds, issue
from tfa_sim.stages.plan import Shape
from tfa_sim.stages.vector_math import interpreted, last_vector, semantics, vector_lines

STAGE = "compute_gu"
ROW = ("1", "rows")


def steady(plan: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """A later tile's update (``tfa-sim listing``'s call)."""
    n = plan.shape
    names = {"first": False, "last": False, "divide": False, "partial_chunk": False, "first_part": True,
             "last_part": True}
    return names, {"rows": -(-n.half // plan.gu_rows(n.k_tile_factor)), "head": n.head}


VOCABULARY = declare(Vocabulary(
    STAGE, "AIV",
    tiles={"pv": Tile("UB", ("rows", "head"), pool=True), "o": Tile("UB", ("rows", "head"), role="state"),
           "exp_max": Tile("UB", ROW, ring=True), "m": Tile("UB", ROW, role="state"),
           "l": Tile("UB", ROW, role="state"),
           "pv_fifo": Tile("GM", ("rows", "head")), "gm_o": Tile("GM", ("rows", "head"), role="output"),
           "gm_partial": Tile("GM", ("rows", "head"), role="output")},
    fifos=frozenset({"pv_fifo"}), dims=frozenset({"rows", "head"}),
    context={"first": (False, True), "last": (False, True), "divide": (False, True),
             "partial_chunk": (False, True), "first_part": (False, True), "last_part": (False, True)},
    label="update",
    steady=steady))
NOT_RESCALED = Const(None)  # tile 0 has no l1_exp_max: update() ignores it there
#: What the vector lines read and write, as :func:`update` takes and returns them.
INPUTS, OUTPUTS = ("o", "pv", "exp_max", "l"), ("o",)


def update(backend: Backend, first: bool, last: bool, running_o: np.ndarray, pv: np.ndarray,
           l1_exp_max: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
    """running_o after tile t: PV₀, or l1_exp_max ⊙row O + PV_t; divided by L after the last tile (``last`` is
    False throughout for a split-S1 chunk, which leaves the division to the combine).

    tfa-sim always divides after the last tile, unlike the reference kernel's single-tile shortcut
    (docs/guide/numerics.md).
    """
    o = backend.compute_gu(None if first else running_o, pv, l1_exp_max)
    return backend.normalize(o, l2_global_sum) if last else o


def update_of(listing: StageListing, backend: Backend, names: dict[str, Any], n: Shape) -> Callable[..., np.ndarray]:
    """What a GU call's vector lines compute, as :func:`update` takes (after ``backend``, first and the division)
    and returns it: the backend's kernels when the lines are the shipped math, else the lines one by one."""
    lines = vector_lines(listing.steps(*(names[key] for key in VOCABULARY.context)))
    if listing.shipped_math(names, lines, INPUTS, OUTPUTS, {}):
        return partial(update, backend, names["first"], names["divide"])
    run = interpreted(lines, semantics(backend, n.dtype), {}, listing.listing.consts, INPUTS, OUTPUTS, {})
    return lambda *tiles: run(*tiles)[0]


def _whole(_k_tile_factor: int) -> int:
    return 1


def _slices(k_tile_factor: int) -> int:
    return k_tile_factor


GU_ROWS.add("whole", _whole, "an AIV's CUBE_S0/2 rows in one call", "manual `compute_gu`", (), __name__)
GU_ROWS.add("slices", _slices, "kTileFactor row slices, each loaded, updated and stored on its own",
            "PTO-DSL fa_builder.py `emit_gu`", (), __name__)


def update_tile(k: BlockKernel, lane: int, t: int, src_id: int) -> Program:
    """GU(t) on AIV ``lane`` as ``kernel.gu_rows`` cuts it (its registry's values, above); under the UB union each
    call takes the next ping-pong counter; returns (the last ``TSTORE O`` after the block's last tile or None,
    the counter after the calls)."""
    store = None
    parts = k.plan.gu_rows(k.plan.shape.k_tile_factor)
    union = k.plan.buffers.union
    for part in range(parts):
        store = yield from compute_gu(k, lane, t, src_id, part, parts)
        src_id += int(union)
    return store, src_id


def _part_rows(k: BlockKernel, lane: int, part: int, parts: int) -> tuple[int, int, slice]:
    """(first block row, rows, those rows among the AIV's) of row slice ``part`` of ``parts`` of AIV ``lane``."""
    lane0, lane_n = k.lane_rows(lane)
    size = -(-lane_n // parts)
    first_row = min(lane_n, part * size)
    rows = min(size, lane_n - first_row)
    return lane0 + first_row, rows, slice(first_row, first_row + rows)


def compute_gu(k: BlockKernel, lane: int, t: int, src_id: int, part: int = 0, parts: int = 1) -> Program:
    """GU(t) on AIV ``lane``, or of its row slice ``part`` of ``parts`` (each loaded, updated and, after the last
    tile, stored on its own); its PV lands in the UB source tile of the shared ping-pong counter ``src_id``
    (the UB union), or in the GU input tile of its own call count; returns the listing's last instruction after
    the block's last tile (the output store), else None."""
    n, block, buf, listing = k.plan.shape, k.block, k.buf, k.plan.listings[STAGE]
    pv = k.pv_fifo.tile(t, (lane,))
    row0, rows, mine = _part_rows(k, lane, part, parts)
    own = slice(row0, row0 + rows)  # this slice's rows of the block (``mine``: of this AIV's rows)
    done = part == parts - 1  # the tile's last slice frees the PV tile and reads the ring entry
    first, last = t == 0, t == block.tiles - 1
    divide = last and not block.partial
    values = (first, last, divide, block.partial, part == 0, done)
    steps = listing.steps(*values)
    exp_max = buf.l1_exp_max[lane].entry(t)  # tile 0 neither writes nor reads the ring
    union = k.plan.buffers.union

    data = k.numerics

    def make(name: str) -> Bind | None:
        if name == "pv":
            return Bind("UB", rows, n.head, FP32, slot=buf.ub_src[lane].slot(src_id) if union
                        else buf.ub_pv[lane].slot(pv.t * parts + part))
        if name == "o":
            return Bind("UB", rows, n.head, FP32, View(buf.running_o[lane], mine) if data else None)
        if name in ("m", "l"):
            state = buf.m2_global_max if name == "m" else buf.l2_global_sum
            return Bind("UB", 1, rows, FP32, View(state[lane], mine) if data else None)
        if name == "exp_max":
            return Bind("UB", 1, rows, FP32, exp_max.region(mine) if data else None,
                        on_read=(exp_max.read,) if done and not first else ())
        if name == "pv_fifo":
            return Bind("GM", rows, n.head, FP32, pv.region(own) if data else None, load="TLOAD PV", fifo=pv)
        if name == "gm_o":
            return Bind("GM", rows, n.head, FP32, k.gm_o(lane, mine) if data else None, store="TSTORE O")
        if name == "gm_partial":
            return Bind("GM", 1, rows * n.head + 2 * rows, FP32,
                        (k.gm_o(lane, mine), k.gm_partial(lane, "m", mine), k.gm_partial(lane, "l", mine))
                        if data else None, store="TSTORE partial")
        return None

    binds = Binds(make, listing, {"rows": rows, "head": n.head})

    def compute(step: Step, binds: Binds) -> tuple[Effect, ...] | None:
        if step is not last_vector(steps) or not rows:
            return None
        o = binds["o"].location
        if not vector_lines(steps):  # tile 0 without the division: its PV is running_o already
            return k.dump("o_part", t, row0, o)
        fn = update_of(listing, k.data.backend, dict(zip(VOCABULARY.context, values)), n)
        srcs = (o, o if first else binds["pv"].location, NOT_RESCALED if first else binds["exp_max"].location,
                binds["l"].location)  # tile 0's PV is in running_o already
        return (Compute(fn, srcs, (o,)), *k.dump("o_part", t, row0, o))

    last_ins: Instr | None = yield from issue(k.site(STAGE, lane), steps, binds, t, part, (rows,),
                                              compute if data else None)
    return last_ins if last else None
