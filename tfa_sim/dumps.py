"""Intermediate dumps (INTERMEDIATE_CHECK): every stage's output per block and logical tile.

The engine's actions hand each finished piece of a tile to :class:`DumpRecorder`;
a tile is complete when all its rows arrived, and the instruction that completed
it is its timeline event.  :func:`write_dumps` writes, under ``RUN/dumps/``:

* ``block{b}_{name}{t}.npy`` and the same bytes raw as ``block{b}_{name}{t}.bin``;
* the reference generator's full-S0 files (``qk.bin``, ``p.bin``,
  ``pv_tile_fifo{t}.bin``, ``exp_max_part{t}.bin``, ``global_max_part{t}.bin``,
  ``global_sum_part{t}.bin``, ``o_part{t}.bin``, ``o.bin``) when every block and
  tile is dumped, with leading ``[batch, heads]`` axes when there are several;
* ``manifest.json``: a list of ``{file, stage, block, tile, sub, dtype, shape,
  slot, event}`` with ``event = {core, unit, pipe, start_cycle, end_cycle}``.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.blocks import make_blocks
from tfa_sim.config import Config, parse_span
from tfa_sim.errors import InputError
from tfa_sim.outputs import write_json

#: Dump name → (stage that produces it, dtype, per-tile shape kind, golden file prefix) in data-flow order.
DUMPS = {
    "qk_fifo": ("compute_qk", np.float32, "tile", "qk"),
    "p_fifo": ("compute_p", np.float16, "tile", "p"),
    "exp_max": ("compute_p", np.float32, "rows", "exp_max_part"),
    "global_max": ("compute_p", np.float32, "rows", "global_max_part"),
    "global_sum": ("compute_p", np.float32, "rows", "global_sum_part"),
    "pv_fifo": ("compute_pv", np.float32, "head", "pv_tile_fifo"),
    "o_part": ("compute_gu", np.float32, "head", "o_part"),
}


def tile_shape(config: Config, kind: str) -> tuple[int, ...]:
    t = config.tiling
    return {"tile": (t.cube_s0, t.tile_s1), "rows": (t.cube_s0,), "head": (t.cube_s0, config.case.head)}[kind]


def selection(config: Config) -> list[tuple[int, list[int]]]:
    """(block, tiles) pairs the run will dump."""
    n = config.numerics
    b0, b1 = parse_span(n.dump_blocks, "numerics.dump_blocks") or (0, 1 << 30)
    t0, t1 = parse_span(n.dump_tiles, "numerics.dump_tiles") or (0, 1 << 30)
    return [(b.index, [t for t in range(b.tiles) if t0 <= t < t1]) for b in make_blocks(config) if b0 <= b.index < b1]


def full_dump(config: Config) -> bool:
    return not config.numerics.dump_blocks and not config.numerics.dump_tiles


def estimate_bytes(config: Config) -> int:
    """Bytes the dumps will take (npy and raw copies, plus the full-S0 files when everything is dumped)."""
    per_tile = sum(int(np.prod(tile_shape(config, kind))) * np.dtype(dtype).itemsize
                   for _stage, dtype, kind, _g in DUMPS.values())
    tiles = sum(len(ts) for _b, ts in selection(config))
    total = 2 * per_tile * tiles
    if full_dump(config):
        total += per_tile * sum(b.tiles for b in make_blocks(config))
    return total


def check_size(config: Config) -> int:
    size = estimate_bytes(config)
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
        self.wanted = {(b, t) for b, ts in selection(config) for t in ts}
        self.partial: dict[tuple[str, int, int], list[Any]] = {}
        self.done: list[Dump] = []

    def put(self, name: str, block: int, tile: int, row0: int, rows: np.ndarray, ins: Any,
            slot: int | None = None) -> None:
        """Rows ``row0…`` of ``name`` for (block, tile); the tile is complete once all rows are in."""
        if (block, tile) not in self.wanted:
            return
        key = (name, block, tile)
        _stage, dtype, kind, _g = DUMPS[name]
        entry = self.partial.get(key)
        if entry is None:
            entry = self.partial[key] = [np.empty(tile_shape(self.config, kind), dtype), 0]
        entry[0][row0:row0 + rows.shape[0]] = rows
        entry[1] += rows.shape[0]
        if entry[1] == entry[0].shape[0]:
            del self.partial[key]
            pipe = ins.pipe
            event = {"core": pipe.unit.split(".")[0], "unit": pipe.unit, "pipe": pipe.name,
                     "instruction": ins.kind, "start_cycle": ins.start, "end_cycle": ins.end}
            self.done.append(Dump(name, block, tile, entry[0], slot, event))


def write_dumps(run_dir: Path, recorder: DumpRecorder, config: Config) -> int:
    """Write the dumps and manifest; returns the bytes written."""
    out = run_dir / "dumps"
    tmp = run_dir / ".dumps.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    manifest = []
    written = 0
    for d in recorder.done:
        stage, dtype, _kind, _g = DUMPS[d.name]
        base = f"block{d.block}_{d.name}{d.tile}"
        np.save(tmp / f"{base}.npy", d.data, allow_pickle=False)
        d.data.tofile(tmp / f"{base}.bin")
        written += 2 * d.data.nbytes
        for ext in ("npy", "bin"):
            manifest.append({"file": f"{base}.{ext}", "name": d.name, "stage": stage, "block": d.block,
                             "tile": d.tile, "sub": None, "dtype": np.dtype(dtype).name, "shape": list(d.data.shape),
                             "slot": d.slot, "event": d.event})
    if full_dump(config):
        for entry in _reference_layout(tmp, recorder, config):
            manifest.append(entry)
            written += (tmp / entry["file"]).stat().st_size
    write_json(tmp / "manifest.json", manifest)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return written


def _reference_layout(tmp: Path, recorder: DumpRecorder, config: Config) -> list[dict[str, Any]]:
    """Assemble blocks into the reference generator's full-S0 files."""
    c, t = config.case, config.tiling
    lead = (c.batch, c.heads)
    blocks = {b.index: b for b in make_blocks(config)}
    tiles = config.tiles
    full = {"qk_fifo": np.zeros(lead + (c.s0, c.s1), np.float32), "p_fifo": np.zeros(lead + (c.s0, c.s1), np.float16)}
    per_tile = {name: [None] * tiles for name in ("exp_max", "global_max", "global_sum", "pv_fifo", "o_part")}
    shapes = {"exp_max": (c.s0,), "global_max": (c.s0,), "global_sum": (c.s0,), "pv_fifo": (c.s0, c.head),
              "o_part": (c.s0, c.head)}
    carried = {"exp_max": 1.0, "pv_fifo": 0.0}  # what a tile a causal block does not issue contributes
    by_key = {(d.name, d.block, d.tile): d.data for d in recorder.done}
    for tile in range(tiles):
        for name in per_tile:
            per_tile[name][tile] = np.zeros(lead + shapes[name], np.float32)
    for b in blocks.values():
        rows = slice(b.row0, b.row0 + t.cube_s0)
        idx = (b.batch, b.head)
        for tile in range(tiles):
            cols = slice(tile * t.tile_s1, (tile + 1) * t.tile_s1)
            src = tile if tile < b.tiles else b.tiles - 1
            for name in ("qk_fifo", "p_fifo"):
                if tile < b.tiles:
                    full[name][idx][rows, cols] = by_key[(name, b.index, tile)]
            for name in per_tile:
                value = by_key[(name, b.index, src)] if (tile < b.tiles or name not in carried) else carried[name]
                per_tile[name][tile][idx][rows] = value
    files = {"qk.bin": ("qk_fifo", None, full["qk_fifo"]), "p.bin": ("p_fifo", None, full["p_fifo"]),
             "o.bin": ("o_part", None, per_tile["o_part"][-1])}
    for name, prefix in (("exp_max", "exp_max_part"), ("global_max", "global_max_part"),
                         ("global_sum", "global_sum_part"), ("pv_fifo", "pv_tile_fifo"), ("o_part", "o_part")):
        for tile, arr in enumerate(per_tile[name]):
            files[f"{prefix}{tile}.bin"] = (name, tile, arr)
    entries = []
    for fname, (name, tile, arr) in files.items():
        arr = arr[0, 0] if lead == (1, 1) else arr
        arr.tofile(tmp / fname)
        entries.append({"file": fname, "name": name, "stage": DUMPS[name][0], "block": None, "tile": tile,
                        "sub": None, "dtype": arr.dtype.name, "shape": list(arr.shape), "slot": None,
                        "event": None})
    return entries
