"""Goldens: a float64 reference attention and the reference generator's kernel-ordered golden.

The kernel-ordered golden follows the recurrence of docs/kernel.md the way
the reference data generator computes it (float64 scale and exp rounded to
fp32, BLAS fp32 matmuls, fp16 P), so it is close to — not bit-equal with —
tfa-sim's model.  Both are computed per (batch, head) and in row or column
blocks, so their memory grows with one block of scores, not with S0·S1.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from tfa_sim.numerics.blas import blas_threads
from tfa_sim.numerics.inputs import Inputs
from tfa_sim.numerics.intermediates import BY_NAME, empty_full, row_slice, write_golden
from tfa_sim.numerics.rounding import MASK_VALUE, input_dtype
from tfa_sim.spec.blocks import config_mask
from tfa_sim.spec.config import Config
from tfa_sim.spec.masks import Mask, Rows

F32 = np.float32
U32 = np.uint32
#: The bits of 2^-14, fp16's smallest normal value, in fp32.
SMALLEST_NORMAL = U32(113 << 23)
#: Score elements (float64) the reference attention holds at once: 8 MiB, one buffer for every row block.
REFERENCE_CHUNK = 1 << 20
#: Query rows of a head the kernel-ordered golden takes at once: its memory is O(rows · TILE_S1), not O(S0).
#: Above this many rows BLAS may round a chunk's products differently from the generator's whole-S0 call (its
#: blocking follows the row count), as it does from one machine's BLAS to another's: the golden is compared
#: under the kernel's rule, never bit for bit.
GOLDEN_ROWS = 8192


def _hidden(mask: Mask, b: int, h: int, r0: int, rows: int, col0: int, cols: int) -> np.ndarray | None:
    """Boolean rows×cols, True where the mask hides key col0+j from query r0+i of (batch b, head h)."""
    if mask.kind == "none":
        return None
    pos = np.arange(r0, r0 + rows, dtype=np.int64)
    return ~mask.visible(Rows(b, np.full(rows, h, np.int64), pos), col0, cols)


def _capped(s: np.ndarray, softcap: float) -> np.ndarray:
    """Scaled float64 scores through the logit softcap c·tanh(s/c) (unchanged when c = 0)."""
    return softcap * np.tanh(s / softcap) if softcap else s


def _heads(config: Config):
    """(batch, head, kv head) of every query head."""
    c = config.case
    group = c.heads // c.kv_heads
    return [(b, h, h // group) for b in range(c.batch) for h in range(c.heads)]


#: One unit of golden work: (batch, head, kv head, first row, end row) of the query rows, a block of them.
Unit = tuple[int, int, int, int, int]


def reference_rows(config: Config) -> int:
    """Query rows per unit of the float64 reference: :data:`REFERENCE_CHUNK` scores."""
    return max(1, min(config.case.s0, REFERENCE_CHUNK // config.case.s1))


def units(config: Config, rows: int) -> list[Unit]:
    """The run's query rows in blocks of ``rows`` (the last of a head may be short), head after head."""
    s0 = config.case.s0
    return [(b, h, kv, r0, min(r0 + rows, s0)) for b, h, kv in _heads(config) for r0 in range(0, s0, rows)]


class Reference:
    """The float64 reference attention, softmax(cap(Q·Kᵀ/sqrt(HEAD)) + mask)·V, a unit of rows at a time into
    ``out`` [batch, heads, S0, HEAD] float64, normalised after the product with V (S0·HEAD divisions instead of
    S0·S1).  It keeps the float64 K and V of the last KV head and one block of scores for every unit: fresh
    memory costs a page fault per 4 KiB on first touch (at S0 = 512, S1 = 8192 a fresh 32 MiB block made a new
    process's first reference 0.15 s, an 8 MiB block reused 0.07–0.10 s, against 0.06 s once warm)."""

    def __init__(self, inputs: Inputs, config: Config, mask: Mask, out: np.ndarray) -> None:
        self.inputs, self.config, self.mask, self.out = inputs, config, mask, out
        self._kv: tuple[int, int] | None = None
        self._kt = self._v = self._scores = np.empty(0)

    def _head(self, b: int, kv: int) -> None:
        if self._kv != (b, kv):
            self._kt = self.inputs.k[b, kv].astype(np.float64).T
            self._v = self.inputs.v[b, kv].astype(np.float64)
            self._kv = (b, kv)

    def __call__(self, unit: Unit) -> None:
        b, h, kv, r0, r1 = unit
        c = self.config.case
        self._head(b, kv)
        if self._scores.shape[0] < r1 - r0:
            self._scores = np.empty((r1 - r0, c.s1), np.float64)
        q = self.inputs.q[b, h, r0:r1].astype(np.float64)
        q *= 1 / np.sqrt(np.float64(c.head))  # scaled before the product: S0·HEAD products instead of S0·S1
        s = np.matmul(q, self._kt, out=self._scores[:r1 - r0])
        if c.softcap:
            s[...] = _capped(s, c.softcap)
        hidden = _hidden(self.mask, b, h, r0, r1 - r0, 0, c.s1)
        if hidden is not None:
            s[hidden] = -np.inf
        s -= s.max(axis=-1, keepdims=True)
        e = np.exp(s, out=s)  # in place, no pass more than needed
        o = e @ self._v
        o /= e.sum(axis=-1, keepdims=True)
        self.out[b, h, r0:r1] = o  # one store of the final values: another process may write the same unit


def reference_attention(inputs: Inputs, config: Config) -> np.ndarray:
    """The float64 reference attention (:class:`Reference`) of the whole run, [batch, heads, S0, HEAD]."""
    c = config.case
    out = np.empty((c.batch, c.heads, c.s0, c.head), np.float64)
    reference = Reference(inputs, config, config_mask(config), out)
    with blas_threads(config.numerics.blas_threads):
        for unit in units(config, reference_rows(config)):
            reference(unit)
    return out


class KernelGolden:
    """The generator's recurrence over tiles: ``o`` always; every intermediate (full layout, by dump name)
    plus ``p_fp32`` only when recorded (``tfa-sim gen-data``, ``tfa-sim check --golden``)."""

    def __init__(self, o: np.ndarray, tensors: dict[str, np.ndarray] | None, p_fp32: np.ndarray | None) -> None:
        self.o, self.tensors, self.p_fp32 = o, tensors, p_fp32

    def write(self, directory: Path, config: Config) -> None:
        """Raw little-endian files named as the reference generator names them."""
        assert self.tensors is not None and self.p_fp32 is not None, "record=True is needed to write the files"
        write_golden(self.tensors, directory, config)
        pv = self.tensors["pv_fifo"].sum(axis=2, dtype=F32)
        lead1 = self.o.shape[:2] == (1, 1)
        for name, a in (("p_fp32", self.p_fp32), ("pv", pv), ("o", self.o)):
            np.ascontiguousarray(a[0, 0] if lead1 else a).tofile(directory / f"{name}.bin")

    def compute(self, inputs: Inputs, config: Config, mask: Mask, unit: Unit) -> None:
        """The recurrence for one unit of rows (``mask``: the run's, :func:`tfa_sim.spec.blocks.config_mask`)."""
        b, h, kv, r0, r1 = unit
        rows = slice(r0, r1)
        tensors, p_fp32 = self.tensors, self.p_fp32
        self.o[b, h, rows] = _golden_head(
            inputs.q[b, h, rows], inputs.k[b, kv], inputs.v[b, kv], config,
            partial(_hidden, mask, b, h, r0, r1 - r0),
            None if tensors is None else {n: row_slice(BY_NAME[n], a[b, h], rows) for n, a in tensors.items()},
            None if p_fp32 is None else p_fp32[b, h, rows])

    @classmethod
    def empty(cls, config: Config, record: bool = False) -> KernelGolden:
        """Nothing computed yet: ``o`` [batch, heads, S0, HEAD] fp32, and with ``record`` every intermediate in the
        full layout."""
        c = config.case
        o = np.empty((c.batch, c.heads, c.s0, c.head), F32)
        tensors = {name: empty_full(item, config) for name, item in BY_NAME.items()} if record else None
        return cls(o, tensors, np.zeros((c.batch, c.heads, c.s0, c.s1), F32) if record else None)


def kernel_golden(inputs: Inputs, config: Config, record: bool = False) -> KernelGolden:
    """Tile-wise recurrence over all S1/TILE_S1 tiles, as the generator does, for up to :data:`GOLDEN_ROWS` query
    rows of a head at once (the generator takes a head's whole S0: the same bits up to that many rows)."""
    golden, mask = KernelGolden.empty(config, record), config_mask(config)
    with blas_threads(config.numerics.blas_threads):
        for unit in units(config, GOLDEN_ROWS):
            golden.compute(inputs, config, mask, unit)
    return golden


def _golden_head(q16: np.ndarray, k16: np.ndarray, v16: np.ndarray, config: Config,
                 hidden: Callable[[int, int], np.ndarray | None],
                 rec: dict[str, np.ndarray] | None, p_fp32: np.ndarray | None) -> np.ndarray:
    """One head's recurrence; ``hidden(col0, cols)``: the mask of its rows over those columns.  With softcap
    the scores are capped in float64 (scale included) and the exponents take no further scale."""
    c, tile = config.case, config.tiling.tile_s1
    scale = 1.0 if c.softcap else 1 / np.sqrt(c.head)  # float64: (x − max)·scale and exp run in float64
    q32 = q16.astype(F32)
    m = l = o = None
    for t in range(c.s1 // tile):
        cols = slice(t * tile, (t + 1) * tile)
        x = q32 @ k16[cols].astype(F32).T
        qk = x
        if c.softcap:
            x = _capped(x / np.sqrt(c.head), c.softcap).astype(F32)
        masked = hidden(t * tile, tile)
        if masked is not None:
            x = np.where(masked, x + MASK_VALUE, x)
        tile_max = x.max(axis=-1)
        if m is None:
            m_new, em = tile_max, np.ones_like(tile_max)
        else:
            m_new = np.maximum(tile_max, m)
            em = np.exp((m - m_new) * scale).astype(F32)
        e = np.exp((x - m_new[:, None]) * scale).astype(F32)
        tile_sum = e.sum(axis=-1, dtype=F32)
        l = tile_sum if l is None else em * l + tile_sum
        m = m_new
        # P in the input dtype, held as its fp32 values (exact), which is what the PV product takes
        p = fp16_values(e) if c.dtype == "fp16" else e.astype(input_dtype(c.dtype)).astype(F32)
        pv = p @ v16[cols].astype(F32)
        o = pv if o is None else em[:, None] * o + pv
        if rec is not None and p_fp32 is not None:
            rec["qk_fifo"][:, cols], rec["p_fifo"][:, cols], p_fp32[:, cols] = qk, p, e
            rec["exp_max"][t], rec["global_max"][t], rec["global_sum"][t], rec["pv_fifo"][t] = em, m, l, pv
            rec["o_part"][t] = o
    assert o is not None and l is not None
    o_final = (o / l[:, None]).astype(F32)
    if rec is not None:
        rec["o_part"][-1] = o_final
    return o_final


def fp16_values(x: np.ndarray) -> np.ndarray:
    """fp32 → fp16 → fp32, rounding to nearest even: bit-equal to ``x.astype(np.float16).astype(np.float32)``
    (tests/test_golden.py checks every rounding boundary), computed on fp32's bits.  numpy's two casts take a
    slow path for every value below fp16's normal range (a microcode assist per subnormal on x86), where most
    of a peaked P lies: on a 512 × 512 tile they take 8 ns an element on normal values, 54 ns on the
    generator's P and 98 ns on a peaked one; this takes about 5 ns on any data.  The normal and the subnormal
    result are combined by arithmetic, not by a select, whose branch on a random mask costs more."""
    b = np.ascontiguousarray(x, dtype=F32).view(U32)
    a = b & U32(0x7FFFFFFF)
    # |x| ≥ 2^-14: keep 10 mantissa bits, rounding half to even by the carry into them; smaller magnitudes
    # are raised to 2^-14 first
    out = np.maximum(a, SMALLEST_NORMAL)
    odd = out >> U32(13)
    odd &= U32(1)
    out += U32(0xFFF)
    out += odd
    out &= U32(0xFFFFE000)
    # |x| < 2^-14: adding 0.5 in fp32, whose ulp there is 2^-24, rounds |x| to a multiple of 2^-24 (fp16's
    # subnormal step), half to even, and subtracting it again is exact; larger magnitudes give 2^-14
    with np.errstate(invalid="ignore"):  # a signalling NaN raises the flag; NaN takes its own branch below
        tiny = np.minimum(a.view(F32), F32(2.0 ** -14))
        tiny += F32(0.5)
        tiny -= F32(0.5)
    # out is 2^-14 wherever |x| < 2^-14 and tiny is 2^-14 elsewhere: out + tiny − 2^-14 (on the bits, which
    # wrap) is tiny there and out elsewhere
    out += tiny.view(U32)
    out -= SMALLEST_NORMAL
    over = out > U32(0x477FE000)  # rounded past 65504, fp16's largest finite value: inf
    if over.any():
        out[over] = U32(0x7F800000)
    nan = a > U32(0x7F800000)  # NaN keeps the top 10 bits of its payload, and at least one bit, as numpy's casts do
    if nan.any():
        out[nan] = U32(0x7F800000) | (np.maximum((a[nan] & U32(0x7FFFFF)) >> U32(13), U32(1)) << U32(13))
    out |= b & U32(0x80000000)
    return out.view(F32)
