"""``compute_p`` on an AIV: the online softmax of one Vec_S0×TILE_S1 row slice of a QK tile, as its listing says
(``listings.compute_p``: configs/listings/compute_p/, docs/kernel.md "Listings").

The listing is the call's program: the QK FIFO's ``TPOP`` at row slice 0, the slice's ``TLOAD`` into the UB
source tile of this call (the shared counter picks it), the softmax's vector instructions and barriers
(``pto_macro_fa_softmax``: row max of the raw scores, ``(x − m)·s``, exp, ``x_exp = fp16(E)``, row sum of the
fp32 E, the running ``m2_global_max`` and ``l2_global_sum``, and from tile 1 on the tile's ``l1_exp_max`` into the
ring; the mask and softcap prefixes before them), the P FIFO's ``TALLOC`` and the ``TSTORE`` of ``x_exp``, one DMA
per sub-tile, the last slice's ``TPUSH``.  This module binds the listing's names to this call's tiles and says what
its vector lines compute (:func:`softmax`, the backend's kernel, or the lines themselves).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP16, FP32
from tfa_sim.buffers.data import DISCARD, Compute, Const, View
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect
from tfa_sim.listings.library import StageListing
from tfa_sim.listings.program import Step
from tfa_sim.listings.vocabulary import Tile, Vocabulary, declare
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.driver import Bind, Binds, issue
from tfa_sim.stages.plan import Shape
from tfa_sim.stages.vector_math import interpreted, last_vector, semantics, vector_lines

STAGE = "compute_p"
ROW = ("1", "rows")


def steady(plan: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """A full row slice of a later tile, no mask (``tfa-sim listing``'s call)."""
    n = plan.shape
    one = n.k_tile_factor == 1
    names = {"first": False, "first_slice": one, "last_slice": one, "mask": "none", "softcap": n.softcap > 0}
    return names, {"rows": n.vec_s0, "cols": n.tile_s1, "subs": n.k_tile_factor}


VOCABULARY = declare(Vocabulary(
    STAGE, "AIV",
    tiles={"qk": Tile("UB", ("rows", "cols"), pool=True), "x_exp": Tile("UB", ("rows", "cols"), "f16", "output", True),
           "m": Tile("UB", ROW, role="state"), "l": Tile("UB", ROW, role="state"),
           "exp_max": Tile("UB", ROW, role="output", ring=True),
           "qk_fifo": Tile("GM", ("rows", "cols"), dmas="subs"),
           "p_fifo": Tile("GM", ("rows", "cols"), "f16", "output", dmas="subs")},
    fifos=frozenset({"qk_fifo", "p_fifo"}), scalars=frozenset({"scale", "softcap"}), dims=frozenset({"rows", "cols"}),
    context={"first": (False, True), "first_slice": (False, True), "last_slice": (False, True),
             "mask": ("none", "partial", "full"), "softcap": (False, True)},
    label="softmax",
    steady=steady))
#: What the vector lines read and write, as :func:`softmax` takes and returns them.
INPUTS, OUTPUTS = ("qk", "m", "l"), ("x_exp", "exp_max", "m", "l")


def softmax(backend: Backend, masked: np.ndarray | None, scale: np.float32, softcap: float, dtype: Any,
            x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Softmax step of one row slice of a tile: x_exp (in ``dtype``), l1_exp_max, M, L.

    Where ``masked``, the mask value is added to the score (after the cap, with ``softcap``); a slice that
    sees nothing needs no special case (exp(0) is exactly 1, exp of a masked score exactly +0).
    """
    return tuple(backend.compute_p(x, m_prev, l_prev, scale, mask=masked, softcap=softcap, out_dtype=dtype))


def softmax_of(listing: StageListing, backend: Backend, names: dict[str, Any], masked: np.ndarray | None,
               n: Shape, rows: int) -> Callable[..., tuple[np.ndarray, ...]]:
    """What a row slice's vector lines compute, as :func:`softmax` takes and returns it (after ``backend``,
    ``masked`` and the shape's): the backend's kernel when the lines write the shipped listing's math, else the
    lines one by one (:mod:`tfa_sim.stages.vector_math`)."""
    lines = vector_lines(listing.steps(*(names[key] for key in VOCABULARY.context)))
    scalars = {"scale": n.scale, "softcap": np.float32(n.softcap)}
    if listing.shipped_math(names, lines, INPUTS, OUTPUTS, scalars):
        return partial(softmax, backend, masked, n.scale, n.softcap, n.dtype)
    shape = (rows, n.tile_s1)
    return interpreted(lines, semantics(backend, n.dtype, masked), scalars, listing.listing.consts, INPUTS, OUTPUTS,
                       {"x_exp": lambda: np.zeros(shape, n.dtype), "exp_max": lambda: np.ones(rows, np.float32)})


def compute_p(k: BlockKernel, lane: int, t: int, r: int, src_id: int) -> Program:
    """Row slice ``r`` of logical tile ``t`` on AIV ``lane``; ``src_id``: the shared ping-pong counter."""
    b, n, buf, listing = k.block, k.plan.shape, k.buf, k.plan.listings[STAGE]
    qk, p = k.qk_fifo.tile(t, (lane,)), k.p_fifo.tile(t, (lane,))
    first, kf = r == 0, n.k_tile_factor
    lane0, lane_n = k.lane_rows(lane)
    nr = max(0, min(n.vec_s0, lane_n - r * n.vec_s0))  # rows of this slice (fewer, or none, in a short block)
    row0 = lane0 + r * n.vec_s0  # within the block
    rows = slice(row0, row0 + nr)
    own = slice(r * n.vec_s0, r * n.vec_s0 + nr)  # the slice's rows within this AIV's rows
    exp_max = buf.l1_exp_max[lane].entry(t)  # tile 0 neither writes nor reads the ring
    coverage = b.coverage(t, row0, nr) if nr else "none"
    steps = listing.steps(t == 0, first, r == kf - 1, coverage, n.softcap > 0)
    numerics = k.numerics and bool(nr)
    width = n.dtype.itemsize

    data = k.numerics

    def make(name: str) -> Bind | None:
        if name == "qk":
            return Bind("UB", nr, n.tile_s1, FP32, slot=buf.ub_src[lane].slot(src_id))
        if name == "x_exp":
            return Bind("UB", nr, n.tile_s1, width, slot=buf.ub_x_exp[lane].slot(src_id))
        if name in ("m", "l"):
            state = buf.m2_global_max if name == "m" else buf.l2_global_sum
            return Bind("UB", 1, nr, FP32, View(state[lane], own) if data else None)
        if name == "exp_max":
            return Bind("UB", 1, nr, FP32, (exp_max.region(own) if t else DISCARD) if data else None,
                        on_write=(exp_max.write,) if first and t > 0 else ())
        if name == "qk_fifo":
            return Bind("GM", nr, n.tile_s1, FP32, qk.region(rows) if data else None, chunks=kf, load="TLOAD QK",
                        fifo=qk)
        if name == "p_fifo":
            return Bind("GM", nr, n.tile_s1, FP16, p.region(rows) if data else None, chunks=kf,
                        store="TSTORE x_exp →p_tile_fifo", fifo=p)
        return None

    binds = Binds(make, listing, {"rows": nr, "cols": n.tile_s1})

    def compute(step: Step, binds: Binds) -> tuple[Effect, ...] | None:
        if step is not last_vector(steps) or not numerics:
            return None
        names = dict(zip(VOCABULARY.context, (t == 0, first, r == kf - 1, coverage, n.softcap > 0)))
        fn = softmax_of(listing, k.data.backend, names, b.masked(t, row0, nr), n, nr)
        m, l = binds["m"].location, binds["l"].location
        srcs = (binds["qk"].location, None, None) if t == 0 else (binds["qk"].location, m, l)
        op: tuple[Effect, ...] = (Compute(fn, srcs, (binds["x_exp"].location, binds["exp_max"].location, m, l)),)
        if t == 0:  # l1_exp_max is all ones and not kept; the dump shows those ones
            op += k.dump("exp_max", t, row0, Const(np.ones(nr, np.float32)))
        else:
            op += k.dump("exp_max", t, row0, binds["exp_max"].location, t % buf.l1_exp_max[lane].count)
        return op + (*k.dump("global_max", t, row0, m), *k.dump("global_sum", t, row0, l))

    def extra(step: Step, binds: Binds) -> tuple[Effect, ...]:
        if not numerics or "p_fifo" not in step.instructions[0].writes:
            return ()
        return k.dump("p_fifo", t, row0, binds["x_exp"].location, p.t % k.p_fifo.depth)

    yield from issue(k.site(STAGE, lane), steps, binds, t, r, (nr, n.tile_s1), compute if data else None, extra)
