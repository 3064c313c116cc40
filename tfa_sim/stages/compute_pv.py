"""``compute_pv`` on the AIC: P tile · V tile → fp32 CUBE_S0×HEAD into the PV FIFO.

Per sub-tile, in the kernel's order (docs/kernel.md, "The four stages"):

1. ``TLOAD V`` (MTE2): the V chunk into an L1 slot — issued before the core
   waits for P;
2. at sub-tile 0 the consumer's ``wait()``: the AIC's scalar unit waits for both
   AIVs' P-FIFO ready flags, and nothing after it is issued until then;
3. ``TLOAD P`` (MTE2): the P chunk (fp16 ``x_exp``) from the P FIFO into an L1
   slot; the last sub-tile frees the P tile and, when the credit rule says so,
   returns a credit (``free()``; with ``kernel.pv_loads = "p_first"``: with its V load, below);
4. ``TEXTRACT`` (MTE1): P and V panels into L0A/L0B halves;
5. ``TMATMUL`` (M): accumulate into the tile's L0C accumulator (taken at sub-tile
   0 and held across the tile's sub-tiles: Init, Acc, Final) — the accumulator
   holds the running fp32 tile; the tile's first computed sub-tile is a TMATMUL,
   every later one a TMATMUL_ACC into it (numerics: :func:`pv_product`);
6. after the tile's last active sub-tile, the producer's ``allocate()`` when the
   credit rule says so, then ``FIXPIPE →pv_tile_fifo`` (FIX): one fp32 store of
   the accumulated tile, signalling the tile ready (``record()``).

A sub-tile entirely above the causal diagonal skips load and matmul but still
does the FIFO handshakes (its P is +0, so the skip does not change a bit).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.buffers.capacity import FP16, FP32
from tfa_sim.buffers.data import Compute, Move
from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect
from tfa_sim.numerics.rounding import panels
from tfa_sim.spec import work
from tfa_sim.spec.blocks import Block
from tfa_sim.spec.choices import PV_LOADS
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.handoffs import matmul, store

STAGE = "compute_pv"


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


@dataclass(frozen=True)
class PvLoads:
    """What a ``kernel.pv_loads`` value does: whether V is loaded before compute_pv waits for P."""

    v_first: bool


PV_LOADS.add("v_first", PvLoads(True), "`TLOAD V` issued before the wait for P", "manual `compute_pv`", (), __name__)
PV_LOADS.add("p_first", PvLoads(False), "P loaded, then V; the P tile's free after the last V load",
             "PTO-DSL fa_builder.py `emit_pv_sub`, `push_pv`", (), __name__)


def _load_v(k: BlockKernel, t: int, s: int, v_l1: Slot, v_bytes: int, then: tuple[Effect, ...] = ()) -> Program:
    """``TLOAD V``: the sub-tile's V chunk into an L1 slot (``then``: its completion effects)."""
    load = yield k.instr(
        k.aic.MTE2, STAGE, t, s, "TLOAD V", k.gm_move(v_bytes, "gm_to_l1", k.kv_line("v", t, s)), waits=(v_l1,),
        op=(Move(k.gm_v(k.block.col0(t, s)), v_l1),) if k.numerics else None, then=then, nbytes=v_bytes)
    return load


def compute_pv(k: BlockKernel, t: int, s: int, acc: Slot) -> Program:
    """Sub-tile ``s`` of logical tile ``t`` into the accumulator ``acc`` (one per tile, as the kernel assigns).
    With ``kernel.pv_loads = "v_first"`` the V load is issued before the wait for P (the manual kernel); with
    ``p_first`` after the P load (the port's ``emit_pv_sub``), and the P tile's ``free()`` follows the last
    sub-tile's V load on the MTE2 (``push_pv``: the ``tfree`` after the sub-tile's loads).  The tile's last
    computed sub-tile is its final-phase matmul, handed to FIX as ``kernel.cube_handoff`` says."""
    b, plan, aic, buf = k.block, k.plan, k.aic, k.buf
    n = plan.shape
    v_first = plan.pv_loads.v_first
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
    p_l1, v_l1, a, bb = buf.l1_p.slot(), buf.l1_v.slot(), buf.l0a.slot(), buf.l0b.slot()
    p_bytes, v_bytes = rows * n.cube_s1 * FP16, n.cube_s1 * n.head * FP16
    load_v = (yield from _load_v(k, t, s, v_l1, v_bytes)) if v_first else None
    if s == 0:
        yield k.wait(STAGE, p.ready)  # wait(): both AIVs' rows of P(t) are in GM
    load_p = yield k.instr(
        aic.MTE2, STAGE, t, s, "TLOAD P", k.gm_move(p_bytes, "gm_to_l1"), waits=(p_l1,),
        op=(Move(p.region(cols), p_l1),) if k.numerics else None, then=free if v_first else (), nbytes=p_bytes)
    if load_v is None:
        load_v = yield from _load_v(k, t, s, v_l1, v_bytes, then=free)
    extract = yield k.instr(
        aic.MTE1, STAGE, t, s, "TEXTRACT", plan.costs.extract(p_bytes, v_bytes), waits=(load_v, load_p, a, bb),
        op=(Move(p_l1, a), Move(v_l1, bb)) if k.numerics else None, then=(p_l1.release, v_l1.release),
        nbytes=p_bytes + v_bytes, work=work.extract(p_bytes, v_bytes))
    subs = b.active_subs(t)
    init = s == subs[0]  # the accumulator is taken by the tile's first computed sub-tile (Init)
    final = s == subs[-1]  # and handed to FIX after its last (Final)
    accumulate: tuple[Effect, ...] | None = None
    if k.numerics:  # Init: a TMATMUL into the accumulator; Acc: TMATMUL_ACC
        step = partial(pv_product, k.data.backend, n.pv_panel)
        accumulate = (Compute(partial(step, None), (a, bb), (acc,)) if init else Compute(step, (acc, a, bb), (acc,)),)
    handoff = yield from matmul(k, STAGE, t, s, rows, n.head, n.cube_s1, n.pv_cube_k, final,
                                (extract, acc) if init else (extract,), accumulate, (a.release, bb.release),
                                2 * rows * n.cube_s1 * n.head)
    if not final:
        return
    pv = k.pv_fifo.tile(t)
    if pv.credits:
        yield k.wait(STAGE, pv.credits)  # allocate(): a PV slot before the store
    nbytes = rows * n.head * FP32
    op: tuple[Effect, ...] | None = None
    if k.numerics:
        region = pv.region((slice(0, rows),))
        op = (Move(acc, region), *k.dump("pv_fifo", t, 0, region, pv.t % k.pv_fifo.depth))
    yield from store(k, STAGE, t, n.k_tile_factor - 1, "FIXPIPE →pv_tile_fifo", nbytes,
                     plan.costs.fractals(rows, n.head), handoff, (), op, (pv.claim, acc.release, pv.push))
