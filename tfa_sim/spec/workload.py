"""How much work a config asks for — blocks, issued tiles, instruction groups — in closed form.

These counts decide refusals (an absurd config, a run that cannot fit in memory), so they must be
cheap for any config, including ones with 10^20 blocks: nothing here enumerates blocks.  The causal
tile count of a row block is ``min(T, ceil((r+1)·CUBE_S0 / TILE_S1))`` (``blocks.issued_tiles``);
sums of it over row blocks are floor sums, computed in O(log) steps.
"""
from __future__ import annotations

from tfa_sim.spec.config import Config

#: Instruction groups per issued logical tile ≈ GROUPS_PER_SUB·kTileFactor + GROUPS_PER_TILE, plus
#: GROUPS_PER_BLOCK per block (measured on the event logs of the reference cases: 17–19 per cube sub-tile,
#: about 4 per tile and 15 per block; the causal mask only removes groups).
GROUPS_PER_SUB = 16
GROUPS_PER_TILE = 4
GROUPS_PER_BLOCK = 16


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} floor((a·i + b) / m) for n ≥ 0, m ≥ 1, a ≥ 0, b ≥ 0 (Euclid-like, O(log))."""
    total = 0
    while n > 0:
        total += (a // m) * n * (n - 1) // 2 + (b // m) * n
        a, b = a % m, b % m
        y_max = a * n + b
        if y_max < m:
            break
        n, b, m, a = y_max // m, y_max % m, a, m
    return total


def blocks(config: Config) -> int:
    c = config.case
    return c.batch * c.heads * config.blocks_per_head


def _capped_tiles(config: Config, rows: int, cap: int) -> int:
    """Σ over the first ``rows`` row blocks of a head of min(cap, tiles the block issues)."""
    cap = min(cap, config.tiles)
    if cap <= 0 or rows <= 0:
        return 0
    if not config.case.causal:
        return rows * cap
    c0, ts = config.tiling.cube_s0, config.tiling.tile_s1
    below = min(rows, (cap - 1) * ts // c0)  # row blocks issuing fewer than ``cap`` tiles
    return floor_sum(below, ts, c0, c0 + ts - 1) + (rows - below) * cap


def selected_tiles(config: Config, block_span: tuple[int, int] = (0, 1 << 62),
                   tile_span: tuple[int, int] = (0, 1 << 62)) -> int:
    """Issued (block, tile) pairs with block index in ``block_span`` and tile in ``tile_span`` (half-open)."""
    per_head = config.blocks_per_head
    t0, t1 = max(0, tile_span[0]), max(0, tile_span[1])
    if t1 <= t0 or per_head == 0:
        return 0

    def head_rows(rows: int) -> int:
        return _capped_tiles(config, rows, t1) - _capped_tiles(config, rows, t0)

    def upto(index: int) -> int:  # blocks [0, index) in dispatch order: whole heads, then row blocks
        index = min(max(index, 0), blocks(config))
        return index // per_head * head_rows(per_head) + head_rows(index % per_head)

    return max(0, upto(block_span[1]) - upto(block_span[0]))


def issued_tiles(config: Config) -> int:
    """Logical tiles all blocks issue together."""
    return selected_tiles(config)


def instruction_groups(config: Config) -> int:
    """About how many instruction groups the simulation executes (an upper estimate)."""
    per_tile = GROUPS_PER_SUB * config.tiling.k_tile_factor + GROUPS_PER_TILE
    return issued_tiles(config) * per_tile + blocks(config) * GROUPS_PER_BLOCK
