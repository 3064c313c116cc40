"""The one module that uses SimPy internals, for speed on the engine's hot path.

SimPy's public API costs a ``Timeout`` object per scheduled completion, a
``(time, priority, id, event)`` tuple compared as Python objects in its heap,
and a property call per clock read.  The engine schedules one bare event per
instruction group and reads the clock several times per group, so this module
owns three shortcuts, valid for the SimPy version pinned in pyproject.toml
(``simpy>=4.1,<4.2``): a plain event object that calls one callback at a given
cycle (one object reused for every call of a caller with one call pending at a
time), kept in a heap of its own that :func:`run` merges with SimPy's queue in
SimPy's order (so the engine's events are processed by :func:`run`, not by
``env.run()``); SimPy's own loop run here (compiled with this module,
setup.py); and a direct read of the clock.  With the environment variable
``TFA_SIM_PUBLIC_SIMPY=1`` all three use SimPy's public API instead (same
results, same order of events); the measured difference is in docs/timing.md
"Events and pipes" (``benchmarks/bench_sim.py --public-simpy``).
"""
from __future__ import annotations

import heapq
import os
from collections.abc import Callable
from typing import Any, Final

import simpy
import simpy.events

#: SimPy's queue operation and its priority of a timeout, bound once: mypyc keeps a Final name in a C variable
#: instead of looking it up in the module's dict at every use.
_pop: Final = heapq.heappop
_NORMAL: Final = simpy.events.NORMAL

#: Use SimPy's public API instead of the shortcuts (read once, at import).
PUBLIC_API: Final = os.environ.get("TFA_SIM_PUBLIC_SIMPY", "") == "1"


class _Scheduled:
    """The engine's own event: one callback at a cycle, kept in the environment's :class:`_Agenda` rather than
    in SimPy's queue.  What ``env.timeout(d).callbacks.append(cb)`` builds, as a plain class that mypyc compiles
    (setup.py): no ``simpy.Event`` and its Python attribute lookups, no ``(time, priority, id, event)`` tuple
    compared as Python objects in SimPy's heap."""

    def __init__(self, env: simpy.Environment, callback: Callable[[Any], None]) -> None:
        self.agenda = _agenda(env)
        self.eids = env._eid
        self.callback = callback
        self.time = 0.0
        self.eid = 0

    def set(self, now: float, delay: float) -> None:
        """Be processed ``delay`` cycles after ``now``, the current cycle (again, once processed)."""
        self.time = now + delay
        self.eid = next(self.eids)  # SimPy's own counter: the same order among SimPy's events as before
        self.agenda.push(self)


def _before(a: _Scheduled, b: _Scheduled) -> bool:
    """SimPy's order of two engine events: time, then id (both have SimPy's NORMAL priority)."""
    return a.time < b.time or (a.time == b.time and a.eid < b.eid)


class _Agenda:
    """A binary heap of the engine's events in SimPy's order, compared natively; :func:`run` merges it with
    SimPy's queue, an engine event at (time, NORMAL, id) ranking exactly as its tuple would there."""

    def __init__(self) -> None:
        self.items: list[_Scheduled] = []

    def push(self, event: _Scheduled) -> None:
        items = self.items
        items.append(event)
        i = len(items) - 1
        while i > 0:
            parent = (i - 1) >> 1
            up = items[parent]
            if not _before(event, up):
                break
            items[i] = up
            i = parent
        items[i] = event

    def pop(self) -> _Scheduled:
        items = self.items
        top, last = items[0], items.pop()
        n = len(items)
        if n:
            i = 0
            while True:
                child = 2 * i + 1
                if child >= n:
                    break
                if child + 1 < n and _before(items[child + 1], items[child]):
                    child += 1
                if not _before(items[child], last):
                    break
                items[i] = items[child]
                i = child
            items[i] = last
        return top

    def first_before(self, entry: tuple[float, int, int, Any]) -> bool:
        """Does the engine's next event come before SimPy's queue entry ``entry`` (time, priority, id, event)?"""
        head = self.items[0]
        t = entry[0]
        return head.time < t or (head.time == t and (_NORMAL < entry[1] or (_NORMAL == entry[1]
                                                                            and head.eid < entry[2])))


def _agenda(env: simpy.Environment) -> _Agenda:
    """The engine events' heap of ``env``, made on first use."""
    agenda = getattr(env, "_tfa_agenda", None)
    if agenda is None:
        agenda = _Agenda()
        setattr(env, "_tfa_agenda", agenda)  # noqa: B010 - SimPy's Environment declares no such attribute
    return agenda


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
    """``env.run()`` until no event is left, over SimPy's queue and the engine's :class:`_Agenda` merged in
    SimPy's order: SimPy 4.1's loop without its ``until`` and ``StopSimulation`` handling, which the engine does
    not use, compiled with this module."""
    queue = env._queue
    agenda = _agenda(env)
    events = agenda.items
    event: Any  # a SimPy event
    callbacks: list[Callable[[Any], None]]  # typed: mypyc walks it by index, not through a list iterator
    while queue or events:
        if events and (not queue or agenda.first_before(queue[0])):
            mine = agenda.pop()
            env._now = mine.time
            mine.callback(mine)
            continue
        env._now, _, _, event = _pop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):  # a failed event nobody defused ends the run
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


#: ``run(env)``: process events until none is left (``env.run()``, the engine's own events included).
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
