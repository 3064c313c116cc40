"""The launch geometry, computed once: a config's blocks in dispatch order, its grid, cores, waves and combine launch.

``kernel.launch_grid`` (its registry's values are declared here, :data:`~tfa_sim.spec.choices.LAUNCH_GRID`) decides
how the work units (a row block × an S1 chunk each, :func:`make_blocks`) reach the cores:

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
from tfa_sim.spec.choices import LAUNCH_GRID
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

    @property
    def full_waves(self) -> int:
        """Waves in which every core runs a unit."""
        return self.units // self.cores if self.cores else 0

    @property
    def rest(self) -> int:
        """Units of the last wave when it is partial (0: every wave is full)."""
        return self.units % self.cores if self.cores else 0

    @property
    def idle_share(self) -> float:
        """The share of the waves' core-time no unit fills (the cores a partial last wave leaves idle)."""
        return 1 - self.units / (self.waves * self.cores) if self.cores else 0.0

    def core_of(self, position: int) -> int:
        """The core that runs dispatch position ``position``."""
        return position % self.cores

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


@dataclass(frozen=True)
class LaunchGrid:
    """What a ``kernel.launch_grid`` value does: the dispatch order of the units on ``cores`` cores, and whether
    each core runs its units in one program (``persistent``) or takes one block per dispatch."""

    persistent: bool
    order: Callable[[Sequence[Block], int, str], list[Block]]


def _hardware_order(blocks: Sequence[Block], cores: int, block_order: str) -> list[Block]:
    return order_blocks(blocks, block_order, cores)


def _persistent_order(blocks: Sequence[Block], cores: int, _block_order: str) -> list[Block]:
    return persistent_order(blocks, cores)


def _row_order_only(config: Config) -> str | None:
    s = config.schedule
    return None if s.block_order == "row" else (
        f"schedule.block_order = {s.block_order} orders hardware-dispatched blocks; kernel.launch_grid = persistent "
        f"gives each core a contiguous range of units: use block_order = row, or launch_grid = blocks")


LAUNCH_GRID.add("blocks", LaunchGrid(False, _hardware_order),
                "Block Dim = units, handed to the cores round-robin in `schedule.block_order`, a dispatch each",
                "manual `runTFA<<<S0/128>>>`", (), __name__)
LAUNCH_GRID.add("persistent", LaunchGrid(True, _persistent_order),
                "Block Dim = min(units, cores), each core looping over a contiguous range of units in one program",
                "PTO-DSL fa_builder.py `_block_dim`, `compute_range`", (_row_order_only,), __name__)


def launch_geometry(config: Config, cube_cores: int, mask: Mask | None = None) -> Geometry:
    """The launches of ``config`` on a chip of ``cube_cores`` cube cores (``mask``: the config's, if loaded)."""
    blocks = make_blocks(config, mask, cube_cores)
    grid: LaunchGrid = LAUNCH_GRID.value(config.kernel.launch_grid).does
    order = grid.order(blocks, cube_cores, config.schedule.block_order)
    split: list[CombineBlock] = combine_blocks(blocks)
    return Geometry(Dispatch.of(order, cube_cores, grid.persistent),
                    Dispatch.of(split, cube_cores) if split else None)
