"""Which L0C accumulator each QK sub-tile and each PV tile takes, as ``kernel.accumulators`` chooses (the choice's
registry values are declared here):

* ``running`` — the manual kernel's ``assign_running_acc_tile``: one running index over the L0C halves; each
  prologue (or no-preload) QK sub-tile takes the next; a steady iteration assigns the QK accumulator (if a next
  tile exists) and then the PV accumulator once;
* ``fixed`` — the port's two accumulators (``qk_acc_a``, ``pv_acc_a``): L0C slots 0 (QK) and 1 (PV) throughout.
"""
from __future__ import annotations

from tfa_sim.buffers.pools import PingPong, Slot
from tfa_sim.spec.choices import ACCUMULATORS

QK_ACC, PV_ACC = 0, 1  # the fixed accumulators' L0C slots


class Running:
    """The running index of one unit's AIC program (``assign_running_acc_tile``)."""

    def __init__(self, l0c: PingPong) -> None:
        self.l0c = l0c
        self.index = 0

    def qk(self) -> int:
        """The accumulator of one prologue (or no-preload) QK sub-tile."""
        self.index += 1
        return self.index - 1

    def pv(self) -> Slot:
        """The accumulator of one no-preload PV tile."""
        return self.l0c.slot(self.qk())

    def step(self, has_next: bool) -> tuple[int, Slot]:
        """(the QK accumulator, the PV accumulator) of one steady iteration; ``has_next``: it runs a QK tile."""
        qk = self.index
        self.index += has_next
        return qk, self.pv()


class Fixed:
    """The port's two fixed accumulators."""

    def __init__(self, l0c: PingPong) -> None:
        self.l0c = l0c

    def qk(self) -> int:
        return QK_ACC

    def pv(self) -> Slot:
        return self.l0c.slot(PV_ACC)

    def step(self, has_next: bool) -> tuple[int, Slot]:
        return QK_ACC, self.l0c.slot(PV_ACC)


ACCUMULATORS.add("running", Running, "a running index over the L0C halves (`assign_running_acc_tile`)",
                 "manual fa_performance_kernel.cpp", (), __name__)
ACCUMULATORS.add("fixed", Fixed, "one QK and one PV accumulator throughout (`qk_acc_a`, `pv_acc_a`)",
                 "PTO-DSL fa_builder.py", (), __name__)

#: Either assignment, as the AIC programs hold it.
Accumulators = Running | Fixed
