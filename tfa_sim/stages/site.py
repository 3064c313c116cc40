"""Where a stage's calls issue: the unit's pipes, how an instruction and a wait are made there, a GM move's
rate, and the run's priced vector groups (:mod:`tfa_sim.stages.driver` issues through it; the M→FIX hand-off's
cost rules, :mod:`tfa_sim.stages.handoffs`, too)."""
from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from tfa_sim.engine.pipes import Effect, GmMove, Instr
from tfa_sim.spec.costs import Costs

#: Each run's priced vector groups, by the group and its tiles' shapes (a run issues a few shapes many times).
VECTOR_MEMO: weakref.WeakKeyDictionary[Costs, dict[Any, tuple[float, str | None]]] = weakref.WeakKeyDictionary()


class Site:
    """Where a stage's calls issue on one unit: the stage, the unit's pipes and the run's costs; how an
    instruction is made there (:meth:`instr`, by ``make(t, sub, pipe, kind, cost, waits, op, then, nbytes, flops,
    work)``), a scalar wait (:meth:`wait`: none here), a GM move (:meth:`gm_move`) and :meth:`previous`, the
    pipe's latest instruction of the unit, which a ``mark`` with nothing else to wait for is ordered after (none
    here).  The kernel's units issue through :class:`~tfa_sim.stages.block_kernel.KernelSite`, made once per unit
    and stage."""

    def __init__(self, stage: str, pipes: Any, costs: Costs, make: Callable[..., Instr] | None = None) -> None:
        self.stage, self.costs, self.make = stage, costs, make
        self.pipe: dict[str, Any] = dict(zip(pipes._fields, pipes))  # the unit's pipes by name (MTE2, V…)
        self.priced: dict[Any, tuple[float, str | None]] = VECTOR_MEMO.setdefault(costs, {})
        self.carried: dict[str, Instr] = {}  # a carried tile → the instruction that wrote it (the block's Q load)

    def instr(self, t: int, sub: int, pipe: Any, kind: str, cost: float | GmMove, waits: tuple[Any, ...],
              op: tuple[Effect, ...] | None, then: tuple[Effect, ...], nbytes: int, flops: int,
              work: str | None) -> Instr:
        assert self.make is not None, "a Site without make issues through a subclass's instr"
        return self.make(t, sub, pipe, kind, cost, waits, op, then, nbytes, flops, work)

    def wait(self, flags: Sequence[Any]) -> Any:
        return None

    def gm_move(self, nbytes: int, path: str, line: Hashable | None = None, chunks: int = 1) -> GmMove:
        """A GM transfer of ``nbytes`` on ``path`` (a preset's [move] key: ``gm_to_l1``, ``gm_to_ub``,
        ``ub_to_gm``, ``l0c_to_gm``) in ``chunks`` DMA instructions; ``line`` names an input read for the L2
        (:mod:`tfa_sim.engine.gm`)."""
        return GmMove(nbytes, getattr(self.costs.move, path), line, chunks)

    def previous(self, pipe: Any) -> Instr | None:
        return None
