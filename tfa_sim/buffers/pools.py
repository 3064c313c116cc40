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
from functools import partial
from typing import Any

import simpy

from tfa_sim.engine.simpy_adapter import now
from tfa_sim.errors import ScheduleError

#: Hardware cross-core flags count to 15 (a 4-bit counter).
FLAG_MAX = 15


class HazardError(ScheduleError):
    """A buffer or flag used in a way the hardware would corrupt data."""


class Granted:
    """A request granted on the spot: already triggered, never scheduled (saves an event)."""

    __slots__ = ("value", "pred")
    triggered = True

    def __init__(self, value: Any, pred: Any = None) -> None:
        self.value = value
        self.pred = pred  # the instruction whose release or signal made the grant possible


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
        self.waiters: deque[simpy.Event] = deque()
        self.owner_pipe = owner_pipe
        self.samples: list[tuple[float, int]] | None = None  # (cycle, slots in use) when the trace wants them

    def request(self, tag: Any = None) -> simpy.Event | Granted:
        """Triggers once the rule allows; ``value`` is the grant, ``pred`` the instruction that enabled it."""
        if not self.waiters and self._can_grant(tag):
            return Granted(*self._grant(tag))
        ev = self.env.event()
        ev.tag = tag  # type: ignore[attr-defined]
        self.waiters.append(ev)
        return ev

    def _wake(self) -> None:
        while self.waiters and self._can_grant(self.waiters[0].tag):  # type: ignore[attr-defined]
            ev = self.waiters.popleft()
            value, ev.pred = self._grant(ev.tag)  # type: ignore[attr-defined]
            ev.succeed(value)

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

    __slots__ = ("pool", "want", "index", "owner")
    cause = "slot"

    def __init__(self, pool: PingPong, want: int | None = None) -> None:
        self.pool = pool
        self.want = want
        self.index = -1
        self.owner: Any = None  # the instruction that requested the slot

    def request(self, by: Any) -> simpy.Event | Granted:
        self.owner = by
        return self.pool.request(self)

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

    def _can_grant(self, tag: Any) -> bool:
        want = tag.want
        return self.holder[self.next if want is None else want] is None

    def _grant(self, tag: Any) -> tuple[int, Any]:
        slot = self.next if tag.want is None else tag.want
        self.holder[slot] = tag
        tag.index = slot
        self.next = (slot + 1) % self.count
        self.in_use += 1
        if self.samples is not None:
            self.samples.append((now(self.env), self.in_use))
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
            self.samples.append((now(self.env), self.in_use))
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


class Flag(Pool):
    """A counting flag: ``set`` adds one (after ``latency`` cycles), a request consumes one.

    ``cause`` says what a wait on it means: ``data`` (a ready flag) or ``credit``
    (a consumed flag, the FIFO's back-pressure).
    """

    def __init__(self, env: simpy.Environment, name: str, latency: float = 0.0, cause: str = "data",
                 owner_pipe: Any = None) -> None:
        super().__init__(env, name, owner_pipe)
        self.latency = latency
        self.cause = cause
        self.count = 0
        self.in_flight = 0  # sets still within their latency
        self.setters: deque[Any] = deque()  # who set each pending count, oldest first

    def _can_grant(self, tag: Any) -> bool:
        return self.count > 0

    def _grant(self, tag: Any) -> tuple[None, Any]:
        self.count -= 1
        return None, self.setters.popleft()

    def set(self, by: Any = None) -> None:
        """``by`` (an instruction) signals the flag; a waiter sees it ``latency`` cycles later."""
        if self.latency:
            self.in_flight += 1
            self.env.timeout(self.latency).callbacks.append(partial(self._land, by))
        else:
            self._arrive(by)

    def _land(self, by: Any, _event: Any) -> None:
        self.in_flight -= 1
        self._arrive(by)

    @property
    def pending(self) -> int:
        """Sets not yet waited for, including those still in flight."""
        return self.count + self.in_flight

    def reset(self) -> None:
        """Back to zero, for another block."""
        self.count = 0
        self.setters.clear()

    def _arrive(self, by: Any) -> None:
        self.count += 1
        self.setters.append(by)
        if self.count > FLAG_MAX:
            raise HazardError(f"flag {self.name} set {self.count} times without a wait (counter max "
                              f"{FLAG_MAX}) at cycle {self.env.now:.0f}")
        self._wake()
