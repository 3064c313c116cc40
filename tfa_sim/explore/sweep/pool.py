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
"""
from __future__ import annotations

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


def start_method() -> str:
    """``fork`` where workers can inherit the parent's imports safely (Linux), else ``spawn``."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def _serve(conn: Any, fn: Callable[[Any], Any], parent_pid: int, cpus: int) -> None:
    """A worker's life: items from ``conn`` → ``fn(item)`` back, until the pipe closes.  Ctrl-C is the
    parent's to handle (it kills the workers), so the worker ignores SIGINT.  ``cpus``: the worker's share
    of the CPUs (tfa_sim.sim.parallel.spare_cpus)."""
    bind_to_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ[WORKER_CPUS] = str(cpus)
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(fn(item))


@dataclass
class _Worker:
    proc: Any
    conn: Any
    item: Any = _END
    started: float = 0.0


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
                    if outcome[0] != "done":
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
        if not self._timeout:
            return None
        return max(0.0, min(w.started for w in busy) + self._timeout - time.monotonic())

    def _outcome(self, w: _Worker) -> tuple[str, Any] | None:
        if w.conn.poll():
            try:
                return "done", w.conn.recv()
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
