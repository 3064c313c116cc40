"""The second CPU: how many CPUs a run may use, and work handed to a forked process.

A sweep worker is a daemonic process; its share of the CPUs is the sweep's
(CPUs ÷ ``--jobs``, at least one: ``TFA_SIM_WORKER_CPUS``, set by
``tfa_sim.explore.sweep.pool``), so ``--jobs 1`` on two CPUs still folds on both.
Elsewhere a run may use every CPU of the process.  A run uses the others for
work that is independent of the simulation: the fold's samples and the
goldens (forked processes) and the numerics of finished blocks (worker
threads, engine/ops.py; the stage kernels release the GIL).  A forked
helper, like a sweep worker, dies with its parent (:func:`bind_to_parent`).
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1  # prctl's option: a signal for this process when its parent dies
#: The CPUs a sweep worker may use (set in each worker by tfa_sim.explore.sweep.pool).
WORKER_CPUS = "TFA_SIM_WORKER_CPUS"


def spare_cpus() -> int:
    """The CPUs this process may use: a sweep worker's share, or every CPU it has."""
    if mp.current_process().daemon:
        share = os.environ.get(WORKER_CPUS, "1")
        return max(1, int(share)) if share.isdigit() else 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    """A helper process can take work: Linux (fork keeps the parent's imports and data) and a CPU to spare."""
    return sys.platform.startswith("linux") and spare_cpus() > 1


class Forked:
    """``fn(*args)`` in a forked child process: the arguments are inherited, not pickled (a launch can hold
    thousands of blocks), and only the pickled result comes back through a pipe.  ``os.fork`` rather than
    multiprocessing, which forbids a sweep worker (a daemonic process) children.  Use ``result()``, then
    ``close()`` (in a ``finally``: it stops a child whose result nobody will ask for)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        read, write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(write, parent, fn, args)
        os.close(write)
        self._pid, self._read, self._reaped = pid, read, False

    def result(self) -> Any:
        """The child's return value, or None if it raised or died (the caller then does the work itself, which
        raises the error where it can be reported)."""
        with os.fdopen(os.dup(self._read), "rb") as fh:
            data = fh.read()
        try:
            ok, value = pickle.loads(data)
        except Exception:  # noqa: BLE001 - a child that died mid-write left a truncated pickle
            return None
        return value if ok else None

    def close(self) -> None:
        """Reap the child, killing it first if it still runs."""
        if not self._reaped:
            if os.waitpid(self._pid, os.WNOHANG) == (0, 0):
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            os.close(self._read)
            self._reaped = True


def _child(fd: int, parent: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The forked child: run ``fn``, write its pickled outcome, exit without the parent's clean-up."""
    try:
        bind_to_parent(parent)  # a killed parent takes the child with it
        payload = pickle.dumps((True, fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001 - the parent does the work again and reports the error itself
        payload = pickle.dumps((False, None))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    finally:
        os._exit(0)


def bind_to_parent(parent_pid: int, interval: float = 0.5) -> None:
    """Make the calling process exit when process ``parent_pid`` (its parent) is gone."""
    if not _parent_death_signal():
        threading.Thread(target=watch_parent, args=(parent_pid, interval), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)


def _parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def watch_parent(parent_pid: int, interval: float) -> None:
    """Poll the parent process id; exit the process at once when it is no longer ``parent_pid``."""
    while os.getppid() == parent_pid:
        time.sleep(interval)
    os._exit(1)
