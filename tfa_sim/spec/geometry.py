"""The launch geometry, computed once: a config's blocks in dispatch order, its grid, cores, waves and combine launch.

``kernel.launch_grid`` decides how the work units (a row block × an S1 chunk each, :func:`make_blocks`) reach the
cores:

* ``blocks`` — one block per unit, Block Dim = units; the chip hands them to min(units, cores) cores round-robin in
  ``schedule.block_order`` (core c runs dispatch positions c, c + cores, …, the kernel's ``for block = coreIdx;
  block < total; block += coreNum``), each paying a dispatch;
* ``persistent`` — Block Dim = min(units, cores) cores (the port's ``_block_dim``), core c looping over a contiguous
  range of the units in one program (``compute_range``: the first ``units % cores`` cores one unit more).

A split launch (``s1_split`` > 1) is followed by the combine launch: one block per split row block, dispatched by
the hardware.  :class:`Dispatch` numbers a launch's units by dispatch position in both grids (core ``p % cores``
runs position p), so a sample of the first n positions (the fold, :meth:`Dispatch.head`) and a per-core count (the
tuner's screen) read both alike.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tfa_sim.spec.blocks import Block, CombineBlock, combine_blocks, make_blocks, order_blocks
from tfa_sim.spec.config import Config
from tfa_sim.spec.masks import Mask


@dataclass(frozen=True)
class CoreUnits:
    """A persistent core's work: its units, in the order its one program runs them."""

    units: tuple[Block, ...]

    @property
    def index(self) -> int:
        """The first unit's block number (what the core's dispatch is filed under)."""
        return self.units[0].index


@dataclass(frozen=True)
class Dispatch:
    """One launch's units in dispatch position order (position p runs on core p % cores), on ``cores`` cores;
    ``persistent``: one program per core over its positions, else one block per dispatch."""

    order: tuple[Any, ...]
    cores: int
    persistent: bool = False

    @classmethod
    def of(cls, order: Sequence[Any], cube_cores: int, persistent: bool = False) -> Dispatch:
        """``order`` on as many of ``cube_cores`` as it has units."""
        return cls(tuple(order), min(cube_cores, len(order)), persistent)

    @property
    def units(self) -> int:
        return len(self.order)

    @property
    def grid(self) -> int:
        """The launch's Block Dim: its blocks, or a persistent grid's cores."""
        return self.cores if self.persistent else self.units

    @property
    def waves(self) -> int:
        """Units per core, at most."""
        return -(-self.units // self.cores) if self.cores else 0

    def queues(self) -> list[list[Any]]:
        """What each core runs, in order: its blocks (each one dispatch), or its :class:`CoreUnits` (one)."""
        own = [list(self.order[c::self.cores]) for c in range(self.cores)]
        return [[CoreUnits(tuple(units))] for units in own] if self.persistent else own

    def head(self, count: int) -> Dispatch:
        """The first ``count`` positions on as many cores (a sample of the launch)."""
        return Dispatch(self.order[:count], min(self.cores, count), self.persistent)

    def each(self, change: Callable[[Any], Any]) -> Dispatch:
        """The same dispatch with ``change`` applied to every unit (a fold cuts them)."""
        return Dispatch(tuple(map(change, self.order)), self.cores, self.persistent)


@dataclass(frozen=True)
class Geometry:
    """A run's launches: the kernel's (``main``) and, for a split run, the combine's."""

    main: Dispatch
    combine: Dispatch | None

    @property
    def blocks(self) -> tuple[Block, ...]:
        """The kernel launch's blocks, in dispatch position order."""
        return self.main.order

    @property
    def chunks(self) -> int:
        """S1 chunks per row block run (``s1_split`` as resolved)."""
        return max((b.chunks for b in self.main.order), default=1)


def persistent_order(blocks: Sequence[Block], cores: int) -> list[Block]:
    """The port's persistent grid (fa_builder.py ``compute_range``) in dispatch positions: min(units, cores) cores,
    core c a contiguous range of the units, the first ``units % cores`` cores one unit more."""
    n = len(blocks)
    m = min(n, cores)
    if m == 0:
        return []
    share, extra = divmod(n, m)
    starts = [c * share + min(c, extra) for c in range(m)]
    return [blocks[starts[c] + j] for j in range(share + 1) for c in range(m) if j < share + (c < extra)]


def launch_geometry(config: Config, cube_cores: int, mask: Mask | None = None) -> Geometry:
    """The launches of ``config`` on a chip of ``cube_cores`` cube cores (``mask``: the config's, if loaded)."""
    blocks = make_blocks(config, mask, cube_cores)
    persistent = config.kernel.launch_grid == "persistent"
    order = persistent_order(blocks, cube_cores) if persistent else \
        order_blocks(blocks, config.schedule.block_order, cube_cores)
    split: list[CombineBlock] = combine_blocks(blocks)
    return Geometry(Dispatch.of(order, cube_cores, persistent), Dispatch.of(split, cube_cores) if split else None)
