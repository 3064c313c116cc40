"""``compute_qk`` on the AIC: one CUBE_S0×CUBE_S1 sub-tile of Q·Kᵀ into the QK FIFO.

Per sub-tile, in the kernel's order (docs/kernel.md, "The four stages"):

1. ``TLOAD K`` (MTE2): the K chunk into an L1 slot;
2. ``TEXTRACT`` (MTE1): Q and K panels from L1 into L0A/L0B halves;
3. ``TMATMUL`` (M): fp16×fp16 products, fp32 sum over HEAD, into the L0C accumulator
   the AIC program assigned — as the kernel's ``pto_macro_matmul`` issues it, one
   TMATMUL on the first K panel, a TMATMUL_ACC on each later one (numerics:
   :func:`qk_product`);
4. at sub-tile 0, when the credit rule says so, the producer's ``allocate()``: the
   AIC's scalar unit waits for a credit, and nothing after it is issued until then;
5. ``FIXPIPE →qk_tile_fifo`` (FIX): the fp32 accumulator into the sub-tile's columns
   of the tile's FIFO slot; the last sub-tile's store signals the tile ready
   (``record()``).

A sub-tile entirely above the causal diagonal skips load and matmul; its FIFO
columns are defined as +0 (the vector side masks all of them anyway), so the
bits never depend on stale memory.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP16, FP32
from tfa_sim.buffers.data import Compute, Const, Location, Move
from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, Instr
from tfa_sim.numerics.rounding import panels
from tfa_sim.spec import work
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.handoffs import matmul, store

STAGE = "compute_qk"
ZERO = Const(np.float32(0.0))


def qk_product(backend: Backend, panel: int, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One sub-tile's Q·Kᵀ in the kernel's calls: HEAD cut into K panels of ``panel``, a TMATMUL on the first,
    a TMATMUL_ACC into the accumulator on each later one (one panel for HEAD ≤ 128)."""
    acc: np.ndarray | None = None
    for cols in panels(q.shape[1], panel):
        acc = backend.compute_qk(q[:, cols], k[:, cols], acc)
    assert acc is not None
    return acc


def load_q(k: BlockKernel) -> Program:
    """``TLOAD Q→L1``: the block's CUBE_S0 query rows, loaded once ("left tile stationary").

    Returns the load and the L1 slot that holds Q for the whole block.
    """
    q_l1 = k.buf.l1_q.slot()
    nbytes = k.block.n_rows * k.plan.shape.head * FP16
    load = yield k.instr(
        k.aic.MTE2, STAGE, 0, 0, "TLOAD Q→L1", k.gm_move(nbytes, "gm_to_l1", k.q_line()), waits=(q_l1,),
        op=(Move(k.gm_q(), q_l1),) if k.numerics else None, nbytes=nbytes)
    return load, q_l1


def compute_qk(k: BlockKernel, t: int, s: int, q_load: Instr, q_l1: Slot, acc_index: int) -> Program:
    """Sub-tile ``s`` of logical tile ``t`` into L0C accumulator ``acc_index`` (``q_load``/``q_l1``: the
    block's Q, from :func:`load_q`).  The producer's ``allocate()`` comes after the matmul, before the store, or
    with ``kernel.talloc = "before_load"`` (the port's ``talloc``) before the sub-tile's K load; the matmul hands
    its accumulator to FIX as ``kernel.cube_handoff`` says (:mod:`tfa_sim.stages.handoffs`)."""
    b, plan, aic, buf = k.block, k.plan, k.aic, k.buf
    n = plan.shape
    rows = b.n_rows  # a short block still costs whole 16-row fractals (Costs.matmul)
    fifo = k.qk_fifo.tile(t)
    allocate_first = plan.talloc.before_load
    if s == 0 and allocate_first and fifo.credits:
        yield k.wait(STAGE, fifo.credits)
    last = s == n.k_tile_factor - 1
    cols = (slice(0, rows), slice(s * n.cube_s1, (s + 1) * n.cube_s1))  # the sub-tile's part of the tile
    store_then: tuple[Effect, ...] = (fifo.claim,) if s == 0 else ()
    handoff: tuple[Instr, Instr] | None = None
    out_bytes = 0
    source: Location = ZERO
    if b.sub_tile_active(t, s):
        k_l1, a, bb, acc = buf.l1_k.slot(), buf.l0a.slot(), buf.l0b.slot(), buf.l0c.slot(acc_index)
        k_bytes, q_bytes = n.cube_s1 * n.head * FP16, rows * n.head * FP16
        load = yield k.instr(
            aic.MTE2, STAGE, t, s, "TLOAD K", k.gm_move(k_bytes, "gm_to_l1", k.kv_line("k", t, s)), waits=(k_l1,),
            op=(Move(k.gm_k(b.col0(t, s)), k_l1),) if k.numerics else None, nbytes=k_bytes)
        extract = yield k.instr(
            aic.MTE1, STAGE, t, s, "TEXTRACT", plan.costs.extract(q_bytes, k_bytes),
            waits=(load, q_load, a, bb), op=(Move(q_l1, a), Move(k_l1, bb)) if k.numerics else None,
            then=(k_l1.release,), nbytes=q_bytes + k_bytes, work=work.extract(q_bytes, k_bytes))
        handoff = yield from matmul(
            k, STAGE, t, s, rows, n.cube_s1, n.head, n.qk_cube_k, True, (extract, acc),
            (Compute(partial(qk_product, k.data.backend, n.qk_panel), (a, bb), (acc,)),) if k.numerics else None,
            (a.release, bb.release), 2 * rows * n.cube_s1 * n.head)
        out_bytes, source = rows * n.cube_s1 * FP32, acc
        store_then += (acc.release,)
    if s == 0 and not allocate_first and fifo.credits:
        yield k.wait(STAGE, fifo.credits)  # allocate(): after the matmul, before the store
    if last:
        store_then += (fifo.push,)  # record(): the whole tile is in GM
    op: tuple[Effect, ...] | None = None
    if k.numerics:
        dump = k.dump("qk_fifo", t, 0, fifo.region((slice(0, rows),)), fifo.t % k.qk_fifo.depth) if last else ()
        op = (Move(source, fifo.region(cols)), *dump)
    if handoff is None:  # an inactive sub-tile: its columns stay +0, no bytes move
        yield k.instr(aic.FIX, STAGE, t, s, "FIXPIPE →qk_tile_fifo", 0.0, op=op, then=store_then)
    else:
        yield from store(k, STAGE, t, s, "FIXPIPE →qk_tile_fifo", out_bytes, plan.costs.fractals(rows, n.cube_s1),
                         handoff, (), op, store_then)
