"""Worker processes for local sweeps: one item at a time each, never outliving the sweep.

Each worker gets its next item the moment it hands back a result, so all
workers stay busy to the end (items arrive longest first, see
``execute``).  On Linux workers are forked from the parent after it has
imported the simulator, so they start in milliseconds with everything
loaded; elsewhere they are spawned.  A worker dies with the parent however
the parent ends: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux, or else a
thread that exits the worker when its parent process id changes.  A worker
that dies, or runs one item longer than ``timeout`` seconds (then it is
killed), is replaced and its item reported as ``died``/``timeout``.

A worker runs without the cyclic garbage collector: a simulation leaves millions of objects in reference
cycles, and collecting them cost a worker seconds at unpredictable points (one pass over 2 M objects took 3.5
of a 9 s ``--jobs 1`` sweep of configs/sweeps/chips.toml), while the heap it inherited was walked, and so
copied page by page, by every full pass.  Instead the worker retires once its resident memory has grown by
:data:`RETIRE_BYTES`: it hands back its last result, exits, and a fresh worker is forked in its place, so the
kernel frees the garbage at once (benchmarks/README.md, issue 44).
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tfa_sim.sim.parallel import WORKER_CPUS, bind_to_parent, spare_cpus

_END = object()
#: A worker retires after its resident memory has grown by this much (its garbage is never collected, see above).
RETIRE_BYTES = 256 * 2**20
#: The longest single wait for a result (s); the loop waits again until an item's ``timeout`` has passed.
MAX_WAIT = 3600.0


def start_method() -> str:
    """``fork`` where workers can inherit the parent's imports safely (Linux), else ``spawn``."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def _resident_bytes() -> int | None:
    """This process's resident memory now, in bytes; None where it cannot be read (no ``/proc``: there the
    workers keep the cyclic GC and never retire).  The current figure, not the peak: what a retiring worker
    hands back is what it holds now."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _serve(conn: Any, fn: Callable[[Any], Any], parent_pid: int, cpus: int) -> None:
    """A worker's life: items from ``conn`` → ``(fn(item), retiring)`` back, until the pipe closes or it
    retires (module docstring).  Ctrl-C is the parent's to handle (it kills the workers), so the worker
    ignores SIGINT.  ``cpus``: the worker's share of the CPUs (tfa_sim.sim.parallel.spare_cpus)."""
    bind_to_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ[WORKER_CPUS] = str(cpus)
    start = _resident_bytes()
    if start is not None:  # where memory can be watched, garbage is left to the worker's exit
        gc.freeze()
        gc.disable()
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        value = fn(item)
        now = _resident_bytes()
        retiring = start is not None and now is not None and now - start > RETIRE_BYTES
        conn.send((value, retiring))
        if retiring:
            return


@dataclass
class _Worker:
    proc: Any
    conn: Any
    item: Any = _END
    started: float = 0.0
    retiring: bool = False


class WorkerPool:
    """``jobs`` worker processes running ``fn`` (a module-level function) on items."""

    def __init__(self, fn: Callable[[Any], Any], jobs: int, timeout: float = 0.0) -> None:
        self._ctx: Any = mp.get_context(start_method())  # typeshed's BaseContext lacks Process
        self._fn, self._timeout = fn, timeout
        self._cpus = max(1, spare_cpus() // jobs)  # each worker's share, for the work it hands to helpers
        self._workers = [self._start() for _ in range(jobs)]

    def _start(self) -> _Worker:
        parent_end, child_end = self._ctx.Pipe()
        proc = self._ctx.Process(target=_serve, args=(child_end, self._fn, os.getpid(), self._cpus), daemon=True)
        proc.start()
        child_end.close()
        return _Worker(proc, parent_end)

    def imap_unordered(self, items: Iterable[Any]) -> Iterator[tuple[Any, tuple[str, Any]]]:
        """Run every item; yield ``(item, outcome)`` as each ends, the outcome being ``("done", result)``,
        ``("timeout", seconds)`` or ``("died", exit code)``."""
        todo = iter(items)
        while True:
            for i, w in enumerate(self._workers):
                if w.item is _END:
                    item = next(todo, _END)
                    if item is not _END:
                        self._assign(i, item)
            busy = [w for w in self._workers if w.item is not _END]
            if not busy:
                return
            mp.connection.wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], self._wait_time(busy))
            for i, w in enumerate(self._workers):
                outcome = self._outcome(w) if w.item is not _END else None
                if outcome is not None:
                    item, w.item = w.item, _END
                    if outcome[0] != "done" or w.retiring:
                        self._workers[i] = self._replace(w)
                    yield item, outcome

    def _assign(self, i: int, item: Any) -> None:
        """Hand ``item`` to worker ``i`` (replaced first if it died while idle)."""
        w = self._workers[i]
        try:
            w.conn.send(item)
        except OSError:
            w = self._workers[i] = self._replace(w)
            w.conn.send(item)
        w.item, w.started = item, time.monotonic()

    def _wait_time(self, busy: list[_Worker]) -> float | None:
        """Seconds until the oldest busy item times out (None: no timeout), at most :data:`MAX_WAIT`: a
        ``point_timeout`` of 2⁶³ s overflowed the poll's timeout (found by tests/test_sweep_fuzz.py)."""
        if not self._timeout:
            return None
        return min(MAX_WAIT, max(0.0, min(w.started for w in busy) + self._timeout - time.monotonic()))

    def _outcome(self, w: _Worker) -> tuple[str, Any] | None:
        if w.conn.poll():
            try:
                value, w.retiring = w.conn.recv()
                return "done", value
            except (EOFError, OSError):
                w.proc.join(5)
                return "died", w.proc.exitcode
        if not w.proc.is_alive():
            return "died", w.proc.exitcode
        if self._timeout and time.monotonic() - w.started >= self._timeout:
            return "timeout", self._timeout
        return None

    def _replace(self, w: _Worker) -> _Worker:
        self._stop(w)
        return self._start()

    @staticmethod
    def _stop(w: _Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(5)
        w.conn.close()

    def close(self) -> None:
        """Kill every worker (idle ones hold nothing; busy ones are abandoned) and reap them."""
        for w in self._workers:
            self._stop(w)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
