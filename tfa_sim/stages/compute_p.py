"""``compute_p`` on an AIV: the online softmax of one Vec_S0×TILE_S1 row slice of a QK tile.

Per row slice, in the kernel's order (docs/kernel.md, "The four stages"):

1. at row slice 0 the consumer's ``wait()``: the AIV's scalar unit waits for the
   QK FIFO's ready flag, and nothing after it is issued until then;
2. ``TLOAD QK`` (MTE2): the slice's fp32 scores into the UB source tile of this
   call (the shared counter picks it), one DMA per CUBE_S1 sub-tile (the FIFO
   holds the tile sub-tile by sub-tile); the last slice frees the tile and, when
   the credit rule says so, returns a credit (``free()``);
3. ``VEC softmax`` (V): the kernel's op sequence (``pto_macro_fa_softmax``:
   row max of the raw scores, ``(x − m)·s``, exp, ``x_exp = fp16(E)``, row sum
   of the fp32 E, the running ``m2_global_max`` and ``l2_global_sum``, and
   from tile 1 on the tile's ``l1_exp_max`` into the ring) into the ``x_exp``
   tile of the same counter (numerics: :func:`softmax`);
4. at row slice 0, when the credit rule says so, the producer's ``allocate()``;
5. ``TSTORE x_exp →p_tile_fifo`` (MTE3): the fp16 slice into the P FIFO, one DMA
   per sub-tile; the last slice signals the tile ready (``record()``).
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP16, FP32
from tfa_sim.buffers.data import DISCARD, Compute, Const, Move, View
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect
from tfa_sim.spec import work
from tfa_sim.stages.block_kernel import BlockKernel

STAGE = "compute_p"


def softmax(backend: Backend, masked: np.ndarray | None, scale: np.float32, softcap: float, dtype: Any,
            x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Softmax step of one row slice of a tile: x_exp (in ``dtype``), l1_exp_max, M, L.

    Where ``masked``, the mask value is added to the score (after the cap, with ``softcap``); a slice that
    sees nothing needs no special case (exp(0) is exactly 1, exp of a masked score exactly +0).
    """
    return tuple(backend.compute_p(x, m_prev, l_prev, scale, mask=masked, softcap=softcap, out_dtype=dtype))


def compute_p(k: BlockKernel, lane: int, t: int, r: int, src_id: int) -> Program:
    """Row slice ``r`` of logical tile ``t`` on AIV ``lane``; ``src_id``: the shared ping-pong counter.  The
    producer's ``allocate()`` comes before the tile's first store, or with ``kernel.talloc = "before_load"`` (the
    port's ``talloc``) right after the QK ``wait()``, before the first load."""
    b, n, aiv, buf = k.block, k.plan.shape, k.aiv[lane], k.buf
    qk, p = k.qk_fifo.tile(t, (lane,)), k.p_fifo.tile(t, (lane,))
    first, last = r == 0, r == n.k_tile_factor - 1
    lane0, lane_n = k.lane_rows(lane)
    nr = max(0, min(n.vec_s0, lane_n - r * n.vec_s0))  # rows of this slice (fewer, or none, in a short block)
    row0 = lane0 + r * n.vec_s0  # within the block
    rows = slice(row0, row0 + nr)
    src, x_exp = buf.ub_src[lane].slot(src_id), buf.ub_x_exp[lane].slot(src_id)
    src_bytes = nr * n.tile_s1 * FP32
    load_then: tuple[Effect, ...] = ()
    if last:  # free(): the QK tile is read; a credit when the credit rule says so
        load_then = (qk.free, qk.credit) if qk.notifies else (qk.free,)
    talloc = p.credits if first and k.plan.talloc.before_load else ()  # talloc before the load: the P slot's credit now
    if first:  # wait(): the QK tile is in GM
        yield k.wait(STAGE, (*qk.ready, *talloc))
    load_cost = k.gm_move(src_bytes, "gm_to_ub", chunks=n.k_tile_factor) if nr else 0.0
    load = yield k.instr(
        aiv.MTE2, STAGE, t, r, "TLOAD QK", load_cost, waits=(src,),
        op=(Move(qk.region(rows), src),) if k.numerics else None, then=load_then, nbytes=src_bytes)
    exp_max = buf.l1_exp_max[lane].entry(t)  # tile 0 neither writes nor reads the ring
    op: tuple[Effect, ...] | None = None
    if k.numerics and nr:
        own = slice(r * n.vec_s0, r * n.vec_s0 + nr)  # the slice's rows within this AIV's rows
        m, l = View(buf.m2_global_max[lane], own), View(buf.l2_global_sum[lane], own)
        step = partial(softmax, k.data.backend, b.masked(t, row0, nr), n.scale, n.softcap, n.dtype)
        if t == 0:  # l1_exp_max is all ones and not kept; the dump shows those ones
            op = (Compute(step, (src, None, None), (x_exp, DISCARD, m, l)),
                  *k.dump("exp_max", t, row0, Const(np.ones(nr, np.float32))))
        else:
            op = (Compute(step, (src, m, l), (x_exp, exp_max.region(own), m, l)),
                  *k.dump("exp_max", t, row0, exp_max.region(own), t % buf.l1_exp_max[lane].count))
        op += (*k.dump("global_max", t, row0, m), *k.dump("global_sum", t, row0, l))
    shape = (nr, n.tile_s1, t == 0, b.coverage(t, row0, nr), n.softcap > 0)
    cost = k.plan.costs.compute_p(*shape) if nr else 0.0
    vec = yield k.instr(aiv.V, STAGE, t, r, "VEC softmax", cost, waits=(load, x_exp), op=op,
                        then=(src.release, exp_max.write) if first and t > 0 else (src.release,),
                        work=work.compute_p(k.plan.costs, *shape) if nr else None)
    out_bytes = nr * n.tile_s1 * FP16
    store_op: tuple[Effect, ...] | None = None
    if k.numerics and nr:
        store_op = (Move(x_exp, p.region(rows)), *k.dump("p_fifo", t, row0, x_exp, p.t % k.p_fifo.depth))
    store_then = (*((p.claim,) if first else ()), x_exp.release, *((p.push,) if last else ()))
    if first and p.credits and not talloc:
        yield k.wait(STAGE, p.credits)  # allocate(): a P slot before the first store of the tile
    store_cost = k.gm_move(out_bytes, "ub_to_gm", chunks=n.k_tile_factor) if nr else 0.0
    yield k.instr(aiv.MTE3, STAGE, t, r, "TSTORE x_exp →p_tile_fifo", store_cost,
                  waits=(vec,), op=store_op, then=store_then, nbytes=out_bytes)
