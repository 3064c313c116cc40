"""A stage order of my own, as one module: the manual kernel's cube loop with the PTO-DSL port's vector loop.

The AIC issues QK(t + qk_preload) before PV(t), sub-tile by sub-tile, as ``runTFA`` does; each AIV updates the
output with GU(t) before it starts the row slices of P(t + qk_preload), as the port's ``vec_unit_body`` does.
compute_p then runs qk_preload − 1 tiles ahead of compute_gu, one fewer than on the manual order, so a
``qk_preload = cv_fifo_size`` schedule no longer overwrites the ``l1_exp_max`` ring.

Load it with ``--plugin docs/examples/plugins/gu_first.py`` (or ``kernel.plugins`` in a config, a bundle or a
sweep's ``[base]``) and choose it with ``--set kernel.stage_order=gu_first`` (docs/guide/extending.md).
"""
from __future__ import annotations

import sys

from tfa_sim.api.plugins import register
from tfa_sim.stages import order_pv_qk, order_qk_pv

aic_steady = order_qk_pv.aic_steady  # QK(t + preload), then PV(t), per sub-tile
aiv_steady = order_pv_qk.aiv_steady  # GU(t), then the row slices of P(t + preload)


def needs_preload(config) -> str | None:
    """GU(t) waits for PV(t), whose P(t) a preload of 0 would issue only after it: a deadlock."""
    if config.schedule.qk_preload >= 1:
        return None
    return ("kernel.stage_order = gu_first runs GU(t) before P(t + qk_preload): with qk_preload = 0 GU(t) would "
            "wait for the P it comes before; use qk_preload ≥ 1")


register("stage_order", "gu_first", sys.modules[__name__],
         doc="QK(t + preload) then PV(t) on the cube; GU(t) then P(t + preload) on each AIV",
         source="docs/examples/plugins/gu_first.py (the manual cube loop, the port's vector loop)",
         rules=(needs_preload,))
