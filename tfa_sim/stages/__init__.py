"""The TFA kernel as SimPy programs: ``run_tfa`` (the per-unit loops) and its four stages, one file each.

* ``compute_qk``  (AIC): Q block · K sub-tileᵀ → fp32 into the QK FIFO;
* ``compute_p``   (AIV): online softmax of a row slice → fp16 ``x_exp``, ``l1_exp_max``;
* ``compute_pv``  (AIC): P tile · V tile → fp32 into the PV FIFO;
* ``compute_gu``  (AIV): ``running_o`` update, final normalisation.

Each stage function is a generator for one call of the kernel's stage (a
sub-tile, a row slice or a tile): top to bottom it yields the stage's
instruction groups, each naming its pipe, the buffer slots and flags it waits
on, its cost, the data it moves or computes (``op``, only when numerics are
on: ``op=(…) if k.numerics else None``) with its intermediate dump, and the slots and flags
it releases or sets when it completes (``then``).  ``run_tfa`` strings the
calls together per unit (the prologues, then the steady loop of ``kernel.stage_order``: ``order_qk_pv`` for the
manual kernel's order, ``order_pv_qk`` for the PTO-DSL port's) and around the units as the launch grid does;
the engine issues them.
"""
from __future__ import annotations

#: What a block (or a persistent core) does after its last stage call: drain credits, signal block end.
EPILOGUE = "epilogue"
#: Stage names in report order (the engine knows them only as labels).
STAGES = ("compute_qk", "compute_p", "compute_pv", "compute_gu", EPILOGUE)
#: The split-S1 combine launch's stage (tfa_sim/stages/combine.py).
COMBINE = "combine"
#: Every stage an event log may name.
LOGGED_STAGES = (*STAGES, COMBINE)
