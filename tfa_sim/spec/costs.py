"""What an instruction group costs, in cycles, from the hardware preset.

* cube TMATMUL: ceil(M/16)·ceil(K/16)·ceil(N/16) + 6 per CubeK panel;
* on-chip moves (TEXTRACT L1→L0A/L0B): bytes / path rate;
* GM moves: bytes / path rate through the chip's L2 and HBM (engine.gm);
* vector work: the kernel's op sequence (:func:`compute_p_ops`,
  :func:`compute_gu_ops`) in groups separated by ``pipe_barrier(PIPE_V)``.
  Inside a group instructions issue back to back, each paying its startup and
  ``repeats·per_repeat·repeat_scale``; a group ends when its last instruction
  completes (its completion latency); one instruction covers at most 255
  repeats of 256 bytes (docs/timing.md, "Costs").
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tfa_sim.spec.hardware import Hardware

FP32 = 4
FP16 = 2


@dataclass(frozen=True)
class VectorOp:
    """One vector instruction of the kernel: its cost class and the elements it passes over."""

    name: str  # the kernel's instruction (TROWMAX, TEXP, …)
    kind: str  # unary | binary | reduce | exp (which startup, per-repeat and completion figures apply)
    elements: int
    itemsize: int = FP32


#: Ops between two pipe_barrier(PIPE_V): they stream; the group waits for its last one to complete.
Group = tuple[VectorOp, ...]


def _mask_prefix(n: int) -> tuple[Group, ...]:
    """A partly masked tile: TTRI | TMULS by −3.40282e38 | TADD to the scores, each behind a barrier."""
    return ((VectorOp("TTRI", "unary", n),), (VectorOp("TMULS", "unary", n),), (VectorOp("TADD", "binary", n),))


def _softcap_prefix(n: int) -> tuple[Group, ...]:
    """Logit softcap on n scores, as tfa-sim's tanh model computes it (docs/numerics.md, "The tanh model";
    the reference kernel has no softcap, so the op list is tfa-sim's): u = x·s, v = u/c, both tanh
    branches (Horner polynomial; exp, add, divide, subtract), the selects and the sign, y = w·c."""
    def op(name: str, kind: str = "unary") -> VectorOp:
        return VectorOp(name, kind, n)

    horner = tuple(o for _ in range(4) for o in (op("TMUL", "binary"), op("TADDS")))
    return ((op("TMULS"),), (op("TDIVS", "exp"),), (op("TABS"), op("TMUL", "binary")),
            horner + (op("TMUL", "binary"), op("TMUL", "binary"), op("TADD", "binary")),
            (op("TADD", "binary"), op("TEXP", "exp"), op("TADDS"), op("TDIV", "exp"), op("TSUBS")),
            (op("TCMPS"), op("TSEL", "binary"), op("TCMPS"), op("TSEL", "binary"), op("TOR", "binary")),
            (op("TMULS"),))


def compute_p_ops(rows: int, cols: int, first: bool, mask: str, softcap: bool = False) -> tuple[Group, ...]:
    """compute_p on a rows×cols fp32 slice (``pto_macro_fa_softmax``); ``mask``: how the mask covers the
    slice, none | partial | full (:meth:`tfa_sim.spec.blocks.Block.coverage`); ``softcap``: the scores are capped
    first, and the exponents then take no scale (the TMULS beside the TEXP drop out)."""
    n = rows * cols
    if mask == "full":  # nothing visible: x_exp = 0, exp_max = 1, the running state unchanged
        return ((VectorOp("TMULS", "unary", n, FP16), VectorOp("TMULS", "unary", rows)),
                (VectorOp("TADDS", "unary", rows),))
    prefix = (_softcap_prefix(n) if softcap else ()) + (_mask_prefix(n) if mask == "partial" else ())
    if softcap:
        body = compute_p_ops(rows, cols, first, "none")
        unscaled = (tuple(o for o in g if o.name != "TMULS") if any(o.name == "TEXP" for o in g) else g for g in body)
        return prefix + tuple(unscaled)
    if first:
        return (*prefix, (VectorOp("TROWMAX", "reduce", n),),
                (VectorOp("TROWEXPANDSUB", "binary", n), VectorOp("TMULS", "unary", n), VectorOp("TEXP", "exp", n)),
                (VectorOp("TROWSUM", "reduce", n), VectorOp("TCVT", "unary", n)))
    return (*prefix, (VectorOp("TROWMAX", "reduce", n),), (VectorOp("TMAX", "binary", rows),),
            (VectorOp("TSUB", "binary", rows),), (VectorOp("TMULS", "unary", rows),),  # copy of the new max
            (VectorOp("TROWEXPANDSUB", "binary", n), VectorOp("TMULS", "unary", rows), VectorOp("TMULS", "unary", n),
             VectorOp("TEXP", "exp", rows), VectorOp("TEXP", "exp", n), VectorOp("TCVT", "unary", n)),
            (VectorOp("TMUL", "binary", rows), VectorOp("TROWSUM", "reduce", n)),
            (VectorOp("TADD", "binary", rows),))


def compute_gu_ops(rows: int, head: int, first: bool, last: bool) -> tuple[Group, ...]:
    """compute_gu on rows×HEAD (``pto_macro_fa_gu``): tile 0 is loaded straight into running_o (no vector
    work); later tiles rescale and add; the last divides by the running sum."""
    n = rows * head
    ops: tuple[VectorOp, ...] = () if first else (VectorOp("TROWEXPANDMUL", "binary", n),
                                                  VectorOp("TADD", "binary", n))
    if last:
        ops += (VectorOp("TROWEXPANDDIV", "binary", n),)
    return (ops,) if ops else ()


def combine_factor_ops(rows: int, chunks: int) -> tuple[Group, ...]:
    """The combine's per-row work before the O loads: M = max over the chunks' maxima; per chunk
    f = exp((m − M)·s); L = Σ f·l."""
    def op(name: str, kind: str) -> VectorOp:
        return VectorOp(name, kind, rows)

    return ((op("TMAX", "binary"),) * max(1, chunks - 1),
            (op("TSUB", "binary"), op("TMULS", "unary"), op("TEXP", "exp")) * chunks,
            (op("TMUL", "binary"), op("TADD", "binary")) * chunks)


class Costs:
    """Cycle costs for one hardware preset."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self.cube = hw.cube
        self.vec = hw.vector
        self.move = hw.move
        self._cache: dict[tuple, float] = {}

    def matmul(self, m: int, n: int, k: int, cube_k: int) -> float:
        """TMATMUL cycles of an M×K·K×N product split into K-panels of ``cube_k``."""
        f = self.cube.fractal
        panels = math.ceil(k / cube_k)
        per_panel = math.ceil(m / f) * math.ceil(cube_k / f) * math.ceil(n / f) + self.cube.matmul_overhead
        return panels * per_panel

    def extract(self, nbytes_l0a: int, nbytes_l0b: int) -> float:
        """TEXTRACT L1→L0A and L1→L0B of one sub-tile's panels (one MTE1 group)."""
        return nbytes_l0a / self.move.l1_to_l0a + nbytes_l0b / self.move.l1_to_l0b

    def compute_p(self, rows: int, cols: int, first: bool, mask: str, softcap: bool = False) -> float:
        """Cycles of compute_p's vector sequence on one row slice (memoised per shape)."""
        return self._memo(("p", rows, cols, first, mask, softcap),
                          lambda: compute_p_ops(rows, cols, first, mask, softcap))

    def compute_gu(self, rows: int, head: int, first: bool, last: bool) -> float:
        """Cycles of compute_gu's vector sequence (memoised per shape)."""
        return self._memo(("gu", rows, head, first, last), lambda: compute_gu_ops(rows, head, first, last))

    def combine_factors(self, rows: int, chunks: int) -> float:
        """Cycles of the combine's max, factors and sum over ``chunks`` (:func:`combine_factor_ops`)."""
        return self._memo(("cf", rows, chunks), lambda: combine_factor_ops(rows, chunks))

    def combine_accumulate(self, rows: int, head: int) -> float:
        """Cycles of acc += f ⊙row O for one chunk."""
        n = rows * head
        return self._memo(("ca", n), lambda: ((VectorOp("TROWEXPANDMUL", "binary", n), VectorOp("TADD", "binary", n)),))

    def combine_normalise(self, rows: int, head: int) -> float:
        """Cycles of O = acc ⊘row L."""
        n = rows * head
        return self._memo(("cn", n), lambda: ((VectorOp("TROWEXPANDDIV", "binary", n),),))

    def _memo(self, key: tuple, ops: Callable[[], tuple[Group, ...]]) -> float:
        if key not in self._cache:
            self._cache[key] = self.vector(ops())
        return self._cache[key]

    def vector(self, groups: tuple[Group, ...]) -> float:
        """Cycles of barrier-separated groups of vector instructions (module docstring)."""
        v = self.vec
        per_kind = {"unary": (v.startup_unary, v.completion, v.per_repeat_unary),
                    "binary": (v.startup_binary, v.completion, v.per_repeat_binary),
                    "reduce": (v.startup_binary, v.completion, v.per_repeat_binary),
                    "exp": (v.startup_unary, v.completion_exp, v.per_repeat_exp)}
        total = 0.0
        for group in groups:
            for op in group:
                startup, _completion, per_repeat = per_kind[op.kind]
                repeats = math.ceil(op.elements * op.itemsize / v.repeat_bytes)
                total += math.ceil(repeats / v.max_repeats) * startup + repeats * per_repeat * v.repeat_scale
            total += per_kind[group[-1].kind][1]
        return total
