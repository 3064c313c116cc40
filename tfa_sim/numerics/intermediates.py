"""The kernel's intermediate tensors: one registry that every table of them derives from.

Each :class:`Intermediate` names a tensor three ways — the kernel's own name,
the name tfa-sim dumps it under (``block{b}_{name}{t}.npy``) and the reference
data generator's golden file (``{golden}.bin`` for the full S0×S1 score
tensors, ``{golden}{t}.bin`` per logical tile for the others) — and says which
stage produces it, its dtype, its layout, its comparison eps and what a tile
that a causal block does not issue contributes.

The *full layout* of an intermediate over a run has leading ``[batch, heads]``
axes and is ``[S0, S1]`` for scores, ``[T, S0]`` for row vectors and
``[T, S0, HEAD]`` for head-wide tiles (T = S1/TILE_S1) and ``[S0, HEAD]`` for the
combine's output (split-S1 runs only; its dumps are filed under the last tile its
chunks issue, after the running O in data-flow order).  The functional model,
the kernel-ordered golden and assembled dumps all use it; the generator's
file names and shapes are derived from it here, in one place.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.numerics.compare import EPS, EPS_EXP_MAX
from tfa_sim.numerics.rounding import input_dtype
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError

#: The dtype of x_exp (P): the input dtype, as the PV matmul takes it.
INPUT = "input"


@dataclass(frozen=True)
class Intermediate:
    name: str  # tfa-sim's dump name
    kernel: str  # the kernel's name
    golden: str  # the reference generator's file name (prefix for per-tile files)
    stage: str
    dtype: Any  # numpy dtype, or INPUT: the run's Q/K/V dtype (fp16 or bf16; case.dtype)
    layout: str  # "scores" (S0×S1), "rows" (per tile, S0), "head" (per tile, S0×HEAD), "out" (S0×HEAD)
    eps: float  # the comparison rule's eps for this tensor
    skipped: float | None  # value of a tile a causal block does not issue (None: the last issued tile's)
    aliases: tuple[str, ...] = ()

    def dtype_for(self, config: Config) -> np.dtype:
        """The tensor's dtype in a run of ``config``."""
        return input_dtype(config.case.dtype) if self.dtype == INPUT else np.dtype(self.dtype)

    @property
    def per_tile(self) -> bool:
        return self.layout in ("rows", "head")


#: In data-flow order within a tile (the order ``tfa-sim check`` looks for the first divergence).
INTERMEDIATES = (
    Intermediate("qk_fifo", "qk_tile_fifo", "qk", "compute_qk", np.float32, "scores", EPS, 0.0, ("qk",)),
    Intermediate("p_fifo", "x_exp", "p", "compute_p", INPUT, "scores", EPS, 0.0, ("x_exp", "p")),
    Intermediate("exp_max", "l1_exp_max", "exp_max_part", "compute_p", np.float32, "rows", EPS_EXP_MAX, 1.0,
                 ("l1_exp_max",)),
    Intermediate("global_max", "m2_global_max", "global_max_part", "compute_p", np.float32, "rows", EPS, None,
                 ("m2_global_max",)),
    Intermediate("global_sum", "l2_global_sum", "global_sum_part", "compute_p", np.float32, "rows", EPS, None,
                 ("l2_global_sum",)),
    Intermediate("pv_fifo", "pv_tile_fifo", "pv_tile_fifo", "compute_pv", np.float32, "head", EPS, 0.0, ("pv",)),
    Intermediate("o_part", "runningOTile", "o_part", "compute_gu", np.float32, "head", EPS, None,
                 ("o", "running_o")),
    Intermediate("combine_o", "combine O", "o", "combine", np.float32, "out", EPS, None),
)
#: Produced only by split-S1 runs (the combine launch).
SPLIT_ONLY = ("combine_o",)
BY_NAME = {i.name: i for i in INTERMEDIATES}
NAMES = tuple(BY_NAME)


def select(words: list[str] | None) -> set[str]:
    """Dump names for ``--stage`` words: a stage, a dump name, a kernel name or an alias (None: all)."""
    if not words:
        return set(NAMES)
    out: set[str] = set()
    for word in words:
        hit = {i.name for i in INTERMEDIATES if word in (i.name, i.kernel, i.stage, *i.aliases)}
        if not hit:
            raise InputError(f"--stage {word!r}: use a stage (compute_qk, compute_p, compute_pv, compute_gu, "
                             f"combine) or an intermediate ({', '.join(NAMES)})")
        out |= hit
    return out


def block_shape(item: Intermediate, config: Config, rows: int | None = None) -> tuple[int, ...]:
    """Shape of one block's tile of ``item`` (what one dump file holds), for a block of ``rows`` rows."""
    t = config.tiling
    n = t.cube_s0 if rows is None else rows
    return {"scores": (n, t.tile_s1), "rows": (n,), "head": (n, config.case.head), "out": (n, config.case.head)}[
        item.layout]


def full_shape(item: Intermediate, config: Config) -> tuple[int, ...]:
    """Shape of ``item`` over the whole run in the full layout (module docstring)."""
    c = config.case
    lead = (c.batch, c.heads)
    per = {"scores": (c.s0, c.s1), "rows": (config.tiles, c.s0), "head": (config.tiles, c.s0, c.head),
           "out": (c.s0, c.head)}
    return lead + per[item.layout]


def empty_full(item: Intermediate, config: Config) -> np.ndarray:
    """A full-layout array holding the value of never-issued tiles (0, or 1 for l1_exp_max)."""
    return np.full(full_shape(item, config), item.skipped or 0.0, item.dtype_for(config))


def row_slice(item: Intermediate, head: np.ndarray, rows: slice) -> np.ndarray:
    """The query rows ``rows`` of one (batch, head)'s full-layout array of ``item`` (a view)."""
    return head[rows] if item.layout in ("scores", "out") else head[:, rows]


def block_index(item: Intermediate, block: Any, t: int, config: Config) -> tuple[Any, ...]:
    """Where the tile of ``block`` at global logical tile ``t`` sits in a full-layout array: an index for
    ``full[index]`` (read) and ``full[index] = tile`` (write), rows × (columns)."""
    rows, s1 = block.rows, config.tiling.tile_s1
    if item.layout == "scores":
        cols = np.arange(t * s1, (t + 1) * s1)
        return rows.batch, rows.heads[:, None], rows.pos[:, None], cols[None, :]
    if item.layout == "out":
        return rows.batch, rows.heads, rows.pos
    return rows.batch, rows.heads, t, rows.pos


def golden_files(item: Intermediate, config: Config) -> list[tuple[str, int | None]]:
    """(file name, tile or None) of ``item`` in the reference generator's layout."""
    if item.per_tile:
        return [(f"{item.golden}{t}.bin", t) for t in range(config.tiles)]
    return [(f"{item.golden}.bin", None)]


def golden_array(item: Intermediate, full: np.ndarray, tile: int | None) -> np.ndarray:
    """What the generator's file holds: one tile of a per-tile tensor, the leading [batch, heads] dropped
    when both are 1."""
    a = full if tile is None else full[:, :, tile]
    return a[0, 0] if a.shape[:2] == (1, 1) else a


def write_golden(tensors: dict[str, np.ndarray], directory: Path, config: Config) -> list[dict[str, Any]]:
    """Write full-layout tensors as the generator's raw files; returns one manifest entry per file."""
    entries = []
    for name, full in tensors.items():
        item = BY_NAME[name]
        for fname, tile in golden_files(item, config):
            a = np.ascontiguousarray(golden_array(item, full, tile))
            a.tofile(directory / fname)
            entries.append({"file": fname, "name": name, "stage": item.stage, "block": None, "tile": tile,
                            "sub": None, "dtype": a.dtype.name, "shape": list(a.shape), "slot": None,
                            "event": None})
    return entries


def read_golden(item: Intermediate, directory: Path, fname: str, config: Config) -> np.ndarray | str:
    """One generator file of ``item`` in the full layout's shape for one tile, or a message saying what is
    wrong with it (missing, wrong size)."""
    c = config.case
    lead = (c.batch, c.heads) if (c.batch, c.heads) != (1, 1) else ()
    per = {"scores": (c.s0, c.s1), "rows": (c.s0,), "head": (c.s0, c.head), "out": (c.s0, c.head)}[item.layout]
    shape = lead + per
    path = directory / fname
    dtype = item.dtype_for(config)
    want = int(np.prod(shape)) * dtype.itemsize
    if not path.is_file():
        return f"golden file {fname} missing"
    if path.stat().st_size != want:
        return (f"golden {fname} has {path.stat().st_size} bytes, expected {want} "
                f"({dtype.name} {shape}): shape or dtype mismatch")
    a = np.fromfile(path, dtype=dtype).reshape(shape)
    return a if lead else a.reshape((1, 1) + shape)
