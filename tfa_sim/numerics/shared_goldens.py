"""A run's two goldens, computed by a forked child and by the run itself once its simulation is done.

Both goldens split into independent units (:func:`tfa_sim.numerics.golden.units`): the kernel-ordered golden's chunks
of up to ``GOLDEN_ROWS`` query rows of a head, then the float64 reference's blocks of rows.  The child takes
units from the front of that list, largest first; the run, when it asks for the result, takes the rest from
the back, so on two CPUs neither waits idle for the other while units remain (a native run's simulation ends
before the goldens do; a numpy run's ends after them and finds none left).  Each side publishes how far it
got in shared memory and stops where the other is; if both reach for the same unit at once, both compute it
and write the same bits.  Results go to shared memory, so nothing is pickled; a unit the child claimed but
did not finish (it raised or was killed) is computed again by the run, which raises any error itself.
"""
from __future__ import annotations

import mmap

import numpy as np

from tfa_sim.numerics.blas import blas_threads
from tfa_sim.numerics.golden import GOLDEN_ROWS, KernelGolden, Reference, reference_rows, units
from tfa_sim.numerics.inputs import Inputs
from tfa_sim.sim.parallel import Forked
from tfa_sim.spec.blocks import config_mask
from tfa_sim.spec.config import Config

#: Who computed a unit (``SharedGoldens.done``): nobody yet, the forked child, the run.
PENDING, CHILD, RUN = 0, 1, 2


class SharedGoldens:
    """The float64 reference (``fp64``) and the kernel-ordered golden's output (``kernel_o``) of ``inputs``,
    [batch, heads, S0, HEAD] each, computed from now on in a forked child when ``fork`` is true; call
    :meth:`result` for both, and :meth:`close` in a ``finally`` (it stops a child nobody waits for)."""

    def __init__(self, inputs: Inputs, config: Config, fork: bool) -> None:
        c = config.case
        self.inputs, self.config, self.mask = inputs, config, config_mask(config)
        self.work = ([(True, u) for u in units(config, GOLDEN_ROWS)]
                     + [(False, u) for u in units(config, reference_rows(config))])
        n, shape = len(self.work), (c.batch, c.heads, c.s0, c.head)
        size = c.batch * c.heads * c.s0 * c.head
        flags = -(-n // 8) * 8
        mem = mmap.mmap(-1, 16 + flags + 12 * size)  # anonymous and shared: the child writes, the run reads
        self._front = np.frombuffer(mem, np.int64, 1, 0)  # units [0, front) are the child's
        self._back = np.frombuffer(mem, np.int64, 1, 8)  # units [back, n) are the run's
        self._back[0] = n
        self.done = np.frombuffer(mem, np.uint8, n, 16)
        self.fp64 = np.frombuffer(mem, np.float64, size, 16 + flags).reshape(shape)
        self.kernel_o = np.frombuffer(mem, np.float32, size, 16 + flags + 8 * size).reshape(shape)
        self._kernel = KernelGolden(self.kernel_o, None, None)
        self._reference: Reference | None = None
        self._child = Forked(self._take, CHILD) if fork else None

    def _take(self, who: int) -> None:
        """Compute units until the other side's: the child from the front, the run from the back."""
        with blas_threads(self.config.numerics.blas_threads):
            while (i := self._claim(who)) is not None:
                self._compute(i, who)

    def _claim(self, who: int) -> int | None:
        """The next unit from ``who``'s end, published before it is computed; None where the other side is."""
        if who == CHILD:
            i = int(self._front[0])
            if i >= self._back[0]:
                return None
            self._front[0] = i + 1
        else:
            i = int(self._back[0]) - 1
            if i < self._front[0]:
                return None
            self._back[0] = i
        return i

    def _compute(self, i: int, who: int) -> None:
        if self._reference is None:  # built in the process that computes (the child's own K/V copies)
            self._reference = Reference(self.inputs, self.config, self.mask, self.fp64)
        is_kernel, unit = self.work[i]
        if is_kernel:
            self._kernel.compute(self.inputs, self.config, self.mask, unit)
        else:
            self._reference(unit)
        self.done[i] = who

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(fp64, kernel_o): the units left taken here, the child's end awaited, then any unit it did not
        finish computed here."""
        self._take(RUN)
        if self._child is not None:
            self._child.result()  # returns when the child has exited
            self.close()
        with blas_threads(self.config.numerics.blas_threads):
            for i in np.flatnonzero(self.done == PENDING):
                self._compute(int(i), RUN)
        return self.fp64, self.kernel_o

    def close(self) -> None:
        """Stop and reap the child if there is one."""
        if self._child is not None:
            self._child.close()
