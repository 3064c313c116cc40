"""Which keys each query sees: no mask, causal, a causal sliding window, or a mask array.

A mask answers, for a block's rows (each a query position in S0, and for
arrays its batch and head) and a range of key columns, which pairs are
visible.  The kernel uses the answer three ways: a tile or cube sub-tile with
no visible pair is skipped (not loaded, not computed); a row slice whose tile
is partly visible gets the mask added before the softmax (``partial``); one
with nothing visible only zeroes its ``x_exp`` (``full``).  Positions are
0-based; a query at position i of S0 faces keys 0 … S1−1.

* :class:`Causal` — key j visible for query i when j ≤ i (top-left aligned);
* :class:`Window` — the causal local window of W keys: i − W < j ≤ i;
* :class:`MaskArray` — a boolean array (True = masked), [S0, S1] or with
  leading [batch, heads] axes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.spec.choices import MASKS
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import load_npy, read_bytes


@dataclass(frozen=True)
class Rows:
    """The rows of a block: query positions (and, for a mask array, batch and head of each)."""

    batch: int
    heads: np.ndarray  # int, one per row
    pos: np.ndarray  # int, one per row

    @property
    def first(self) -> int:
        return int(self.pos.min())

    @property
    def last(self) -> int:
        return int(self.pos.max())


class Mask:
    """No mask: every key visible.  Subclasses narrow :meth:`bounds` and :meth:`visible`."""

    kind = "none"

    def bounds(self, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the lowest and highest visible key column (inclusive) — or, for an arbitrary mask, the
        columns between which visible keys may lie."""
        return np.zeros(len(rows.pos), np.int64), np.full(len(rows.pos), np.iinfo(np.int64).max // 2)

    def visible(self, rows: Rows, col0: int, cols: int) -> np.ndarray:
        """Boolean rows × cols: True where query row sees key column col0 + j."""
        lo, hi = self.bounds(rows)
        j = col0 + np.arange(cols)[None, :]
        return (j >= lo[:, None]) & (j <= hi[:, None])

    def coverage(self, rows: Rows, col0: int, cols: int) -> str:
        """``none`` (nothing masked), ``partial`` or ``full`` (nothing visible) for these rows and columns."""
        lo, hi = self.bounds(rows)
        c1 = col0 + cols - 1
        if np.all(lo <= col0) and np.all(hi >= c1):
            return "none"
        if np.all((hi < col0) | (lo > c1)):
            return "full"
        return "partial"

    def empty_rows(self, rows: Rows, s1: int) -> np.ndarray:
        """Boolean per row: True where the row sees no key at all (refused before a run)."""
        lo, hi = self.bounds(rows)
        return (hi < 0) | (lo > s1 - 1) | (hi < lo)

    def tile_coverage(self, rows: Rows, col0s: np.ndarray, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """For column ranges [c, c + cols) of each c in ``col0s``: (any pair visible, every pair visible)."""
        if self.kind == "none":  # no rows × columns arrays for nothing (0.09 s of a 256-block launch)
            return np.ones(len(col0s), bool), np.ones(len(col0s), bool)
        lo, hi = self.bounds(rows)
        c0, c1 = col0s[None, :], col0s[None, :] + cols - 1
        seen_any = (np.maximum(lo[:, None], c0) <= np.minimum(hi[:, None], c1)).any(axis=0)
        seen_all = ((lo[:, None] <= c0) & (hi[:, None] >= c1)).all(axis=0)
        return np.asarray(seen_any), np.asarray(seen_all)


class Causal(Mask):
    kind = "causal"

    def bounds(self, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(rows.pos), np.int64), rows.pos.astype(np.int64)


@dataclass(frozen=True, eq=False)
class Window(Mask):
    """The causal local window of ``size`` keys ending at the query's own position."""

    size: int
    kind = "window"

    def bounds(self, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        pos = rows.pos.astype(np.int64)
        return pos - self.size + 1, pos


@dataclass(frozen=True, eq=False)
class MaskArray(Mask):
    """A user's boolean mask (True = masked) with leading [batch, heads] axes (1 where not given)."""

    masked: np.ndarray  # bool [batch, heads, S0, S1]
    kind = "array"

    def visible(self, rows: Rows, col0: int, cols: int) -> np.ndarray:
        heads = np.minimum(rows.heads, self.masked.shape[1] - 1)
        batch = min(rows.batch, self.masked.shape[0] - 1)
        return ~self.masked[batch, heads[:, None], rows.pos[:, None], col0 + np.arange(cols)[None, :]]

    def coverage(self, rows: Rows, col0: int, cols: int) -> str:
        seen = self.visible(rows, col0, cols)
        return "none" if seen.all() else "full" if not seen.any() else "partial"

    def empty_rows(self, rows: Rows, s1: int) -> np.ndarray:
        return np.asarray(~self.visible(rows, 0, s1).any(axis=1))

    def tile_coverage(self, rows: Rows, col0s: np.ndarray, cols: int) -> tuple[np.ndarray, np.ndarray]:
        seen = self.visible(rows, 0, int(col0s.max()) + cols)
        parts = [seen[:, c:c + cols] for c in col0s]
        return np.array([p.any() for p in parts]), np.array([p.all() for p in parts])


def load_mask(path: str | Path, batch: int, heads: int, s0: int, s1: int) -> MaskArray:
    """A ``.npy`` boolean mask (True = masked): S0×S1, or [batch, heads, S0, S1] where a leading axis may be 1
    (the same mask for every batch or head).  Anything else is an :class:`InputError` naming the fix."""
    where = f"mask file {path}"
    hint = f"give a .npy boolean array (np.save) of shape S0×S1 = {s0}×{s1}"
    a = load_npy(read_bytes(path, "mask file", hint), path, "mask file")
    if a.dtype != np.bool_:
        raise InputError(f"{where} has dtype {a.dtype}; it must be bool (True = masked): use mask.astype(bool)")
    full = a[None, None] if a.ndim == 2 else a
    ok = full.ndim == 4 and full.shape[2:] == (s0, s1) and full.shape[0] in (1, batch) and full.shape[1] in (1, heads)
    if not ok:
        raise InputError(f"{where} has shape {a.shape}; expected S0×S1 = ({s0}, {s1}) or [batch, heads, S0, S1] "
                         f"with batch 1 or {batch} and heads 1 or {heads}")
    return MaskArray(np.ascontiguousarray(full))


# ---- kernel.masks: whether the build compiles the mask path ---------------------------------------------------
@dataclass(frozen=True)
class MaskPath:
    """What a ``kernel.masks`` value does: whether the build compiles the causal mask path (``CAUSAL_MASK``)."""

    compiled: bool


def _no_masked_case(config: Any) -> str | None:
    c, k = config.case, config.kernel
    return None if not (c.causal or c.mask) else (
        f"kernel.masks = false (kernel.build = {k.build} compiles no mask path; the PTO-DSL port builds "
        f"CAUSAL_MASK=False only): drop case.causal/case.mask, or set kernel.masks = true")


MASKS.add(True, MaskPath(True), "`CAUSAL_MASK` compiled in: causal, window and mask-file cases run",
          "manual fa_performance_kernel.cpp", (), __name__)
MASKS.add(False, MaskPath(False), "no mask path: only unmasked cases run", "PTO-DSL run.py (`CAUSAL_MASK=False`)",
          (_no_masked_case,), __name__)
