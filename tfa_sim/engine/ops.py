"""Numerics of finished blocks on worker threads (``numerics.threads``).

An instruction's data steps (``Instr.op``) normally run when it completes, in
simulated-time order.  The blocks of a launch share no data: each has its own
buffers and writes its own rows (or its own partials) of GM.  So a block's
steps can instead be collected as its instructions complete and run, in that
same order, on a worker thread once the block has ended, while the simulation
goes on with other blocks.  Within a block nothing changes order, and no block
reads what another of its launch writes, so the output bits are those of the
in-order run for any thread count (tests/test_ops_threads.py).  The next launch
(the split-S1 combine reads the partials) starts only after every step of the
previous one has run (:meth:`BlockOps.drain`).  Stage kernels release the GIL
(cffi calls, numpy's loops), so the workers use the other cores.
"""
from __future__ import annotations

from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class BlockOps:
    """Collects each block's data steps as its instructions complete; runs a block's on a worker at its end."""

    def __init__(self, threads: int) -> None:
        self.pending: defaultdict[int, list[Any]] = defaultdict(list)  # block index → finished Instrs with ops
        self._pool = ThreadPoolExecutor(threads, "numerics")
        self._futures: deque[Future[None]] = deque()
        self._backlog = 2 * threads  # ended blocks allowed to wait for a worker before the simulation waits

    def add(self, ins: Any) -> None:
        """``ins`` completed: its steps run with its block's (Pipe._finish)."""
        self.pending[ins.block].append(ins)

    def block_done(self, block: int, run: Any) -> None:
        """Block ``block`` has ended: run its steps in completion order on a worker, then drop its tiles.  When
        the workers fall behind (numpy's steps take longer than simulating), wait for the oldest, so that the
        finished instructions held for them stay a few blocks' worth."""
        self._futures.append(self._pool.submit(_run_steps, self.pending.pop(block, []), run))
        while len(self._futures) > self._backlog:
            self._futures.popleft().result()

    def drain(self) -> None:
        """Wait until every submitted block has run (raising the first error of a step)."""
        while self._futures:
            self._futures.popleft().result()

    def close(self) -> None:
        """Stop the workers (steps not yet started are dropped: only after an error of the simulation)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _run_steps(instrs: list[Any], run: Any) -> None:
    for ins in instrs:
        for step in ins.op:
            step(ins)
    run.restart(run.block)  # drop the block's tiles (with numerics no program template reuses the run)
