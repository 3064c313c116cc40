"""``kernel.stage_order = "pv_qk"``: the steady loop in the PTO-DSL port's order (fa_builder.py).

After the prologue (:mod:`tfa_sim.stages.run_tfa`), per tile t and sub-tile s the AIC runs ``compute_pv(t, s)``
followed by ``compute_qk(t + qk_preload, s)`` (``emit_qk_pv_interleaved``), then drains the last PV tiles; each
AIV runs ``compute_gu(t)`` before the row slices of ``compute_p(t + qk_preload)`` (``vec_unit_body``).  PV(t)
goes first, so it needs ``qk_preload ≥ 1`` (tfa_sim.spec.legality).
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
    """The AIC's steady loop and tail."""
    tiles, preload, kf = k.block.tiles, k.plan.shape.qk_preload, k.plan.shape.k_tile_factor
    for t in range(tiles):
        nxt = t + preload
        qk_acc, pv_acc = acc.step(nxt < tiles)
        for s in range(kf):
            yield from compute_pv(k, t, s, pv_acc)
            if nxt < tiles:
                yield from compute_qk(k, nxt, s, q_l1, qk_acc)


def aiv_steady(k: BlockKernel, lane: int, src: int) -> Program:
    """AIV ``lane``'s steady loop from ping-pong counter ``src``; returns (the counter after it, the unit's last
    ``TSTORE O``)."""
    tiles, preload, kf = k.block.tiles, k.plan.shape.qk_preload, k.plan.shape.k_tile_factor
    store = None
    for t in range(tiles):
        store, src = yield from update_tile(k, lane, t, src)
        if t + preload < tiles:
            for r in range(kf):
                yield from compute_p(k, lane, t + preload, r, src)
                src += 1
    return src, store


def _needs_preload(config: object) -> str | None:
    preload = config.schedule.qk_preload  # type: ignore[attr-defined]
    return None if preload >= 1 else ("kernel.stage_order = pv_qk issues PV(t) before QK(t + qk_preload): with "
                                      "qk_preload = 0 PV(t) would wait for the P of a QK not yet issued; use "
                                      "qk_preload ≥ 1, or stage_order = qk_pv")


STAGE_ORDER.add("pv_qk", sys.modules[__name__], "PV(t) then QK(t + preload) per sub-tile; GU(t) then P(t + preload)",
                "PTO-DSL fa_builder.py `emit_qk_pv_interleaved`, `vec_unit_body`", (_needs_preload,), __name__)
