"""Which L0C accumulator each QK sub-tile and each PV tile takes, as ``kernel.accumulators`` chooses.

* ``running`` — the manual kernel's ``assign_running_acc_tile``: one running index over the L0C halves; each
  prologue (or no-preload) QK sub-tile takes the next; a steady iteration assigns the QK accumulator (if a next
  tile exists) and then the PV accumulator once;
* ``fixed`` — the port's two accumulators (``qk_acc_a``, ``pv_acc_a``): L0C slots 0 (QK) and 1 (PV) throughout.
"""
from __future__ import annotations

from tfa_sim.buffers.pools import PingPong, Slot

QK_ACC, PV_ACC = 0, 1  # the fixed accumulators' L0C slots


class Accumulators:
    """The accumulator assignment of one unit's AIC program."""

    def __init__(self, l0c: PingPong, running: bool) -> None:
        self.l0c, self.running = l0c, running
        self.index = 0  # the running index

    def _next(self) -> int:
        self.index += 1
        return self.index - 1

    def qk(self) -> int:
        """The accumulator of one prologue (or no-preload) QK sub-tile."""
        return self._next() if self.running else QK_ACC

    def pv(self) -> Slot:
        """The accumulator of one no-preload PV tile."""
        return self.l0c.slot(self._next() if self.running else PV_ACC)

    def step(self, has_next: bool) -> tuple[int, Slot]:
        """(the QK accumulator, the PV accumulator) of one steady iteration; ``has_next``: it runs a QK tile."""
        if not self.running:
            return QK_ACC, self.l0c.slot(PV_ACC)
        qk = self.index
        self.index += has_next
        return qk, self.pv()
