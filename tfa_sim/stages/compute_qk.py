"""``compute_qk`` on the AIC: one CUBE_S0×CUBE_S1 sub-tile of Q·Kᵀ into the QK FIFO, as its listing says
(``listings.compute_qk``: configs/listings/compute_qk/, docs/kernel.md "Listings").

The listing is the call's program: at the block's first sub-tile ``TLOAD Q`` into the L1 tile the unit holds
("left tile stationary"); the producer's ``TALLOC`` where ``kernel.talloc`` puts it; ``TLOAD K`` (MTE2) into an
L1 slot; ``TEXTRACT`` (MTE1) of the Q and K panels into L0A/L0B halves; ``TMATMUL`` (M): fp16×fp16 products, fp32
sum over HEAD, into the L0C accumulator the AIC program assigned — as the kernel's ``pto_macro_matmul`` issues it,
one TMATMUL on the first K panel, a TMATMUL_ACC on each later one (numerics: :func:`qk_product`); the FIXPIPE
``TSTORE`` into the sub-tile's columns of the tile's FIFO slot, handed over by flags or unit flags
(``kernel.cube_handoff``); the last sub-tile's ``TPUSH``.

A sub-tile entirely above the causal diagonal skips load and matmul; its FIFO columns are defined as +0 (the
vector side masks all of them anyway), so the bits never depend on stale memory.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP16, FP32
from tfa_sim.buffers.data import Compute
from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect
from tfa_sim.listings.program import Step
from tfa_sim.listings.vocabulary import Tile, Vocabulary, declare
from tfa_sim.numerics.rounding import panels
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.driver import Bind, Binds, issue

STAGE = "compute_qk"


def steady(plan: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """A computed sub-tile of a later tile (``tfa-sim listing``'s call)."""
    n = plan.shape
    one = n.k_tile_factor == 1
    return ({"first_tile": False, "first_sub": one, "last_sub": one, "active": True},
            {"rows": n.cube_s0, "head": n.head, "cube_s1": n.cube_s1, "cube_k": n.qk_cube_k})


VOCABULARY = declare(Vocabulary(
    STAGE, "AIC",
    tiles={"l1_q": Tile("L1", ("rows", "head"), "f16", pool=True, carried=True, held=True),
           "gm_q": Tile("GM", ("rows", "head"), "f16"),
           "l1_k": Tile("L1", ("head", "cube_s1"), "f16", pool=True), "gm_k": Tile("GM", ("head", "cube_s1"), "f16"),
           "l0a": Tile("L0A", ("rows", "head"), "f16", pool=True),
           "l0b": Tile("L0B", ("head", "cube_s1"), "f16", pool=True),
           "acc": Tile("L0C", ("rows", "cube_s1"), role="output", pool=True),
           "qk_fifo": Tile("GM", ("rows", "cube_s1"), role="output")},
    fifos=frozenset({"qk_fifo"}), dims=frozenset({"rows", "head", "cube_s1"}),
    context={"first_tile": (False, True), "first_sub": (False, True), "last_sub": (False, True),
             "active": (False, True)},
    steady=steady))


def qk_product(backend: Backend, panel: int, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One sub-tile's Q·Kᵀ in the kernel's calls: HEAD cut into K panels of ``panel``, a TMATMUL on the first,
    a TMATMUL_ACC into the accumulator on each later one (one panel for HEAD ≤ 128)."""
    acc: np.ndarray | None = None
    for cols in panels(q.shape[1], panel):
        acc = backend.compute_qk(q[:, cols], k[:, cols], acc)
    assert acc is not None
    return acc


def compute_qk(k: BlockKernel, t: int, s: int, q_l1: Slot, acc_index: int) -> Program:
    """Sub-tile ``s`` of logical tile ``t`` into L0C accumulator ``acc_index``; ``q_l1``: the unit's Q tile in L1
    (loaded by the unit's first call, given back by its epilogue)."""
    b, plan, buf, listing = k.block, k.plan, k.buf, k.plan.listings[STAGE]
    n = plan.shape
    rows = b.n_rows  # a short block still costs whole 16-row fractals (Costs.matmul)
    fifo = k.qk_fifo.tile(t)
    last = s == n.k_tile_factor - 1
    steps = listing.steps(t == 0, s == 0, last, b.sub_tile_active(t, s))
    cols = (slice(0, rows), slice(s * n.cube_s1, (s + 1) * n.cube_s1))  # the sub-tile's part of the tile
    data = k.numerics

    def make(name: str) -> Bind | None:
        if name == "l1_q":
            return Bind("L1", rows, n.head, FP16, slot=q_l1)
        if name == "gm_q":
            return Bind("GM", rows, n.head, FP16, k.gm_q() if data else None, line=k.q_line(), load="TLOAD Q→L1")
        if name == "l1_k":
            return Bind("L1", n.head, n.cube_s1, FP16, slot=buf.l1_k.slot())
        if name == "gm_k":
            return Bind("GM", n.head, n.cube_s1, FP16, k.gm_k(b.col0(t, s)) if data else None,
                        line=k.kv_line("k", t, s), load="TLOAD K")
        if name == "l0a":
            return Bind("L0A", rows, n.head, FP16, slot=buf.l0a.slot())
        if name == "l0b":
            return Bind("L0B", n.head, n.cube_s1, FP16, slot=buf.l0b.slot())
        if name == "acc":
            return Bind("L0C", rows, n.cube_s1, FP32, slot=buf.l0c.slot(acc_index), cube_k=n.qk_cube_k)
        if name == "qk_fifo":
            return Bind("GM", rows, n.cube_s1, FP32, fifo.region(cols) if data else None, store="FIXPIPE →qk_tile_fifo",
                        fifo=fifo)
        return None

    binds = Binds(make, listing, {"rows": rows, "head": n.head, "cube_s1": n.cube_s1})

    def compute(step: Step, binds: Binds) -> tuple[Effect, ...] | None:
        if step.pipe != "M":
            return None
        a, bb, acc = (binds[name].location for name in ("l0a", "l0b", "acc"))
        return (Compute(partial(qk_product, k.data.backend, n.qk_panel), (a, bb), (acc,)),)

    def extra(step: Step, binds: Binds) -> tuple[Effect, ...]:
        if not (last and "qk_fifo" in step.instructions[0].writes):
            return ()
        return k.dump("qk_fifo", t, 0, fifo.region((slice(0, rows),)), fifo.t % k.qk_fifo.depth)

    yield from issue(k.site(STAGE), steps, binds, t, s, (rows,), compute if data else None, extra)
