"""Intermediate dumps (INTERMEDIATE_CHECK): every stage's output per block and logical tile.

The engine's actions hand each finished piece of a tile to :class:`DumpRecorder`;
a tile is complete when all its rows arrived, and the instruction that completed
it is its timeline event.  :func:`write_dumps` writes, under ``RUN/dumps/``:

* ``block{b}_{name}{t}.npy`` and the same bytes raw as ``block{b}_{name}{t}.bin`` (a split-S1 run's
  combine blocks are numbered after the first launch's; their ``combine_o`` is filed under the last
  tile their chunks issue);
* the reference generator's full-S0 files (``qk.bin``, ``p.bin``,
  ``pv_tile_fifo{t}.bin``, ``exp_max_part{t}.bin``, ``global_max_part{t}.bin``,
  ``global_sum_part{t}.bin``, ``o_part{t}.bin``, ``o.bin``) when every block and
  tile is dumped, with leading ``[batch, heads]`` axes when there are several;
* ``manifest.json``: a list of ``{file, stage, block, tile, sub, dtype, shape,
  slot, event}`` with ``event = {core, unit, pipe, start_cycle, end_cycle}``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.numerics.intermediates import (
    BY_NAME,
    INTERMEDIATES,
    SPLIT_ONLY,
    block_index,
    block_shape,
    empty_full,
    golden_array,
    write_golden,
)
from tfa_sim.rundir.memory import dump_bytes
from tfa_sim.rundir.outputs import write_json
from tfa_sim.spec.blocks import CombineBlock, combine_blocks, run_blocks
from tfa_sim.spec.config import Config, parse_span
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.units import parse_unit


def dump_blocks(config: Config) -> list[Any]:
    """Every block a run's dumps may come from: the first launch's, then (split-S1) the combine's."""
    blocks = run_blocks(config)
    return [*blocks, *combine_blocks(blocks)]


def selection(config: Config) -> list[tuple[int, list[int]]]:
    """(block, tiles) pairs the run will dump."""
    n = config.numerics
    b0, b1 = parse_span(n.dump_blocks, "numerics.dump_blocks") or (0, 1 << 30)
    t0, t1 = parse_span(n.dump_tiles, "numerics.dump_tiles") or (0, 1 << 30)
    return [(b.index, [t for t in b.tile_ids if t0 <= t < t1]) for b in dump_blocks(config) if b0 <= b.index < b1]


def check_size(config: Config) -> int:
    size = dump_bytes(config)
    limit = config.numerics.dump_limit_gib * 2 ** 30
    if size > limit:
        raise InputError(f"intermediate dumps would take {size / 2 ** 30:.2f} GiB > numerics.dump_limit_gib "
                         f"{config.numerics.dump_limit_gib:g}: narrow with --blocks a:b / --tiles a:b or raise "
                         f"the limit (--set numerics.dump_limit_gib=…)")
    return size


@dataclass
class Dump:
    name: str
    block: int
    tile: int
    data: np.ndarray
    slot: int | None
    event: dict[str, Any]


class DumpRecorder:
    """Collects tiles row by row as the pipeline produces them."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.rows = {b.index: len(b.rows.pos) for b in dump_blocks(config)}
        self.wanted = {(b, t) for b, ts in selection(config) for t in ts}
        self.partial: dict[tuple[str, int, int], list[Any]] = {}
        self.done: list[Dump] = []

    def put(self, name: str, block: int, tile: int, row0: int, rows: np.ndarray, ins: Any,
            slot: int | None = None) -> None:
        """Rows ``row0…`` of ``name`` for (block, tile); the tile is complete once all rows are in."""
        if (block, tile) not in self.wanted:
            return
        key = (name, block, tile)
        item = BY_NAME[name]
        entry = self.partial.get(key)
        if entry is None:
            shape = block_shape(item, self.config, self.rows[block])
            entry = self.partial[key] = [np.empty(shape, item.dtype_for(self.config)), 0]
        entry[0][row0:row0 + rows.shape[0]] = rows
        entry[1] += rows.shape[0]
        if entry[1] == entry[0].shape[0]:
            del self.partial[key]
            pipe = ins.pipe
            event = {"core": parse_unit(pipe.unit).core_name, "unit": pipe.unit, "pipe": pipe.name,
                     "instruction": ins.kind, "start_cycle": ins.start, "end_cycle": ins.end}
            self.done.append(Dump(name, block, tile, entry[0], slot, event))


def write_dumps(tmp: Path, recorder: DumpRecorder, config: Config) -> int:
    """Write the dumps and manifest into ``tmp``, a fresh private directory that becomes ``RUN/dumps`` when
    complete (``RunDir.commit``); returns the bytes written."""
    manifest = []
    written = 0
    # in simulated completion order; with worker threads (sim.simulation.op_workers) blocks record in any order
    for d in sorted(recorder.done, key=lambda d: (d.event["end_cycle"], d.block, d.tile, d.name)):
        item = BY_NAME[d.name]
        base = f"block{d.block}_{d.name}{d.tile}"
        np.save(tmp / f"{base}.npy", d.data, allow_pickle=False)
        d.data.tofile(tmp / f"{base}.bin")
        written += 2 * d.data.nbytes
        for ext in ("npy", "bin"):
            manifest.append({"file": f"{base}.{ext}", "name": d.name, "stage": item.stage, "block": d.block,
                             "tile": d.tile, "sub": None, "dtype": d.data.dtype.name,
                             "shape": list(d.data.shape),
                             "slot": d.slot, "event": d.event})
    if config.numerics.full_dump:
        for entry in _reference_layout(tmp, recorder, config):
            manifest.append(entry)
            written += (tmp / entry["file"]).stat().st_size
    write_json(tmp / "manifest.json", manifest)
    return written


def _reference_layout(tmp: Path, recorder: DumpRecorder, config: Config) -> list[dict[str, Any]]:
    """Assemble the blocks' tiles into the full layout and write the reference generator's files.

    A tile a block does not issue holds the kernel's carry-over: the running max, sum and O of the block's
    previous issued tile up to the end of its S1 chunk (if any), l1_exp_max 1, the others +0.  ``o.bin`` is
    the combine's output in a split-S1 run, else the running O after the last tile.
    """
    blocks = dump_blocks(config)
    split = any(isinstance(b, CombineBlock) for b in blocks)
    items = [item for item in INTERMEDIATES if split or item.name not in SPLIT_ONLY]
    tensors = {item.name: empty_full(item, config) for item in items}
    by_key = {(d.name, d.block, d.tile): d.data for d in recorder.done}
    for b in blocks:
        if isinstance(b, CombineBlock):
            tensors["combine_o"][block_index(BY_NAME["combine_o"], b, b.tile, config)] = by_key[
                ("combine_o", b.index, b.tile)]
            continue
        for item in items:
            if item.name in SPLIT_ONLY:
                continue
            full, source = tensors[item.name], None
            for tile in range(b.tile_end):
                if tile in b.tile_ids:
                    source = by_key[(item.name, b.index, tile)]
                elif item.skipped is not None:
                    continue
                if source is not None:
                    full[block_index(item, b, tile, config)] = source
    entries = write_golden(tensors, tmp, config)
    if not split:
        o = golden_array(BY_NAME["o_part"], tensors["o_part"], config.tiles - 1)
        np.ascontiguousarray(o).tofile(tmp / "o.bin")
        item = BY_NAME["o_part"]
        entries.append({"file": "o.bin", "name": item.name, "stage": item.stage, "block": None, "tile": None,
                        "sub": None, "dtype": o.dtype.name, "shape": list(o.shape), "slot": None, "event": None})
    return entries
