"""Blocks: the unit of work one AI core runs (CUBE_S0 query rows of one batch/head).

Blocks are numbered batch-major, then head, then row block, which is also the
order they are dispatched to cores.  Under the causal mask a block issues only
the logical tiles that reach its diagonal.
"""
from __future__ import annotations

from dataclasses import dataclass

from tfa_sim.config import Config


@dataclass(frozen=True)
class Block:
    """One block: which rows of which (batch, head), and how many tiles it issues."""

    index: int
    batch: int
    head: int
    kv_head: int
    row0: int
    tiles: int
    causal: bool
    cube_s0: int
    cube_s1: int
    tile_s1: int

    def col0(self, t: int, sub: int) -> int:
        """First S1 column of sub-tile ``sub`` of logical tile ``t``."""
        return t * self.tile_s1 + sub * self.cube_s1

    def sub_tile_active(self, t: int, sub: int) -> bool:
        """False for a cube sub-tile entirely above the diagonal: its load and matmul are skipped."""
        col0 = t * self.tile_s1 + sub * self.cube_s1
        return not self.causal or col0 <= self.row0 + self.cube_s0 - 1

    def last_active_sub(self, t: int) -> int:
        """The last sub-tile of tile t that is computed (active sub-tiles are a prefix of the tile)."""
        return self.active_cols(t) // self.cube_s1 - 1

    def active_cols(self, t: int) -> int:
        """Columns of tile t covered by active sub-tiles (a prefix of the tile)."""
        k_tile_factor = self.tile_s1 // self.cube_s1
        return self.cube_s1 * sum(self.sub_tile_active(t, s) for s in range(k_tile_factor))

    def needs_mask(self, t: int, first_row: int) -> bool:
        """True when some element of tile t in rows ≥ ``first_row`` lies above the diagonal."""
        return self.causal and (t + 1) * self.tile_s1 - 1 > first_row

    def mask(self, t: int, first_row: int, rows: int) -> str:
        """How much of tile t the causal mask covers for the ``rows`` rows from ``first_row``: ``full``
        (every column is right of the last row: the kernel only zeroes x_exp and sets exp_max to 1),
        ``diagonal`` (the kernel adds the mask before the softmax) or ``none``."""
        if not self.needs_mask(t, first_row):
            return "none"
        return "full" if t * self.tile_s1 > first_row + rows - 1 else "diagonal"


def issued_tiles(config: Config, row0: int) -> int:
    """Logical tiles a block starting at ``row0`` issues.

    Non-causal: all S1/TILE_S1.  Causal (top-left aligned, column ≤ row): the tiles
    up to the block's last row, ``ceil((row0 + CUBE_S0)/TILE_S1)``; this equals the
    kernel's ``1 + (block·CUBE_S0)/TILE_S1`` whenever TILE_S1 is a multiple of CUBE_S0
    and, unlike it, still covers every row when CUBE_S0 > TILE_S1.
    """
    if not config.case.causal:
        return config.tiles
    return min(config.tiles, -(-(row0 + config.tiling.cube_s0) // config.tiling.tile_s1))


def make_blocks(config: Config) -> list[Block]:
    """All blocks of the run in dispatch order."""
    c, t = config.case, config.tiling
    group = c.heads // c.kv_heads
    out: list[Block] = []
    for b in range(c.batch):
        for h in range(c.heads):
            for r in range(config.blocks_per_head):
                row0 = r * t.cube_s0
                out.append(Block(len(out), b, h, h // group, row0, issued_tiles(config, row0), c.causal,
                                 t.cube_s0, t.cube_s1, t.tile_s1))
    return out
