"""Slot pools and flags: the one waiting mechanism behind every buffer and FIFO.

:class:`Pool` owns the queue of waiters and triggers them in request order
(FIFO: a later request is never granted before an earlier one).  Subclasses
only supply their rule:

* :class:`PingPong` — n slots used round-robin; a request triggers once the
  next slot in turn has been released by its previous holder (L1, L0, UB);
* :class:`Flag` — a counting cross-core (or inter-pipe) flag; a wait triggers
  once the flag has been set more times than it was waited (ready/consumed
  flags of the GM FIFOs, block end);

:class:`Ring` is the unguarded buffer the kernel sizes instead of syncing
(``l1_exp_max``); :class:`GmFifo` combines slots and two flags with the
credit rule of KERNEL.md §3.  Misuse raises :class:`HazardError` naming the
buffer, slot, stage, tile and cycle.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import simpy

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
    """Base class: FIFO queue of waiters; ``_can_grant``/``_grant`` are the rule."""

    def __init__(self, env: simpy.Environment, name: str) -> None:
        self.env = env
        self.name = name
        self.short_name = name.split(".", 1)[1] if name.startswith("core") else name  # without "coreN."
        self.waiters: deque[simpy.Event] = deque()
        self.owner_pipe: Any = None  # who would unblock a waiter (for deadlock diagnosis)

    def request(self, tag: Any = None) -> simpy.Event | Granted:
        """An event that triggers once the rule allows; ``value`` is the grant, ``pred`` who enabled it."""
        if not self.waiters and self._can_grant():
            return Granted(*self._grant(tag))
        ev = self.env.event()
        ev.tag = tag
        self.waiters.append(ev)
        return ev

    def _wake(self) -> None:
        while self.waiters and self._can_grant():
            ev = self.waiters.popleft()
            value, ev.pred = self._grant(ev.tag)
            ev.succeed(value)

    def _can_grant(self) -> bool:
        raise NotImplementedError

    def _grant(self, tag: Any) -> tuple[Any, Any]:
        """Take what the rule allows; return (value, the instruction that made it available)."""
        raise NotImplementedError


class PingPong(Pool):
    """``count`` slots used in turn; a request triggers once its slot is free, value = slot index."""

    def __init__(self, env: simpy.Environment, name: str, count: int) -> None:
        super().__init__(env, name)
        self.count = count
        self.holder: list[Any] = [None] * count
        self.released_by: list[Any] = [None] * count
        self.data: list[Any] = [None] * count
        self.next = 0
        self.in_use = 0
        self.peak = 0
        self.samples: list[tuple[float, int]] | None = None  # (cycle, slots in use) when tracing

    def _can_grant(self) -> bool:
        return self.holder[self.next] is None

    def _grant(self, tag: Any) -> tuple[int, Any]:
        slot = self.next
        self.holder[slot] = tag if tag is not None else True
        self.next = (slot + 1) % self.count
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)
        if self.samples is not None:
            self.samples.append((self.env._now, self.in_use))
        return slot, self.released_by[slot]

    def release(self, slot: int, by: Any = None) -> None:
        """``by`` (an instruction) is done with ``slot``; the next request in turn may take it."""
        if self.holder[slot] is None:
            raise HazardError(f"{self.name} slot {slot} released twice at cycle {self.env.now:.0f}")
        self.holder[slot] = None
        self.released_by[slot] = by
        self.in_use -= 1
        if self.samples is not None:
            self.samples.append((self.env._now, self.in_use))
        if self.waiters:
            self._wake()


class Flag(Pool):
    """A counting flag: ``set`` adds one (after ``latency`` cycles), a request consumes one."""

    def __init__(self, env: simpy.Environment, name: str, latency: float = 0.0) -> None:
        super().__init__(env, name)
        self.latency = latency
        self.count = 0
        self.setters: deque[Any] = deque()  # who set each pending count, oldest first

    def _can_grant(self) -> bool:
        return self.count > 0

    def _grant(self, tag: Any) -> tuple[None, Any]:
        self.count -= 1
        return None, self.setters.popleft()

    def set(self, by: Any = None) -> None:
        """``by`` (an instruction) signals the flag; a waiter sees it ``latency`` cycles later."""
        if self.latency:
            self.env.timeout(self.latency).callbacks.append(lambda _ev: self._arrive(by))
        else:
            self._arrive(by)

    def _arrive(self, by: Any) -> None:
        self.count += 1
        self.setters.append(by)
        if self.count > FLAG_MAX:
            raise HazardError(f"flag {self.name} set {self.count} times without a wait (counter max "
                              f"{FLAG_MAX}) at cycle {self.env.now:.0f}")
        self._wake()


class Ring:
    """Slots written round-robin with no flag: a write into a slot still unread is a hazard."""

    def __init__(self, env: simpy.Environment, name: str, count: int) -> None:
        self.env = env
        self.name = name
        self.count = count
        self.holder: list[Any] = [None] * count
        self.data: list[Any] = [None] * count

    def write(self, index: int, tag: str) -> None:
        """Claim the slot of tile ``index`` for writing (the data lives in ``data[slot]``)."""
        slot = index % self.count
        if self.holder[slot] is not None:
            raise HazardError(f"{self.name} slot {slot} overwritten by {tag} at cycle {self.env.now:.0f} "
                              f"while {self.holder[slot]} is still unread; raise schedule.ub_exp_max above "
                              f"qk_preload")
        self.holder[slot] = tag

    def read(self, index: int, tag: str) -> Any:
        """Consume the slot of tile ``index``; its data may be overwritten from now on."""
        slot = index % self.count
        if self.holder[slot] is None:
            raise HazardError(f"{self.name} slot {slot} read by {tag} at cycle {self.env.now:.0f} before "
                              f"it was written")
        self.holder[slot] = None
        return self.data[slot]


class GmFifo:
    """A GM FIFO of ``depth`` tile slots with ready/consumed flags and the credit rule.

    Each of the two AIVs is a *lane* with its own rows, its own ready flag and its
    own credit flag (the cube side writes or reads both lanes).  Producer: before
    writing tile t it waits for one credit when ``t >= depth and t % period == 0``;
    after the last store it sets ``ready``.  Consumer: waits ``ready`` before the
    first load of tile t; after the last load it frees the slot and, when
    ``(t + 1) % period == 0``, sends one credit (worth ``period`` slots).
    Writing a slot whose previous tile is still unread is a hazard.
    """

    LANES = 2

    def __init__(self, env: simpy.Environment, name: str, depth: int, period: int, latency: float) -> None:
        self.env = env
        self.name = name
        self.depth = depth
        self.period = period
        self.ready = [Flag(env, f"{name}.ready[aiv{a}]", latency) for a in range(self.LANES)]
        self.consumed = [Flag(env, f"{name}.consumed[aiv{a}]", latency) for a in range(self.LANES)]
        self.unread: list[list[int | None]] = [[None] * depth for _ in range(self.LANES)]
        self.data: list[Any] = [None] * depth
        self.samples: list[tuple[float, int]] | None = None  # (cycle, slots holding unread data)

    def must_wait_credit(self, t: int) -> bool:
        """Producer credit rule: wait when t ≥ depth and t % period == 0 (t = 8, 12, 16 … by default)."""
        return t >= self.depth and t % self.period == 0

    def notifies(self, t: int) -> bool:
        """Consumer credit rule: notify when (t + 1) % period == 0 (t = 3, 7, 11 …)."""
        return (t + 1) % self.period == 0

    def undrained_credits(self, tiles: int) -> int:
        """Credits the consumer sends in a block that the producer never waited for (epilogue drain)."""
        sent = sum(self.notifies(t) for t in range(tiles))
        return sent - sum(self.must_wait_credit(t) for t in range(tiles))

    def claim(self, lane: int, t: int, stage: str) -> int:
        """The producer starts writing tile t in ``lane``: the slot's previous tile must have been read."""
        slot = t % self.depth
        held = self.unread[lane][slot]
        if held is not None and held != t:
            raise HazardError(f"{self.name} slot {slot} (aiv{lane} rows) overwritten by {stage} tile {t} at "
                              f"cycle {self.env.now:.0f} while tile {held} is unread; the credit rule "
                              f"(depth {self.depth}, period {self.period}) does not protect it")
        self.unread[lane][slot] = t
        self._sample()
        return slot

    def free(self, lane: int, t: int) -> None:
        """The consumer of ``lane`` has finished reading tile t."""
        self.unread[lane][t % self.depth] = None
        self._sample()

    # The cube side writes or reads both lanes at once:
    def claim_both(self, t: int, stage: str) -> None:
        for lane in range(self.LANES):
            self.claim(lane, t, stage)

    def free_both(self, t: int) -> None:
        for lane in range(self.LANES):
            self.free(lane, t)

    def signal_both(self, by: Any) -> None:
        """Set the ready flag of both lanes (the producer has stored a whole tile)."""
        for flag in self.ready:
            flag.set(by)

    def credit_both(self, by: Any) -> None:
        """Return a credit to both lanes' producers."""
        for flag in self.consumed:
            flag.set(by)

    def _sample(self) -> None:
        if self.samples is not None:
            held = sum(any(lane[s] is not None for lane in self.unread) for s in range(self.depth))
            self.samples.append((self.env._now, held))
