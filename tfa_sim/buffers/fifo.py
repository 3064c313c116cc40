"""The cross-core GM FIFOs and the ``l1_exp_max`` ring.

:class:`GmFifo` is ``depth`` tile slots in GM with a ready and a consumed flag
per AIV (*lane*: each AIV owns half the rows; the cube side writes or reads
both lanes).  The credit rule (docs/kernel.md, "Cross-core FIFOs") lives in
its two predicates and nowhere else:

* the producer waits for one credit before tile t when
  :meth:`GmFifo.producer_waits` (``t >= depth and t % period == 0``);
* the consumer returns one credit, worth ``period`` slots, after tile t when
  :meth:`GmFifo.consumer_notifies` (``(t + 1) % period == 0``).

A :class:`FifoTile` is one tile's view of the FIFO for a set of lanes: the
flags to wait on (``ready``, ``credits``), the effects an instruction has
when it completes (``claim``, ``push``, ``free``, ``credit``) and the data
(``region``).  Writing a slot whose previous tile is still unread is a
:class:`~tfa_sim.buffers.pools.HazardError`.

:class:`Ring` is a buffer the kernel sizes instead of syncing
(``l1_exp_max_ififo``): writing an entry that is still unread is a hazard.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import simpy

from tfa_sim.buffers.data import Region, TileStore
from tfa_sim.buffers.pools import Flag, HazardError, send
from tfa_sim.clock.simpy_adapter import now
from tfa_sim.spec.units import LANES


class GmFifo:
    """A GM FIFO of ``depth`` tile slots with ready/consumed flags per lane and the credit rule."""

    def __init__(self, env: simpy.Environment, name: str, depth: int, period: int, latency: float,
                 shape: tuple[int, ...], dtype: Any, producers: Sequence[Any] = (None, None),
                 consumers: Sequence[Any] = (None, None), ffts: Any = None) -> None:
        self.env = env
        self.name = name
        self.short_name = name.split(".", 1)[1] if name.startswith("core") and "." in name else name
        self.depth = depth
        self.period = period
        self.ffts = ffts
        self.ready = [Flag(env, f"{name}.ready[aiv{a}]", latency, "data", producers[a], ffts) for a in range(LANES)]
        self.consumed = [Flag(env, f"{name}.consumed[aiv{a}]", latency, "credit", consumers[a], ffts)
                         for a in range(LANES)]
        self.unread: list[list[int | None]] = [[None] * depth for _ in range(LANES)]
        self.readers = [0] * depth  # per slot: the lanes whose tile in it is unread
        self.held = 0  # slots holding an unread tile in some lane
        self.store = TileStore(depth, shape, dtype)
        self.samples: list[float] | None = None  # cycle, slots holding unread data, cycle, … (flat)

    # ---- the credit rule -------------------------------------------------------------------------
    def producer_waits(self, t: int) -> bool:
        """The producer's ``allocate()`` waits for a credit before tile t: t ≥ depth and t % period == 0."""
        return t >= self.depth and t % self.period == 0

    def consumer_notifies(self, t: int) -> bool:
        """The consumer's ``free()`` of tile t returns a credit: (t + 1) % period == 0."""
        return (t + 1) % self.period == 0

    def undrained_credits(self, tiles: int) -> int:
        """Credits the consumer sends in a block that the producer never waited for (the epilogue drains them)."""
        sent = sum(self.consumer_notifies(t) for t in range(tiles))
        return sent - sum(self.producer_waits(t) for t in range(tiles))

    # ---- one tile --------------------------------------------------------------------------------
    def tile(self, t: int, lanes: Sequence[int] = tuple(range(LANES))) -> FifoTile:
        """Tile ``t`` as seen by ``lanes`` (the cube: both; an AIV: its own)."""
        return FifoTile(self, t, tuple(lanes))

    def claim(self, lane: int, t: int, by: Any) -> None:
        """The producer starts writing tile t in ``lane``: the slot's previous tile must have been read."""
        slot = t % self.depth
        held = self.unread[lane][slot]
        if held is not None and held != t:
            raise HazardError(f"{self.name} slot {slot} (aiv{lane} rows) overwritten by {by.label} tile {t} at "
                              f"cycle {self.env.now:.0f} while tile {held} is unread; the credit rule "
                              f"(depth {self.depth}, period {self.period}) does not protect it")
        if held is None:
            self._count(slot, 1)
        self.unread[lane][slot] = t
        self._sample()

    def free(self, lane: int, t: int) -> None:
        """The consumer of ``lane`` has finished reading tile t."""
        slot = t % self.depth
        if self.unread[lane][slot] is not None:
            self.unread[lane][slot] = None
            self._count(slot, -1)
        self._sample()

    def signal(self, flags: Sequence[Flag], lanes: Sequence[int], by: Any) -> None:
        """One ``ffts_cross_core_sync`` by ``by`` that sets the flag of each of ``lanes``: the cube's set reaches
        both AIVs in one message (CV_CORES_SYNC), an AIV's is its own."""
        served = send(self.env, self.ffts)
        for a in lanes:
            flags[a].post(served, by)

    def flags(self) -> list[Flag]:
        return self.ready + self.consumed

    def reset(self) -> None:
        """Back to an empty FIFO, for another block."""
        for flag in self.flags():
            flag.reset()
        self.unread = [[None] * self.depth for _ in range(LANES)]
        self.readers = [0] * self.depth
        self.held = 0
        self.store.clear()

    def _count(self, slot: int, change: int) -> None:
        """A lane's tile in ``slot`` became unread (+1) or was read (-1): the slot counts in ``held`` while
        any lane's tile in it is unread."""
        before = self.readers[slot]
        self.readers[slot] = before + change
        if not before or not before + change:
            self.held += change

    def _sample(self) -> None:
        if self.samples is not None:
            self.samples.extend((now(self.env), self.held))


class FifoWindow:
    """A :class:`GmFifo` seen by one unit of a persistent core (``kernel.launch_grid = "persistent"``, the dsl
    bundle's choice): its tile t is the FIFO's tile ``base + t``, since the kernel's pipe objects count tiles
    across all the units the core runs."""

    __slots__ = ("fifo", "base")

    def __init__(self, fifo: GmFifo, base: int) -> None:
        self.fifo, self.base = fifo, base

    @property
    def depth(self) -> int:
        return self.fifo.depth

    def tile(self, t: int, lanes: Sequence[int] = tuple(range(LANES))) -> FifoTile:
        return FifoTile(self.fifo, self.base + t, tuple(lanes))


class FifoTile:
    """Tile ``t`` of a :class:`GmFifo` for some lanes: flags to wait on, completion effects, data."""

    __slots__ = ("fifo", "t", "lanes")

    def __init__(self, fifo: GmFifo, t: int, lanes: tuple[int, ...]) -> None:
        self.fifo, self.t, self.lanes = fifo, t, lanes

    @property
    def ready(self) -> tuple[Flag, ...]:
        """The consumer's ``wait()``: one ready flag per lane."""
        return tuple(self.fifo.ready[a] for a in self.lanes)

    @property
    def credits(self) -> tuple[Flag, ...]:
        """The producer's ``allocate()``: one credit per lane when the credit rule says wait, else nothing."""
        if not self.fifo.producer_waits(self.t):
            return ()
        return tuple(self.fifo.consumed[a] for a in self.lanes)

    @property
    def notifies(self) -> bool:
        return self.fifo.consumer_notifies(self.t)

    def claim(self, by: Any) -> None:
        """Effect of the producer's first store: its lanes' slot must hold no unread tile."""
        for a in self.lanes:
            self.fifo.claim(a, self.t, by)

    def push(self, by: Any) -> None:
        """Effect of the producer's last store (``record()``): set the ready flag of each lane."""
        self.fifo.signal(self.fifo.ready, self.lanes, by)

    def free(self, by: Any) -> None:
        """Effect of the consumer's last load: the slot may be written again."""
        for a in self.lanes:
            self.fifo.free(a, self.t)

    def credit(self, by: Any) -> None:
        """Effect of the consumer's ``free()`` when it notifies: one credit per lane to the producer."""
        self.fifo.signal(self.fifo.consumed, self.lanes, by)

    def region(self, index: Any = None) -> Region:
        """The tile's data (``index``: rows and/or columns; None: the whole tile)."""
        return self.fifo.store.region(self.t, index)


class Ring:
    """Entries written round-robin by tile with no flag: writing an entry still unread is a hazard."""

    def __init__(self, env: simpy.Environment, name: str, count: int, shape: tuple[int, ...], dtype: Any) -> None:
        self.env = env
        self.name = name
        self.count = count
        self.holder: list[int | None] = [None] * count  # the tile whose entry is written and not yet read
        self.store = TileStore(count, shape, dtype)

    def reset(self) -> None:
        """Back to an empty ring, for another block."""
        self.holder = [None] * self.count
        self.store.clear()

    def entry(self, t: int) -> RingEntry:
        return RingEntry(self, t)

    def write(self, t: int, by: Any) -> None:
        """``by`` starts writing the entry of tile ``t``."""
        slot = t % self.count
        held = self.holder[slot]
        if held is not None:  # the overwrite rule of every kernel.exp_ring value
            raise HazardError(
                f"{self.name} slot {slot} overwritten by {by.label} at cycle {self.env.now:.0f} while the entry of "
                f"tile {held} is still unread: the kernel does not sync this ring, so on the board compute_gu of "
                f"tile {held} would silently rescale running_o with tile {t}'s factor and O would be wrong; the "
                f"stage order runs compute_p {t - held} tiles ahead of compute_gu and the ring has {self.count} "
                f"entries — give kernel.exp_ring more than {t - held} entries or lower schedule.qk_preload "
                f"(with exp_ring = fifo: qk_preload < cv_fifo_size)")
        self.holder[slot] = t

    def read(self, t: int, by: Any) -> None:
        """``by`` has read the entry of tile ``t``; it may be overwritten from now on."""
        slot = t % self.count
        if self.holder[slot] is None:
            raise HazardError(f"{self.name} slot {slot} read by {by.label} at cycle {self.env.now:.0f} before "
                              f"it was written")
        self.holder[slot] = None


class RingEntry:
    """The ring entry of tile ``t``: effects ``write``/``read`` and its data."""

    __slots__ = ("ring", "t")

    def __init__(self, ring: Ring, t: int) -> None:
        self.ring, self.t = ring, t

    def write(self, by: Any) -> None:
        self.ring.write(self.t, by)

    def read(self, by: Any) -> None:
        self.ring.read(self.t, by)

    def region(self, index: Any = None) -> Region:
        return self.ring.store.region(self.t, index)
