"""``compute_pv`` on the AIC: P tile · V tile → fp32 CUBE_S0×HEAD into the PV FIFO.

Per sub-tile, in the kernel's order (docs/kernel.md, "The four stages"):

1. ``TLOAD V`` (MTE2): the V chunk into an L1 slot — issued before the core
   waits for P;
2. at sub-tile 0 the consumer's ``wait()``: the AIC's scalar unit waits for both
   AIVs' P-FIFO ready flags, and nothing after it is issued until then;
3. ``TLOAD P`` (MTE2): the P chunk (fp16 ``x_exp``) from the P FIFO into an L1
   slot; the last sub-tile frees the P tile and, when the credit rule says so,
   returns a credit (``free()``);
4. ``TEXTRACT`` (MTE1): P and V panels into L0A/L0B halves;
5. ``TMATMUL`` (M): accumulate into the tile's L0C accumulator (taken at sub-tile
   0 and held across the tile's sub-tiles: Init, Acc, Final);
6. after the tile's last active sub-tile, the producer's ``allocate()`` when the
   credit rule says so, then ``FIXPIPE →pv_tile_fifo`` (FIX): one fp32 store of
   the accumulated tile, signalling the tile ready (``record()``).

A sub-tile entirely above the causal diagonal skips load and matmul but still
does the FIFO handshakes (its P is +0, so the skip does not change a bit).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP16, FP32
from tfa_sim.buffers.data import Compute, Move
from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect
from tfa_sim.spec.blocks import Block
from tfa_sim.stages.block_kernel import BlockKernel

STAGE = "compute_pv"

#: What an L0C accumulator holds between the matmuls of one tile: its (P, V) chunk pairs.
Products = list[tuple[np.ndarray, np.ndarray]]


def first_product(p: np.ndarray, v: np.ndarray) -> Products:
    """TMATMUL Init: the accumulator starts with this sub-tile's product."""
    return [(p, v)]


def next_product(acc: Products, p: np.ndarray, v: np.ndarray) -> Products:
    """TMATMUL Acc: the sub-tile's product joins the tile's accumulation."""
    return [*acc, (p, v)]


def tile_product(backend: Backend, products: Products) -> np.ndarray:
    """The L0C sum of a tile's sub-products: one fp32 accumulation over its computed columns, in order."""
    p = np.concatenate([p for p, _ in products], axis=1)
    v = np.concatenate([v for _, v in products], axis=0)
    return backend.compute_pv(p, v)


def pv_tile(backend: Backend, block: Block, t: int, p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """P (rows × TILE_S1) · V (TILE_S1 × HEAD) over the computed sub-tiles' columns only (the others' P is
    +0 and never loaded)."""
    cs = block.cube_s1
    cols = np.concatenate([np.arange(s * cs, (s + 1) * cs) for s in block.active_subs(t)])
    return backend.compute_pv(p[:, cols], v[cols])


def compute_pv(k: BlockKernel, t: int, s: int, acc: Slot) -> Program:
    """Sub-tile ``s`` of logical tile ``t`` into the accumulator ``acc`` (one per tile, as the kernel assigns)."""
    b, n, aic = k.block, k.shape, k.aic
    p = k.p_fifo.tile(t)
    free: tuple[Effect, ...] = ()
    if s == n.k_tile_factor - 1:  # free(): the P tile is read; a credit when the credit rule says so
        free = (p.free, p.credit) if p.notifies else (p.free,)
    if not b.sub_tile_active(t, s):  # no row sees these keys: only the FIFO handshakes
        if s == 0:
            yield k.wait(STAGE, p.ready)
        yield k.instr(aic.MTE2, STAGE, t, s, "handshake", 0.0, then=free)
        return
    rows = b.n_rows
    cols = (slice(0, rows), slice(s * n.cube_s1, (s + 1) * n.cube_s1))
    p_l1, v_l1, a, bb = k.l1_p.slot(), k.l1_v.slot(), k.l0a.slot(), k.l0b.slot()
    p_bytes, v_bytes = rows * n.cube_s1 * FP16, n.cube_s1 * n.head * FP16
    load_v = yield k.instr(
        aic.MTE2, STAGE, t, s, "TLOAD V", k.gm_move(v_bytes, "gm_to_l1", k.kv_line("v", t, s)), waits=(v_l1,),
        op=(Move(k.gm_v(b.col0(t, s)), v_l1),) if k.numerics else None, nbytes=v_bytes)
    if s == 0:
        yield k.wait(STAGE, p.ready)  # wait(): both AIVs' rows of P(t) are in GM
    load_p = yield k.instr(
        aic.MTE2, STAGE, t, s, "TLOAD P", k.gm_move(p_bytes, "gm_to_l1"), waits=(p_l1,),
        op=(Move(p.region(cols), p_l1),) if k.numerics else None, then=free, nbytes=p_bytes)
    extract = yield k.instr(
        aic.MTE1, STAGE, t, s, "TEXTRACT", k.costs.extract(p_bytes, v_bytes), waits=(load_v, load_p, a, bb),
        op=(Move(p_l1, a), Move(v_l1, bb)) if k.numerics else None, then=(p_l1.release, v_l1.release))
    subs = b.active_subs(t)
    init = s == subs[0]  # the accumulator is taken by the tile's first computed sub-tile (Init)
    accumulate = Compute(first_product, (a, bb), (acc,)) if init else Compute(next_product, (acc, a, bb), (acc,))
    matmul = yield k.instr(
        aic.M, STAGE, t, s, "TMATMUL", k.costs.matmul(rows, n.head, n.cube_s1, n.pv_cube_k),
        waits=(extract, acc) if init else (extract,), op=(accumulate,) if k.numerics else None,
        then=(a.release, bb.release), flops=2 * rows * n.cube_s1 * n.head)
    if s != subs[-1]:
        return
    pv = k.pv_fifo.tile(t)
    if pv.credits:
        yield k.wait(STAGE, pv.credits)  # allocate(): a PV slot before the store
    nbytes = rows * n.head * FP32
    op: tuple[Effect, ...] | None = None
    if k.numerics:
        region = pv.region((slice(0, rows),))
        op = (Compute(partial(tile_product, k.data.backend), (acc,), (region,)),
              *k.dump("pv_fifo", t, 0, region, t % k.pv_fifo.depth))
    yield k.instr(aic.FIX, STAGE, t, n.k_tile_factor - 1, "FIXPIPE →pv_tile_fifo", k.gm_move(nbytes, "l0c_to_gm"),
                  waits=(matmul,), op=op, then=(pv.claim, acc.release, pv.push), nbytes=nbytes)
