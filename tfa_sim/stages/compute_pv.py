"""``compute_pv`` on the AIC: P tile · V tile → fp32 CUBE_S0×HEAD into the PV FIFO, as its listing says
(``listings.compute_pv``: configs/listings/compute_pv/, docs/kernel.md "Listings").

The listing is the call's program: ``TLOAD V`` into an L1 slot (before the wait for P with
``kernel.pv_loads = "v_first"``, the manual kernel's; after the P load with ``p_first``, the port's); at sub-tile 0
the consumer's ``TPOP``: the AIC waits for both AIVs' P-FIFO ready flags; ``TLOAD P`` of the P chunk (fp16
``x_exp``); the last sub-tile's ``TFREE``; ``TEXTRACT`` of P and V panels into L0A/L0B halves; ``TMATMUL`` into
the tile's L0C accumulator (taken by the tile's first computed sub-tile and held across its sub-tiles: Init, Acc,
Final) — the tile's first computed sub-tile a TMATMUL, every later one a TMATMUL_ACC (numerics:
:func:`pv_product`); after the tile's last computed sub-tile the producer's ``TALLOC``, the FIXPIPE ``TSTORE`` of
the accumulated tile and the ``TPUSH``.

A sub-tile entirely above the causal diagonal skips load and matmul but still does the FIFO handshakes (its P is
+0, so the skip does not change a bit).
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
from tfa_sim.listings.vocabulary import Selects, Tile, Vocabulary, declare
from tfa_sim.numerics.rounding import panels
from tfa_sim.spec.blocks import Block
from tfa_sim.spec.choices import PV_LOADS
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.driver import Bind, Binds, issue

STAGE = "compute_pv"


def steady(plan: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """A computed sub-tile in the middle of a tile (``tfa-sim listing``'s call)."""
    n = plan.shape
    one = n.k_tile_factor == 1
    return ({"first_sub": one, "last_sub": one, "active": True, "init": one, "final": one},
            {"rows": n.cube_s0, "head": n.head, "cube_s1": n.cube_s1, "cube_k": n.pv_cube_k})


VOCABULARY = declare(Vocabulary(
    STAGE, "AIC",
    tiles={"l1_p": Tile("L1", ("rows", "cube_s1"), "f16", pool=True), "p_fifo": Tile("GM", ("rows", "cube_s1"), "f16"),
           "l1_v": Tile("L1", ("cube_s1", "head"), "f16", pool=True), "gm_v": Tile("GM", ("cube_s1", "head"), "f16"),
           "l0a": Tile("L0A", ("rows", "cube_s1"), "f16", pool=True),
           "l0b": Tile("L0B", ("cube_s1", "head"), "f16", pool=True),
           "acc": Tile("L0C", ("rows", "head"), role="state", pool=True, held=True),
           "pv_fifo": Tile("GM", ("rows", "head"), role="output")},
    fifos=frozenset({"p_fifo", "pv_fifo"}), dims=frozenset({"rows", "head", "cube_s1"}),
    context={"first_sub": (False, True), "last_sub": (False, True), "active": (False, True), "init": (False, True),
             "final": (False, True)},
    steady=steady))


def pv_product(backend: Backend, panel: int, acc: np.ndarray | None, p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One sub-tile's P·V into the tile's L0C accumulator ``acc`` (fp32 rows × HEAD; None before the tile's
    first computed sub-tile) in the kernel's calls: the sub-tile's keys cut into K panels of ``panel``, each
    a TMATMUL_ACC into the accumulator — the tile's very first a TMATMUL (Init).  What a TMATMUL_ACC does
    with the accumulator is the backend's reference (npu: the chain continues; cpu_sim: a fresh chain
    added once)."""
    for keys in panels(p.shape[1], panel):
        acc = backend.compute_pv(p[:, keys], v[keys], acc)
    assert acc is not None
    return acc


def pv_tile(backend: Backend, panel: int, block: Block, t: int, p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """P (rows × TILE_S1) · V (TILE_S1 × HEAD) as the stage issues it: :func:`pv_product` per computed sub-tile,
    in order (the others' P is +0 and never loaded)."""
    cs = block.cube_s1
    acc: np.ndarray | None = None
    for s in block.active_subs(t):
        keys = slice(s * cs, (s + 1) * cs)
        acc = pv_product(backend, panel, acc, p[:, keys], v[keys])
    return np.zeros((p.shape[0], v.shape[1]), np.float32) if acc is None else acc


PV_LOADS.add("v_first", Selects((STAGE,)), "`TLOAD V` issued before the wait for P", "manual `compute_pv`", (),
             __name__)
PV_LOADS.add("p_first", Selects((STAGE,)), "P loaded, then V; the P tile's free after the last V load",
             "PTO-DSL fa_builder.py `emit_pv_sub`, `push_pv`", (), __name__)


def compute_pv(k: BlockKernel, t: int, s: int, acc: Slot) -> Program:
    """Sub-tile ``s`` of logical tile ``t`` into the accumulator ``acc`` (one per tile, as the kernel assigns)."""
    b, plan, buf, listing = k.block, k.plan, k.buf, k.plan.listings[STAGE]
    n = plan.shape
    p = k.p_fifo.tile(t)
    active = b.sub_tile_active(t, s)
    subs = b.active_subs(t) if active else [s]
    init, final = s == subs[0], s == subs[-1]  # the accumulator's first (Init) and last (Final) computed sub-tiles
    steps = listing.steps(s == 0, s == n.k_tile_factor - 1, active, init, final)
    rows = b.n_rows
    cols = (slice(0, rows), slice(s * n.cube_s1, (s + 1) * n.cube_s1))
    data = k.numerics

    def make(name: str) -> Bind | None:
        if name == "l1_p":
            return Bind("L1", rows, n.cube_s1, FP16, slot=buf.l1_p.slot())
        if name == "p_fifo":
            return Bind("GM", rows, n.cube_s1, FP16, p.region(cols) if data else None, load="TLOAD P", fifo=p)
        if name == "l1_v":
            return Bind("L1", n.cube_s1, n.head, FP16, slot=buf.l1_v.slot())
        if name == "gm_v":
            return Bind("GM", n.cube_s1, n.head, FP16, k.gm_v(b.col0(t, s)) if data else None,
                        line=k.kv_line("v", t, s), load="TLOAD V")
        if name == "l0a":
            return Bind("L0A", rows, n.cube_s1, FP16, slot=buf.l0a.slot())
        if name == "l0b":
            return Bind("L0B", n.cube_s1, n.head, FP16, slot=buf.l0b.slot())
        if name == "acc":
            return Bind("L0C", rows, n.head, FP32, slot=acc, cube_k=n.pv_cube_k)
        if name == "pv_fifo":
            pv = k.pv_fifo.tile(t)
            return Bind("GM", rows, n.head, FP32, pv.region((slice(0, rows),)) if data else None,
                        store="FIXPIPE →pv_tile_fifo", fifo=pv)
        return None

    binds = Binds(make, listing, {"rows": rows, "head": n.head, "cube_s1": n.cube_s1})

    def compute(step: Step, binds: Binds) -> tuple[Effect, ...] | None:
        if step.pipe != "M":
            return None
        a, bb, accumulator = (binds[name].location for name in ("l0a", "l0b", "acc"))
        product = partial(pv_product, k.data.backend, n.pv_panel)
        if step.instructions[0].name == "TMATMUL":  # Init: a TMATMUL into the accumulator; Acc: TMATMUL_ACC
            return (Compute(partial(product, None), (a, bb), (accumulator,)),)
        return (Compute(product, (accumulator, a, bb), (accumulator,)),)

    def extra(step: Step, binds: Binds) -> tuple[Effect, ...]:
        if "pv_fifo" not in step.instructions[0].writes:
            return ()
        pv = binds["pv_fifo"]
        return k.dump("pv_fifo", t, 0, pv.location, pv.fifo.t % k.pv_fifo.depth)

    yield from issue(k.site(STAGE), steps, binds, t, s, (rows,), compute if data else None, extra)
