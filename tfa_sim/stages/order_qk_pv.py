"""``kernel.stage_order = "qk_pv"``: the steady loop in the manual kernel's order (``runTFA``; the JIT build's).

After the prologue (:mod:`tfa_sim.stages.run_tfa`), per logical tile t and sub-tile s the AIC runs
``compute_qk(t + qk_preload, s)`` (if that tile exists) followed by ``compute_pv(t, s)``; each AIV runs the row
slices of ``compute_p(t + qk_preload)`` before ``compute_gu(t)``.  ``qk_preload = 0`` is tfa-sim's no-preload
schedule: QK(t) then PV(t), P(t) then GU(t).
"""
from __future__ import annotations

import sys

from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.issue import Program
from tfa_sim.spec.choices import STAGE_ORDER
from tfa_sim.stages.accumulators import Accumulators
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.compute_gu import update_tile
from tfa_sim.stages.compute_p import compute_p
from tfa_sim.stages.compute_pv import compute_pv
from tfa_sim.stages.compute_qk import compute_qk


def aic_steady(k: BlockKernel, q_l1: Slot, acc: Accumulators) -> Program:
    """The AIC's steady loop and tail (the whole program after Q with no preload)."""
    tiles, preload, kf = k.block.tiles, k.plan.shape.qk_preload, k.plan.shape.k_tile_factor
    if preload == 0:
        for t in range(tiles):
            for s in range(kf):
                yield from compute_qk(k, t, s, q_l1, acc.qk())
            pv_acc = acc.pv()
            for s in range(kf):
                yield from compute_pv(k, t, s, pv_acc)
        return
    for t in range(tiles):
        nxt = t + preload
        qk_acc, pv_acc = acc.step(nxt < tiles)
        for s in range(kf):
            if nxt < tiles:
                yield from compute_qk(k, nxt, s, q_l1, qk_acc)
            yield from compute_pv(k, t, s, pv_acc)


def aiv_steady(k: BlockKernel, lane: int, src: int) -> Program:
    """AIV ``lane``'s steady loop from ping-pong counter ``src``; returns (the counter after it, the unit's last
    ``TSTORE O``)."""
    tiles, preload, kf = k.block.tiles, k.plan.shape.qk_preload, k.plan.shape.k_tile_factor
    store = None
    for t in range(tiles):
        nxt = t + preload  # with preload 0: P(t) right before GU(t)
        if nxt < tiles:
            for r in range(kf):
                yield from compute_p(k, lane, nxt, r, src)
                src += 1
        store, src = yield from update_tile(k, lane, t, src)
    return src, store


STAGE_ORDER.add("qk_pv", sys.modules[__name__], "QK(t + preload) then PV(t) per sub-tile; P(t + preload) then GU(t)",
                "manual `runTFA` steady loop; JIT fa_kernel.cpp", (), __name__)
