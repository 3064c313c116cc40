"""The second CPU: how many CPUs a run may use, and work handed to a forked process or a background thread.

A sweep worker is a daemonic process and the sweep's ``--jobs`` already spreads
the points over the CPUs, so there every run keeps to one CPU.  Elsewhere a run
uses the others for work that is independent of the simulation: the fold's
samples (a forked process), the goldens (a background thread) and the numerics
of finished blocks (worker threads; the stage kernels release the GIL).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
from collections.abc import Callable
from typing import Any


def spare_cpus() -> int:
    """The CPUs this process may use, or 1 inside a sweep worker."""
    if mp.current_process().daemon:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    """A helper process can take work: Linux (fork keeps the parent's imports and data) and a CPU to spare."""
    return sys.platform.startswith("linux") and spare_cpus() > 1


class Forked:
    """``fn(*args)`` in a forked child process: the arguments are inherited, not pickled (a launch can hold
    thousands of blocks), and only the result comes back through a pipe.  Use ``result()``, then ``close()``
    (in a ``finally``: it stops a child whose result nobody will ask for)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        ctx = mp.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_send_result, args=(send, fn, args), daemon=True)
        self._proc.start()
        send.close()

    def result(self) -> Any:
        """The child's return value, or None if it raised or died (the caller then does the work itself, which
        raises the error where it can be reported)."""
        try:
            ok, value = self._recv.recv()
        except EOFError:
            return None
        return value if ok else None

    def close(self) -> None:
        """Reap the child, stopping it first if it still runs."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        self._recv.close()


def _send_result(send: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        send.send((True, fn(*args)))
    except BaseException:  # noqa: BLE001 - the parent does the work again and reports the error itself
        send.send((False, None))


def background(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``fn(*args)`` on a daemon thread; the returned function waits for its value (or raises its error).
    A run that fails before asking does not wait for it: the thread is abandoned when the process exits."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the value
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=getattr(fn, "__name__", "background"), daemon=True)
    thread.start()

    def result() -> Any:
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return result
