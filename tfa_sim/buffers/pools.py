"""Slot pools and flags: the one waiting mechanism behind every buffer and FIFO.

:class:`Pool` owns the queue of waiters and triggers them in request order
(FIFO: a later request is never granted before an earlier one).  Subclasses
only supply their rule:

* :class:`PingPong` — ``count`` slots used round-robin; a request triggers once
  the next slot in turn has been released by its previous holder (L1, L0, UB
  ping-pong buffers).  A :class:`Slot` is the handle an instruction takes: it
  carries the tile (``get``/``put``) and is released by the instruction that
  finishes with it;
* :class:`Flag` — a counting flag (hardware: a 4-bit counter); a wait triggers
  once the flag has been set more times than it was waited (the GM FIFOs'
  ready and consumed flags, block end).

Misuse raises :class:`HazardError` naming the buffer, slot and cycle.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import simpy

from tfa_sim.buffers.ffts import Ffts
from tfa_sim.clock.simpy_adapter import call_at, now
from tfa_sim.spec.errors import ScheduleError

#: Hardware cross-core flags count to 15 (a 4-bit counter).
FLAG_MAX = 15


class HazardError(ScheduleError):
    """A buffer or flag used in a way the hardware would corrupt data."""


class Pending:
    """A request waiting for the rule: once granted, ``triggered`` is set and ``callback(self)`` is called at
    once, in the same cycle (the waiter is a pipe or an issue stream that goes on from there)."""

    __slots__ = ("tag", "callback", "value", "pred", "triggered")

    def __init__(self, tag: Any) -> None:
        self.tag = tag
        self.callback: Any = None
        self.value: Any = None
        self.pred: Any = None
        self.triggered = False


class Pool:
    """Base class: FIFO queue of waiters; ``_can_grant``/``_grant`` are the rule.

    ``cause`` is how a wait on the pool counts in the stall breakdown (``slot``,
    ``data`` or ``credit``); ``owner_pipe`` is the pipe whose instruction would
    unblock a waiter (for the deadlock report).
    """

    cause = "slot"

    def __init__(self, env: simpy.Environment, name: str, owner_pipe: Any = None) -> None:
        self.env = env
        self.name = name
        self.short_name = name.split(".", 1)[1] if name.startswith("core") and "." in name else name  # no "coreN."
        self.waiters: deque[Pending] = deque()
        self.owner_pipe = owner_pipe
        self.samples: list[float] | None = None  # cycle, slots in use, cycle, … (flat) when the trace wants them

    def request(self, tag: Any = None) -> Any:
        """What was asked for, granted now — the handle or flag itself, with ``triggered`` true, ``value``
        the grant and ``pred`` the instruction that enabled it — or a :class:`Pending` that triggers once
        the rule allows."""
        raise NotImplementedError

    def _queue(self, tag: Any) -> Pending:
        pending = Pending(tag)
        self.waiters.append(pending)
        return pending

    def _wake(self) -> None:
        waiters = self.waiters
        while waiters and self._can_grant(waiters[0].tag):
            pending = waiters.popleft()
            pending.value, pending.pred = self._grant(pending.tag)
            pending.triggered = True
            if pending.callback is not None:
                pending.callback(pending)

    def _can_grant(self, tag: Any) -> bool:
        raise NotImplementedError

    def _grant(self, tag: Any) -> tuple[Any, Any]:
        """Take what the rule allows; return (value, the instruction that made it available)."""
        raise NotImplementedError


class Slot:
    """One use of a :class:`PingPong` slot: requested by an instruction, holds its tile until released.

    Waiting on a Slot takes the pool's next slot in turn, or slot ``want`` when
    the program picks it (the kernel indexes some ping-pongs by its own
    counters); ``index`` is set at the grant.  ``get``/``put`` read and write the
    tile in it; ``release`` (at the end of the instruction done with it) lets the
    next request have it.
    """

    __slots__ = ("pool", "want", "index", "owner", "pred")
    cause = "slot"
    triggered = True  # as a granted request (see Pool.request)

    def __init__(self, pool: PingPong, want: int | None = None) -> None:
        self.pool = pool
        self.want = want
        self.index = -1
        self.owner: Any = None  # the instruction that requested the slot
        self.pred: Any = None  # the instruction whose release let this handle have its slot

    def request(self, by: Any) -> Any:
        self.owner = by
        return self.pool.request(self)

    @property
    def value(self) -> int:
        return self.index

    @property
    def short_name(self) -> str:
        return self.pool.short_name

    def get(self) -> Any:
        return self.pool.data[self.index]

    def put(self, tile: Any) -> None:
        self.pool.data[self.index] = tile

    def release(self, by: Any = None) -> None:
        """``by`` (an instruction) is done with the slot (which this handle must hold)."""
        self.pool.release(self.index, by, self)


class PingPong(Pool):
    """``count`` slots used in turn; a request triggers once its slot is free, value = slot index."""

    def __init__(self, env: simpy.Environment, name: str, count: int, owner_pipe: Any = None) -> None:
        super().__init__(env, name, owner_pipe)
        self.count = count
        self.holder: list[Slot | None] = [None] * count
        self.released_by: list[Any] = [None] * count
        self.data: list[Any] = [None] * count
        self.next = 0
        self.in_use = 0

    def slot(self, index: int | None = None) -> Slot:
        """A handle for slot ``index`` (None: the next in turn); an instruction that waits on it takes it."""
        return Slot(self, None if index is None else index % self.count)

    def request(self, tag: Any = None) -> Any:
        """The slot handle ``tag`` gets its slot now (returned, granted) or queues (a Pending)."""
        handle: Slot = tag
        if not self.waiters:
            want = handle.want
            if self.holder[self.next if want is None else want] is None:
                handle.index, handle.pred = self._grant(handle)
                return handle
        return self._queue(handle)

    def _can_grant(self, tag: Any) -> bool:
        handle: Slot = tag
        want = handle.want
        return self.holder[self.next if want is None else want] is None

    def _grant(self, tag: Any) -> tuple[int, Any]:
        handle: Slot = tag
        slot = self.next if handle.want is None else handle.want
        self.holder[slot] = handle
        handle.index = slot
        self.next = (slot + 1) % self.count
        self.in_use += 1
        if self.samples is not None:
            self.samples.extend((now(self.env), self.in_use))
        return slot, self.released_by[slot]

    def release(self, slot: int, by: Any = None, handle: Slot | None = None) -> None:
        """``by`` (an instruction) is done with ``slot``; the next request in turn may take it.

        With ``handle``, the slot must be the one that handle was granted and still holds.
        """
        if not 0 <= slot < self.count or self.holder[slot] is None:
            raise HazardError(f"{self.name} slot {slot} released twice at cycle {self.env.now:.0f}")
        if handle is not None and self.holder[slot] is not handle:
            raise HazardError(f"{self.name} slot {slot} released at cycle {self.env.now:.0f} by a handle that "
                              f"does not hold it (held by {getattr(self.holder[slot], 'owner', None)})")
        self.holder[slot] = None
        self.released_by[slot] = by
        self.in_use -= 1
        if self.samples is not None:
            self.samples.extend((now(self.env), self.in_use))
        if self.waiters:
            self._wake()

    def holder_label(self, slot: int | None = None) -> str:
        """Who holds ``slot`` (default: the next in turn), for the deadlock report."""
        slot = self.next if slot is None else slot
        owner = getattr(self.holder[slot], "owner", None)
        return f" (slot {slot} held by {owner.label})" if owner is not None else ""

    def reset(self) -> None:
        """Back to the state of a new buffer (all slots free, slot 0 next, no tiles), for another block."""
        self.holder = [None] * self.count
        self.released_by = [None] * self.count
        self.data = [None] * self.count
        self.next = self.in_use = 0


def send(env: simpy.Environment, ffts: Ffts | None) -> float:
    """One cross-core message sent now: the cycle it leaves the chip's sync unit (now, without a unit)."""
    sent = now(env)
    return sent if ffts is None else ffts.deliver(sent)


class Flag(Pool):
    """A counting flag: ``set`` adds one (after ``latency`` cycles), a request consumes one.

    ``cause`` says what a wait on it means: ``data`` (a ready flag) or ``credit``
    (a consumed flag, the FIFO's back-pressure).  A grant's ``value`` is the cycles its set took from the
    setter's completion to the flag (the sync unit's queue and service, then the latency): the critical path's
    edge.
    """

    triggered = True  # as a granted request (see Pool.request)

    def __init__(self, env: simpy.Environment, name: str, latency: float = 0.0, cause: str = "data",
                 owner_pipe: Any = None, ffts: Ffts | None = None) -> None:
        super().__init__(env, name, owner_pipe)
        self.latency = latency
        self.ffts = ffts  # the chip's sync unit every set passes through (None: a set is never delayed by others)
        self.cause = cause
        self.count = 0  # sets arrived and not yet waited for
        self.setters: deque[tuple[Any, float]] = deque()  # (setter, its delay) of each arrived count, oldest first
        self.in_flight: deque[tuple[float, Any, float]] = deque()  # (arrival, setter, delay) of sets on their way
        self.pred: Any = None  # the setter of the count the last grant took
        self.value: Any = 0.0  # that set's delay
        self._alarm = -1.0  # the cycle of the arrival an event is scheduled for (-1: none)

    def request(self, tag: Any = None) -> Any:
        """One count now (the flag itself is returned, granted) or a Pending for the next arrival."""
        if self.in_flight:
            self._settle()
        if not self.waiters and self.count:
            self.value, self.pred = self._grant(tag)
            return self
        pending = self._queue(tag)
        self._arm()
        return pending

    def _can_grant(self, tag: Any) -> bool:
        return self.count > 0

    def _grant(self, tag: Any) -> tuple[float, Any]:
        self.count -= 1
        by, delay = self.setters.popleft()
        return delay, by

    def set(self, by: Any = None) -> None:
        """``by`` (an instruction) signals the flag with a message of its own (see :meth:`post`)."""
        self.post(send(self.env, self.ffts), by)

    def post(self, served: float, by: Any = None) -> None:
        """The message ``by`` sent for this flag left the chip's sync unit at ``served`` (:func:`send`); a waiter
        sees it ``latency`` cycles later.

        A set on its way costs no event unless somebody waits for it (or the counter would overflow).
        """
        sent = now(self.env)
        if not self.latency and served <= sent:
            self._arrive(by, 0.0)
            return
        self.in_flight.append((served + self.latency, by, served + self.latency - sent))
        if self.waiters or self.count + len(self.in_flight) > FLAG_MAX:
            self._arm()

    def _arm(self) -> None:
        """Schedule an event at the earliest arrival still on its way, unless one is scheduled for it."""
        if self.in_flight and self._alarm != self.in_flight[0][0]:
            self._alarm = self.in_flight[0][0]
            t = now(self.env)
            call_at(self.env, t, self._alarm - t, self._on_arrival)

    def _on_arrival(self, _event: Any) -> None:
        self._alarm = -1.0
        self._settle()
        self._arm()

    def _settle(self) -> None:
        """Count the sets whose arrival cycle has come, and wake waiters."""
        t, in_flight = now(self.env), self.in_flight
        while in_flight and in_flight[0][0] <= t:
            _, by, delay = in_flight.popleft()
            self._arrive(by, delay)

    @property
    def pending(self) -> int:
        """Sets not yet waited for, including those still on their way."""
        return self.count + len(self.in_flight)

    def reset(self) -> None:
        """Back to zero, for another block."""
        self.count = 0
        self.setters.clear()
        self.in_flight.clear()
        self._alarm = -1.0

    def _arrive(self, by: Any, delay: float) -> None:
        self.count += 1
        self.setters.append((by, delay))
        if self.count > FLAG_MAX:
            raise HazardError(f"flag {self.name} set {self.count} times without a wait (counter max "
                              f"{FLAG_MAX}) at cycle {self.env.now:.0f}")
        if self.waiters:
            self._wake()
