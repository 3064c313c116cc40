"""Blocks: the unit of work one AI core runs — up to CUBE_S0 query rows against one K/V head.

A block knows its rows (the query head and S0 position of each), the logical
tiles of S1 it issues (in order; a mask can skip some), which cube sub-tiles of
each issued tile are computed, and its mask.  Blocks are made row block by row
block (batch-major, then head — or K/V head when ``gqa_pack`` — then rows);
with ``s1_split`` = N each row block is cut into N chunks of contiguous tiles,
one block each, that write partial results for the combine launch.  Stage
programs index issued tiles locally (t = 0 … tiles−1: FIFO slots, credits, the
l1_exp_max ring) and columns through :meth:`Block.col0`; events and dumps name
the global tile (:meth:`Block.tile_id`).

The dispatch order is ``schedule.block_order`` (:func:`order_blocks`); block
numbers stay those of the row order, so runs in different orders name the same
work alike.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from tfa_sim.spec.choices import PREFETCH, answer, whole
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.masks import Causal, Mask, Rows, Window, load_mask


def lane_split(rows: int, lane: int) -> tuple[int, int]:
    """(first row, rows) of AIV ``lane`` in a block of ``rows`` rows: AIV 0 takes the first ⌈rows/2⌉, AIV 1
    the other ⌊rows/2⌋ (a full block: CUBE_S0/2 each, as the kernel; one row: AIV 1 has none)."""
    first = -(-rows // 2)
    return (0, first) if lane == 0 else (first, rows - first)


@dataclass(frozen=True)
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
    row_block: int = 0  # which row block (of the run, in row order) the block's rows are
    chunk: int = 0  # which S1 chunk of its row block (0 … chunks−1)
    chunks: int = 1  # S1 chunks per row block (s1_split); > 1: the block writes a partial result
    tile_end: int = 0  # one past the last logical tile of the chunk's S1 range
    key: Hashable = field(default=None)  # blocks with equal non-None keys issue the same program (timing only);
    # their K/V lines differ only by line_base, which the engine applies at issue

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

    @property
    def units(self) -> tuple[Block]:
        """The units one dispatch of the block runs: itself (a persistent core's:
        :class:`~tfa_sim.spec.geometry.CoreUnits`)."""
        return (self,)

    @property
    def line_base(self) -> tuple[int, int]:
        """Whose K and V the block reads (batch, K/V head): its input lines in the L2 are named under it."""
        return self.rows.batch, self.kv_head

    @property
    def partial(self) -> bool:
        """True when the block is one S1 chunk of several: it ends with an unnormalised O, its max and sum."""
        return self.chunks > 1

    @property
    def work(self) -> int:
        """Cube sub-tiles the block computes: the measure of its length the block orders use."""
        return sum(sum(a) for a in self.active)

    def lane_rows(self, lane: int) -> tuple[int, int]:
        return lane_split(self.n_rows, lane)

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
        if self.mask.kind == "none":
            return "none"
        return self.mask.coverage(self.slice_rows(r0, n), self.tile_ids[t] * self.tile_s1, self.tile_s1)

    def masked(self, t: int, r0: int, n: int) -> np.ndarray | None:
        """Boolean n × TILE_S1, True where the mask hides the key from the row (None: nothing hidden)."""
        if self.mask.kind == "none":
            return None
        hidden = ~self.mask.visible(self.slice_rows(r0, n), self.tile_ids[t] * self.tile_s1, self.tile_s1)
        return hidden if hidden.any() else None


def config_mask(config: Config) -> Mask:
    """The mask a config asks for: the ``case.mask`` file, the causal window, causal, or none."""
    c = config.case
    if c.mask:
        return load_mask(c.mask, c.batch, c.heads, c.s0, c.s1)
    if c.window:
        return Window(c.window)
    return Causal() if c.causal else Mask()


def row_groups(config: Config) -> list[Rows]:
    """The rows of every row block, in row order: per batch, per query head (per K/V head when packed,
    its query heads' rows head after head), CUBE_S0 rows at a time (the last may be short)."""
    c, t = config.case, config.tiling
    group = c.heads // c.kv_heads
    sets = ([list(range(g * group, (g + 1) * group)) for g in range(c.kv_heads)] if config.schedule.gqa_pack
            else [[h] for h in range(c.heads)])
    out = []
    for b in range(c.batch):
        for heads in sets:
            all_heads = np.repeat(np.array(heads, np.int64), c.s0)
            all_pos = np.tile(np.arange(c.s0, dtype=np.int64), len(heads))
            for r0 in range(0, len(all_pos), t.cube_s0):
                out.append(Rows(b, all_heads[r0:r0 + t.cube_s0], all_pos[r0:r0 + t.cube_s0]))
    return out


def split_count(config: Config, cores: int) -> int:
    """``schedule.s1_split`` as the number of chunks run: a chunk holds at least one logical tile, so N is at
    most S1/TILE_S1 (a larger N runs one chunk per tile; the summary reports the N run).

    "auto" is the N (1 … cores) with the shortest critical core in a closed-form estimate — waves
    ⌈R·N/cores⌉ times (chunk tiles ⌈T/N⌉ + the block dispatch in tiles) for R row blocks of T tiles, plus
    the launch gap and one more dispatch for the combine launch when N > 1; a tile costs its K and V through
    the core's GM port (decode blocks stream K/V) — the smallest N on a tie."""
    split, tiles = config.schedule.s1_split, config.tiles
    if split == "auto":
        hw = load_hardware(config.hardware)
        tile_cycles = 2 * config.tiling.tile_s1 * config.case.head * 2 / hw.move.gm_to_l1
        dispatch = hw.overhead.block_dispatch / tile_cycles
        combine = dispatch + hw.launch.gap(config.hardware.host) / tile_cycles
        rows = len(row_groups(config))

        def critical(n: int) -> float:
            return -(-rows * n // cores) * (-(-tiles // n) + dispatch) + (combine if n > 1 else 0.0)

        split = min(range(1, min(cores, tiles) + 1), key=lambda n: (critical(n), n))
    return max(1, min(tiles, int(split)))


def chunk_ranges(tiles: int, chunks: int) -> list[tuple[int, int]]:
    """[start, end) logical tiles of each of ``chunks`` contiguous S1 chunks, sizes differing by at most 1
    (the longer ones first)."""
    size, extra = divmod(tiles, chunks)
    out, start = [], 0
    for n in range(chunks):
        end = start + size + (n < extra)
        out.append((start, end))
        start = end
    return out


def _tiles_of(rows: Rows, mask: Mask, config: Config,
              span: tuple[int, int]) -> tuple[tuple[int, ...], tuple[tuple[bool, ...], ...]]:
    """The logical tiles of ``span`` some row sees and, per tile, which cube sub-tiles some row sees."""
    t = config.tiling
    kf = t.k_tile_factor
    first, end = span
    col0s = np.arange(first * kf, end * kf, dtype=np.int64) * t.cube_s1
    seen, _ = mask.tile_coverage(rows, col0s, t.cube_s1)
    per_tile = seen.reshape(end - first, kf)
    hit = np.flatnonzero(per_tile.any(axis=1))
    return tuple((hit + first).tolist()), tuple(map(tuple, per_tile[hit].tolist()))  # Python ints and bools


def make_blocks(config: Config, mask: Mask | None = None, cores: int = 1) -> list[Block]:
    """All blocks of the run in row order (module docstring); ``cores`` decides ``s1_split = "auto"``.

    A chunk whose tiles no row of its row block sees makes no block.
    """
    t, group = config.tiling, config.case.heads // config.case.kv_heads
    mask = mask or config_mask(config)
    chunks = split_count(config, cores)
    out: list[Block] = []
    cache: dict[Hashable, Any] = {}

    def once(key: Hashable, compute: Callable[[], Any]) -> Any:
        """A positional mask treats rows by query position only: blocks with equal positions share results."""
        if mask.kind == "array":
            return compute()
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    for r, rows in enumerate(row_groups(config)):
        pos = rows.pos.tobytes()
        once(pos, partial(_refuse_empty_rows, mask, rows, config.case.s1))
        kv = int(rows.heads[0]) // group
        for n, span in enumerate(chunk_ranges(config.tiles, chunks)):
            ids, active = once((pos, span), partial(_tiles_of, rows, mask, config, span))
            if not ids:
                continue
            key = (ids, len(rows.pos), chunks > 1) if mask.kind == "none" else None
            out.append(Block(len(out), rows, kv, ids, active, mask, t.cube_s0, t.cube_s1, t.tile_s1, r, n, chunks,
                             span[1], key))
    return out


def run_blocks(config: Config) -> list[Block]:
    """The blocks a run of ``config`` executes: ``s1_split = "auto"`` decided by the cube cores it uses
    (``hardware.cores``, 0 = all of the preset's)."""
    return make_blocks(config, cores=load_hardware(config.hardware).cube_cores)


def _refuse_empty_rows(mask: Mask, rows: Rows, s1: int) -> None:
    """A query row that sees no key has no softmax: refused before anything runs."""
    empty = np.flatnonzero(mask.empty_rows(rows, s1))
    if len(empty):
        i = int(empty[0])
        raise InputError(f"the mask hides every key from query row {int(rows.pos[i])} (batch {rows.batch}, head "
                         f"{int(rows.heads[i])}): its softmax is undefined; unmask at least one key per row")


def order_blocks(blocks: Sequence[Block], order: str, cores: int) -> list[Block]:
    """The dispatch order (core c runs positions c, c + cores, …):

    * ``row`` — as made (the kernel's loop over the block index);
    * ``longest_first`` — most cube work first (stable), so the short blocks fill the last wave;
    * ``zigzag`` — longest first, every other wave reversed (a snake over the cores): core c gets the
      c-th longest block of even waves and the c-th shortest of odd ones, so long and short blocks pair up
      on each core.  For causal blocks of one head this is the zigzag (striped) split of ring attention.
    """
    if order == "row":
        return list(blocks)
    ranked = sorted(blocks, key=lambda b: (-b.work, b.index))
    if order == "longest_first":
        return ranked
    waves = [ranked[i:i + cores] for i in range(0, len(ranked), cores)]
    return [b for w, wave in enumerate(waves) for b in (wave[::-1] if w % 2 else wave)]


@dataclass(frozen=True)
class CombineBlock:
    """One row block of the combine: its rows, the chunks (in order) that wrote partials for them and
    ``tile``, the last logical tile those chunks issue (its dump is filed under it)."""

    index: int
    rows: Rows
    chunks: tuple[int, ...]
    tile: int

    @property
    def tile_ids(self) -> tuple[int, ...]:
        return (self.tile,)

    @property
    def units(self) -> tuple[CombineBlock]:
        return (self,)

    @property
    def n_rows(self) -> int:
        return len(self.rows.pos)

    def lane_rows(self, lane: int) -> tuple[int, int]:
        return lane_split(self.n_rows, lane)


def combine_blocks(blocks: Sequence[Block]) -> list[CombineBlock]:
    """One combine block per row block that was split, numbered after the first launch's blocks."""
    chunks: dict[int, list[int]] = {}
    rows: dict[int, Rows] = {}
    last: dict[int, int] = {}
    for b in blocks:
        if b.partial:
            chunks.setdefault(b.row_block, []).append(b.chunk)
            rows[b.row_block] = b.rows
            last[b.row_block] = max(last.get(b.row_block, 0), b.tile_ids[-1])
    first = max((b.index for b in blocks), default=-1) + 1
    return [CombineBlock(first + i, rows[r], tuple(sorted(chunks[r])), last[r]) for i, r in enumerate(sorted(chunks))]


def _s0_head(config: Config) -> int:
    return config.case.s0


def _nothing(_config: Config) -> int:
    return 0


PREFETCH.add("s0_head", _s0_head, "`S0 · HEAD` elements of each of Q, K and V in the L2 before the launch (the "
             "whole of one head's when S0 = S1)", "manual `PTO_PREFETCH`, `tensor_bytes = S0 · HEAD · 2`", (), __name__)
PREFETCH.add("none", _nothing, "nothing: every first read of an input line misses the L2",
             "JIT `call_kernel`; PTO-DSL caller.cpp", (), __name__)


def prefetched_rows(config: Config) -> int:
    """Rows of each input tensor (Q, K, V, in memory order: batch, head, position) in the L2 when the launch
    starts, as ``kernel.prefetch`` puts them there (its registry's values, above)."""
    return int(answer("prefetch", config.kernel.prefetch, config, wants="a whole number of rows ≥ 0",
                      check=whole(0)))


def prefetched_columns(block: Block, config: Config, rows: int | None = None) -> int:
    """How many of the S1 columns of ``block``'s K/V head the host prefetched (0 … S1; ``rows``: the config's
    :func:`prefetched_rows`, when known)."""
    c = config.case
    kv_row = (block.batch * c.kv_heads + block.kv_head) * c.s1
    return min(max((prefetched_rows(config) if rows is None else rows) - kv_row, 0), c.s1)


def prefetch_signature(block: Block, config: Config) -> tuple[bool, int]:
    """What of ``block``'s inputs the host prefetched, as its loads see it: whether all its Q rows are (its Q load
    hits), and how many columns of its S1 range, from the first, find their K and V in the L2 in whole CUBE_S1
    chunks (a chunk's load hits only when all of it is there) — blocks of one key and one signature issue the
    same reads."""
    c, step = config.case, config.tiling.cube_s1
    last_q = (block.batch * c.heads + int(block.rows.heads.max())) * c.s0 + int(block.rows.pos.max()) + 1
    first = block.col0(0, 0) if block.tile_ids else c.s1
    return last_q <= prefetched_rows(config), max(prefetched_columns(block, config) - first, 0) // step * step


def reads_prefetched(block: Block, config: Config) -> bool:
    """Some load of ``block`` hits what the host prefetched (:func:`prefetch_signature`) where its peers' miss."""
    q_hit, kv_columns = prefetch_signature(block, config)
    return q_hit or kv_columns > 0
