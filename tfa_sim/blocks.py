"""Blocks: the unit of work one AI core runs — up to CUBE_S0 query rows against one K/V head.

A block knows its rows (the query head and S0 position of each), the logical
tiles of S1 it issues (in order; a mask can skip some), which cube sub-tiles of
each issued tile are computed, and its mask.  Blocks are numbered batch-major,
then head, then row block; the dispatch order is ``schedule.block_order``
(:func:`dispatch_order`).  Stage programs index issued tiles locally
(t = 0 … tiles−1: FIFO slots, credits, the l1_exp_max ring) and columns through
:meth:`Block.col0`; events and dumps name the global tile (:meth:`Block.tile_id`).
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from tfa_sim.config import Config
from tfa_sim.masks import Causal, Mask, Rows


@dataclass(frozen=True, eq=False)
class Block:
    """One block: which rows, against which K/V head, which tiles and sub-tiles it computes."""

    index: int
    rows: Rows
    kv_head: int
    tile_ids: tuple[int, ...]  # global logical tiles issued, in order
    active: tuple[tuple[bool, ...], ...]  # per issued tile: is each cube sub-tile computed
    mask: Mask
    cube_s0: int
    cube_s1: int
    tile_s1: int
    key: Hashable = field(default=None)  # blocks with equal non-None keys issue the same program (timing only)

    @property
    def batch(self) -> int:
        return self.rows.batch

    @property
    def head(self) -> int:
        """The query head of the block's first row."""
        return int(self.rows.heads[0])

    @property
    def row0(self) -> int:
        """The S0 position of the block's first row."""
        return int(self.rows.pos[0])

    @property
    def n_rows(self) -> int:
        return len(self.rows.pos)

    @property
    def tiles(self) -> int:
        return len(self.tile_ids)

    def tile_id(self, t: int) -> int:
        """The global tile of local tile t (past the last: one beyond it, for epilogues)."""
        return self.tile_ids[t] if t < len(self.tile_ids) else (self.tile_ids[-1] + 1 if self.tile_ids else 0)

    def col0(self, t: int, sub: int) -> int:
        """First S1 column of sub-tile ``sub`` of local tile ``t``."""
        return self.tile_ids[t] * self.tile_s1 + sub * self.cube_s1

    def sub_tile_active(self, t: int, sub: int) -> bool:
        """False for a cube sub-tile no row of the block sees: its load and matmul are skipped."""
        return self.active[t][sub]

    def active_subs(self, t: int) -> list[int]:
        return [s for s, on in enumerate(self.active[t]) if on]

    def slice_rows(self, r0: int, n: int) -> Rows:
        return Rows(self.rows.batch, self.rows.heads[r0:r0 + n], self.rows.pos[r0:r0 + n])

    def coverage(self, t: int, r0: int, n: int) -> str:
        """How the mask covers local tile t for block rows r0 … r0+n−1: none, partial or full."""
        return self.mask.coverage(self.slice_rows(r0, n), self.tile_ids[t] * self.tile_s1, self.tile_s1)

    def masked(self, t: int, r0: int, n: int) -> np.ndarray | None:
        """Boolean n × TILE_S1, True where the mask hides the key from the row (None: nothing hidden)."""
        if self.mask.kind == "none":
            return None
        hidden = ~self.mask.visible(self.slice_rows(r0, n), self.tile_ids[t] * self.tile_s1, self.tile_s1)
        return hidden if hidden.any() else None


def config_mask(config: Config) -> Mask:
    """The mask a config asks for."""
    return Causal() if config.case.causal else Mask()


def _tiles_of(rows: Rows, mask: Mask, config: Config) -> tuple[tuple[int, ...], tuple[tuple[bool, ...], ...]]:
    """The logical tiles some row sees and, per tile, which cube sub-tiles some row sees."""
    t = config.tiling
    kf = t.k_tile_factor
    col0s = np.arange(config.tiles * kf, dtype=np.int64) * t.cube_s1
    seen, _ = mask.tile_coverage(rows, col0s, t.cube_s1)
    per_tile = seen.reshape(config.tiles, kf)
    ids = tuple(int(i) for i in np.flatnonzero(per_tile.any(axis=1)))
    return ids, tuple(tuple(bool(x) for x in per_tile[i]) for i in ids)


def make_blocks(config: Config, mask: Mask | None = None) -> list[Block]:
    """All blocks of the run, numbered batch-major, then head, then row block."""
    c, t = config.case, config.tiling
    mask = mask or config_mask(config)
    group = c.heads // c.kv_heads
    out: list[Block] = []
    for b in range(c.batch):
        for h in range(c.heads):
            for r0 in range(0, c.s0, t.cube_s0):
                pos = np.arange(r0, min(r0 + t.cube_s0, c.s0), dtype=np.int64)
                rows = Rows(b, np.full(len(pos), h, np.int64), pos)
                ids, active = _tiles_of(rows, mask, config)
                key = (ids, len(pos), b, h // group) if mask.kind == "none" else None
                out.append(Block(len(out), rows, h // group, ids, active, mask, t.cube_s0, t.cube_s1, t.tile_s1, key))
    return out
