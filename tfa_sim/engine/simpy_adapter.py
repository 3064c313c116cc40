"""The one module that uses SimPy internals, for speed on the engine's hot path.

SimPy's public API costs a ``Timeout`` object per scheduled completion and a
property call per clock read.  The engine schedules one bare event per
instruction group and reads the clock several times per group, so this module
owns two shortcuts, valid for the SimPy version pinned in pyproject.toml
(``simpy>=4.1,<4.2``): an event whose only job is to call one callback at a
given time (and, for a caller with one such call pending at a time, one event
reused for all its calls), and a direct read of the clock.  With the environment variable
``TFA_SIM_PUBLIC_SIMPY=1`` both use SimPy's public API instead (same results,
same order of events); the measured difference is in README "Timing model"
(``benchmarks/bench_sim.py --public-simpy``).
"""
from __future__ import annotations

import operator
import os
from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL

#: Use SimPy's public API instead of the shortcuts (read once, at import).
PUBLIC_API = os.environ.get("TFA_SIM_PUBLIC_SIMPY", "") == "1"


class _Scheduled:
    """An event SimPy's loop can process, with one callback: ``Environment.step`` reads only ``callbacks``
    (taking them and leaving None) and ``_ok``.  What ``env.timeout(d).callbacks.append(cb)`` builds, as a
    plain class that mypyc compiles (setup.py): no ``simpy.Event`` and its Python attribute lookups, and the
    environment's queue and id counter read once."""

    def __init__(self, env: simpy.Environment, callback: Callable[[Any], None]) -> None:
        self.env = env
        self.queue: list[Any] = env._queue
        self.eids = env._eid
        self.calls = [callback]
        self.callbacks: list[Callable[[Any], None]] | None = self.calls
        self._ok = True
        self._value: Any = None

    def set(self, delay: float) -> None:
        """Be processed ``delay`` cycles from now (again: SimPy's step took the callbacks and left None)."""
        self.callbacks = self.calls
        heappush(self.queue, (self.env._now + delay, NORMAL, next(self.eids), self))


def _call_at_public(env: simpy.Environment, delay: float, callback: Callable[[Any], None]) -> None:
    env.timeout(delay).callbacks.append(callback)


def _call_at_fast(env: simpy.Environment, delay: float, callback: Callable[[Any], None]) -> None:
    _Scheduled(env, callback).set(delay)


class _AlarmPublic:
    """:data:`Alarm` through the public API: a Timeout per call."""

    def __init__(self, env: simpy.Environment, callback: Callable[[Any], None]) -> None:
        self.env, self.callback = env, callback

    def set(self, delay: float) -> None:
        self.env.timeout(delay).callbacks.append(self.callback)


#: ``call_at(env, delay, callback)``: call ``callback(event)`` ``delay`` cycles from now.
call_at = _call_at_public if PUBLIC_API else _call_at_fast
#: ``Alarm(env, callback)``, then ``.set(delay)``: ``call_at`` for a caller with at most one call pending at a
#: time (a pipe's running instruction), which one event object then serves for every call.
Alarm = _AlarmPublic if PUBLIC_API else _Scheduled
#: ``now(env)``: the simulation clock.
now: Callable[[simpy.Environment], float] = operator.attrgetter("now" if PUBLIC_API else "_now")
