"""The one module that uses SimPy internals, for speed on the engine's hot path.

SimPy's public API costs a ``Timeout`` object per scheduled completion and a
property call per clock read.  The engine schedules one bare event per
instruction group and reads the clock several times per group, so this module
owns three shortcuts, valid for the SimPy version pinned in pyproject.toml
(``simpy>=4.1,<4.2``): a plain event object that calls one callback at a given
cycle (one object reused for every call of a caller with one call pending at a
time), SimPy's own loop run here (compiled with this module, setup.py), and a
direct read of the clock.  With the environment variable
``TFA_SIM_PUBLIC_SIMPY=1`` all three use SimPy's public API instead (same
results, same order of events); the measured difference is in README "Timing
model" (``benchmarks/bench_sim.py --public-simpy``).
"""
from __future__ import annotations

import heapq
import os
from collections.abc import Callable
from typing import Any, Final

import simpy
import simpy.events

#: SimPy's queue operations and its priority of a timeout, bound once: mypyc keeps a Final name in a C variable
#: instead of looking it up in the module's dict at every use.
_push: Final = heapq.heappush
_pop: Final = heapq.heappop
_NORMAL: Final = simpy.events.NORMAL

#: Use SimPy's public API instead of the shortcuts (read once, at import).
PUBLIC_API: Final = os.environ.get("TFA_SIM_PUBLIC_SIMPY", "") == "1"


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

    def set(self, now: float, delay: float) -> None:
        """Be processed ``delay`` cycles after ``now``, the current cycle (again: SimPy's step took the callbacks
        and left None)."""
        self.callbacks = self.calls
        _push(self.queue, (now + delay, _NORMAL, next(self.eids), self))


def _call_at_public(env: simpy.Environment, now: float, delay: float, callback: Callable[[Any], None]) -> None:
    env.timeout(delay).callbacks.append(callback)


def _call_at_fast(env: simpy.Environment, now: float, delay: float, callback: Callable[[Any], None]) -> None:
    _Scheduled(env, callback).set(now, delay)


class _AlarmPublic:
    """:data:`Alarm` through the public API: a Timeout per call."""

    def __init__(self, env: simpy.Environment, callback: Callable[[Any], None]) -> None:
        self.env, self.callback = env, callback

    def set(self, now: float, delay: float) -> None:
        self.env.timeout(delay).callbacks.append(self.callback)


def _run_public(env: simpy.Environment) -> None:
    env.run()


def _run_fast(env: simpy.Environment) -> None:
    """``env.run()`` until no event is left: SimPy 4.1's loop without its ``until`` and ``StopSimulation``
    handling, which the engine does not use, compiled with this module."""
    queue = env._queue
    event: Any  # a SimPy event or a _Scheduled
    callbacks: list[Callable[[Any], None]]  # typed: mypyc walks it by index, not through a list iterator
    while queue:
        env._now, _, _, event = _pop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):  # a failed event nobody defused ends the run
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


#: ``run(env)``: process events until none is left (``env.run()``).
run = _run_public if PUBLIC_API else _run_fast
#: ``call_at(env, now, delay, callback)``: call ``callback(event)`` ``delay`` cycles after ``now``, which the
#: caller has read from the clock already (the public API reads it again).
call_at = _call_at_public if PUBLIC_API else _call_at_fast
#: ``Alarm(env, callback)``, then ``.set(now, delay)``: ``call_at`` for a caller with at most one call pending at a
#: time (a pipe's running instruction), which one event object then serves for every call.
Alarm = _AlarmPublic if PUBLIC_API else _Scheduled


def now(env: simpy.Environment) -> float:
    """The simulation clock."""
    return env.now if PUBLIC_API else env._now
