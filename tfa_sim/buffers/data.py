"""Where tiles live, and the data an instruction moves when it executes (numerics on).

A *location* has ``get()`` and ``put(value)``: a :class:`~tfa_sim.buffers.pools.Slot`
of a ping-pong buffer, a :class:`Region` of a GM FIFO tile or of the
``l1_exp_max`` ring, a :class:`View` of a GM tensor (Q, K, V, O) or of a UB
state tile (``m2_global_max``, ``l2_global_sum``, ``running_o``).  An
instruction's ``op`` is a tuple of :class:`Move`, :class:`Compute` and
:class:`Dump` steps, run in order when the instruction completes, so the tile
a consumer reads is the one its producer's instruction wrote in the simulated
schedule.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np


class Location(Protocol):
    def get(self) -> Any: ...

    def put(self, value: Any) -> None: ...


class View:
    """``array[index]`` of a GM tensor or a UB state tile."""

    __slots__ = ("array", "index")

    def __init__(self, array: np.ndarray, index: Any = ...) -> None:
        self.array, self.index = array, index

    def get(self) -> np.ndarray:
        return self.array[self.index]

    def put(self, value: np.ndarray) -> None:
        self.array[self.index] = value


class Const:
    """A value that every read returns (the +0 of a causal sub-tile that is never computed)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value

    def put(self, value: Any) -> None:
        raise TypeError("a constant cannot be written")


class Discard:
    """Where a result the kernel does not keep goes (tile 0's l1_exp_max, all ones)."""

    __slots__ = ()

    def get(self) -> Any:
        raise TypeError("nothing is kept here")

    def put(self, value: Any) -> None:
        pass


DISCARD = Discard()


class TileStore:
    """``depth`` tile slots used round-robin by tile number; writing part of tile t into a slot that still
    holds an older tile starts a fresh array, so views taken of the older tile stay valid (as the copies
    in L1/UB of the consumer would on the hardware)."""

    def __init__(self, depth: int, shape: tuple[int, ...], dtype: np.dtype | type) -> None:
        self.depth, self.shape, self.dtype = depth, shape, np.dtype(dtype)
        self.tiles: list[tuple[int, np.ndarray] | None] = [None] * depth

    def read(self, t: int, index: Any) -> np.ndarray:
        entry = self.tiles[t % self.depth]
        assert entry is not None and entry[0] == t, f"tile {t} read from a slot holding {entry and entry[0]}"
        return entry[1] if index is None else entry[1][index]

    def write(self, t: int, index: Any, value: np.ndarray) -> None:
        slot = t % self.depth
        if index is None:  # the whole tile: keep the array as it is
            self.tiles[slot] = (t, value)
            return
        entry = self.tiles[slot]
        if entry is None or entry[0] != t:
            entry = self.tiles[slot] = (t, np.empty(self.shape, self.dtype))
        entry[1][index] = value

    def region(self, t: int, index: Any = None) -> Region:
        return Region(self, t, index)

    def clear(self) -> None:
        self.tiles = [None] * self.depth


class Region:
    """Part ``index`` (None: all) of tile ``t`` in a :class:`TileStore`."""

    __slots__ = ("store", "t", "index")

    def __init__(self, store: TileStore, t: int, index: Any) -> None:
        self.store, self.t, self.index = store, t, index

    def get(self) -> np.ndarray:
        return self.store.read(self.t, self.index)

    def put(self, value: np.ndarray) -> None:
        self.store.write(self.t, self.index, value)


class Move:
    """Copy a tile from one location to another (a TLOAD, TEXTRACT or TSTORE of real data)."""

    __slots__ = ("src", "dst")

    def __init__(self, src: Location, dst: Location) -> None:
        self.src, self.dst = src, dst

    def __call__(self, _ins: Any) -> None:
        self.dst.put(self.src.get())


class Compute:
    """``fn`` on the tiles at ``srcs`` (None passes None), its results stored at ``dsts`` in order."""

    __slots__ = ("fn", "srcs", "dsts")

    def __init__(self, fn: Callable[..., Any], srcs: tuple[Location | None, ...], dsts: tuple[Location, ...]) -> None:
        self.fn, self.srcs, self.dsts = fn, srcs, dsts

    def __call__(self, _ins: Any) -> None:
        out = self.fn(*[None if s is None else s.get() for s in self.srcs])
        if len(self.dsts) == 1:
            self.dsts[0].put(out)
            return
        if len(out) != len(self.dsts):
            raise ValueError(f"{self.fn} returned {len(out)} results for {len(self.dsts)} destinations")
        for dst, value in zip(self.dsts, out):
            dst.put(value)


class Dump:
    """Hand rows ``row0…`` of a finished tile to the intermediate-check recorder (``tfa_sim.rundir.dumps``)."""

    __slots__ = ("recorder", "name", "block", "t", "row0", "src", "slot")

    def __init__(self, recorder: Any, name: str, block: int, t: int, row0: int, src: Location,
                 slot: int | None = None) -> None:
        self.recorder, self.name, self.block, self.t, self.row0, self.src, self.slot = \
            recorder, name, block, t, row0, src, slot

    def __call__(self, ins: Any) -> None:
        self.recorder.put(self.name, self.block, self.t, self.row0, self.src.get(), ins, self.slot)
