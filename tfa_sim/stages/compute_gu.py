"""``compute_gu`` on an AIV: update ``running_o`` (the AIV's CUBE_S0/2 rows × HEAD) with one PV tile.

Per logical tile, in the kernel's order (docs/kernel.md, "The four stages"):

1. the consumer's ``wait()``: the AIV's scalar unit waits for the PV FIFO's ready
   flag, and nothing after it is issued until then;
2. ``TLOAD PV`` (MTE2): the AIV's half of the fp32 PV tile into the UB source
   tile of this call (the shared counter picks it) — on tile 0 straight into
   ``running_o``; then the tile is freed and, when the credit rule says so, a
   credit returned (``free()``);
3. ``VEC update`` (V, ``pto_macro_fa_gu``): from tile 1 on ``O = l1_exp_max ⊙row O
   + PV_t`` with the tile's ``l1_exp_max`` from the ring; after the last tile
   ``O = O ⊘row L`` (numerics: :func:`update`); tile 0 has no vector work but
   its hand-back of the source tile;
4. after the last tile, ``TSTORE O`` (MTE3): the AIV's rows of the output to GM.

A split-S1 block (one chunk of several) does not divide: after its last tile it
stores the unnormalised O and the rows' running max and sum, fp32, for the
combine launch (``TSTORE partial``).  An AIV with no rows (a one-row block)
keeps the handshakes and moves nothing.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP32
from tfa_sim.buffers.data import Compute, Const, Move, View
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, Instr
from tfa_sim.spec import work
from tfa_sim.spec.choices import GU_ROWS
from tfa_sim.stages.block_kernel import BlockKernel

STAGE = "compute_gu"
NOT_RESCALED = Const(None)  # tile 0 has no l1_exp_max: update() ignores it there


def update(backend: Backend, first: bool, last: bool, running_o: np.ndarray, pv: np.ndarray,
           l1_exp_max: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
    """running_o after tile t: PV₀, or l1_exp_max ⊙row O + PV_t; divided by L after the last tile
    (``last`` is False throughout for a split-S1 chunk, which leaves the division to the combine).

    tfa-sim always divides after the last tile, unlike the reference kernel's
    single-tile shortcut (docs/guide/numerics.md).
    """
    o = backend.compute_gu(None if first else running_o, pv, l1_exp_max)
    return backend.normalize(o, l2_global_sum) if last else o


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


def compute_gu(k: BlockKernel, lane: int, t: int, src_id: int, part: int = 0, parts: int = 1) -> Program:
    """GU(t) on AIV ``lane``, or of its row slice ``part`` of ``parts`` (each loaded, updated and, after the last
    tile, stored on its own); its PV lands in the UB source tile of the shared ping-pong counter ``src_id``
    (the UB union), or in the GU input tile of its own call count; returns the ``TSTORE O`` after the block's
    last tile (else None)."""
    n, aiv, block, buf = k.plan.shape, k.aiv[lane], k.block, k.buf
    pv = k.pv_fifo.tile(t, (lane,))
    lane0, lane_n = k.lane_rows(lane)
    size = -(-lane_n // parts)
    first_row = min(lane_n, part * size)
    rows = min(size, lane_n - first_row)
    row0 = lane0 + first_row
    own = slice(row0, row0 + rows)  # this slice's rows of the block
    mine = slice(first_row, first_row + rows)  # and of this AIV's rows
    src = buf.ub_src[lane].slot(src_id) if k.plan.buffers.union else buf.ub_pv[lane].slot(pv.t * parts + part)
    nbytes = rows * n.head * FP32
    done = part == parts - 1  # the tile's last slice frees the PV tile and reads the ring entry
    if part == 0:
        yield k.wait(STAGE, pv.ready)  # wait(): the PV tile is in GM
    load = yield k.instr(
        aiv.MTE2, STAGE, t, part, "TLOAD PV", k.gm_move(nbytes, "gm_to_ub") if rows else 0.0, waits=(src,),
        op=(Move(pv.region(own), src),) if k.numerics else None,
        then=((pv.free, pv.credit) if pv.notifies else (pv.free,)) if done else (), nbytes=nbytes)
    first, last = t == 0, t == block.tiles - 1
    divide = last and not block.partial
    exp_max = buf.l1_exp_max[lane].entry(t)  # tile 0 neither writes nor reads the ring
    op: tuple[Effect, ...] | None = None
    if k.numerics and rows:
        o = View(buf.running_o[lane], mine)
        step = partial(update, k.data.backend, first, divide)
        scale = NOT_RESCALED if first else exp_max.region(mine)
        op = (Compute(step, (o, src, scale, View(buf.l2_global_sum[lane], mine)), (o,)), *k.dump("o_part", t, row0, o))
    cost = k.plan.costs.compute_gu(rows, n.head, first, divide) if rows else 0.0
    vec = yield k.instr(aiv.V, STAGE, t, part, "VEC update", cost, waits=(load,), op=op,
                        then=(src.release,) if first or not done else (exp_max.read, src.release),
                        work=work.compute_gu(k.plan.costs, rows, n.head, first, divide) if rows else None)
    if not last:
        return None
    return (yield from _store(k, lane, t, part, vec, mine, rows))


def _store(k: BlockKernel, lane: int, t: int, part: int, vec: Instr, mine: slice, rows: int) -> Program:
    """After the last tile: the rows' O (a split-S1 chunk: its unnormalised O, max and sum) to GM."""
    n, block, buf = k.plan.shape, k.block, k.buf
    nbytes = rows * n.head * FP32
    moves: tuple[Effect, ...] = ()
    if block.partial:  # the chunk's unnormalised O, max and sum for the combine
        nbytes += 2 * rows * FP32
        if k.numerics and rows:
            moves = (Move(View(buf.running_o[lane], mine), k.gm_o(lane, mine)),
                     Move(View(buf.m2_global_max[lane], mine), k.gm_partial(lane, "m", mine)),
                     Move(View(buf.l2_global_sum[lane], mine), k.gm_partial(lane, "l", mine)))
    elif k.numerics and rows:
        moves = (Move(View(buf.running_o[lane], mine), k.gm_o(lane, mine)),)
    store: Instr = yield k.instr(
        k.aiv[lane].MTE3, STAGE, t, part, "TSTORE partial" if block.partial else "TSTORE O",
        k.gm_move(nbytes, "ub_to_gm") if rows else 0.0, waits=(vec,), op=moves if k.numerics else None,
        nbytes=nbytes)
    return store
