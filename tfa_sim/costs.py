"""What an instruction group costs, in cycles, from the hardware preset.

* cube TMATMUL: ceil(M/16)·ceil(K/16)·ceil(N/16) + 6 per CubeK panel;
* on-chip moves (TEXTRACT L1→L0A/L0B): bytes / path rate;
* GM moves: bytes / path rate, shared chip bandwidth and latency (engine.gm);
* vector instruction: startup + completion + repeats·per_repeat·repeat_scale,
  one instruction per 255 repeats; compute_p and compute_gu are the op
  sequences listed in :func:`compute_p_ops` and :func:`compute_gu_ops`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tfa_sim.hardware import Hardware

FP32 = 4


@dataclass(frozen=True)
class VectorOp:
    kind: str  # unary | binary | reduce | exp
    elements: int  # fp32 elements processed


def compute_p_ops(rows: int, cols: int, first: bool, masked: bool) -> tuple[VectorOp, ...]:
    """compute_p on a rows×cols fp32 slice, in kernel order."""
    n = rows * cols
    ops = [VectorOp("binary", n)] if masked else []  # add −3.40282e38 above the diagonal
    ops.append(VectorOp("reduce", n))  # rowmax of raw scores
    if not first:  # m = max(rowmax, M_prev); l1_exp_max = exp((M_prev − m)·s)
        ops += [VectorOp("binary", rows), VectorOp("binary", rows), VectorOp("binary", rows), VectorOp("exp", rows)]
    ops += [VectorOp("binary", n), VectorOp("binary", n), VectorOp("exp", n),  # (x − m)·s, exp
            VectorOp("reduce", n)]  # rowsum of fp32 E
    if not first:  # L = l1_exp_max·L_prev + rowsum
        ops += [VectorOp("binary", rows), VectorOp("binary", rows)]
    ops.append(VectorOp("unary", n))  # x_exp = fp16(E)
    return tuple(ops)


def compute_gu_ops(rows: int, head: int, first: bool, last: bool) -> tuple[VectorOp, ...]:
    """compute_gu on rows×HEAD: copy on the first tile, else scale and add; divide after the last."""
    n = rows * head
    ops = [VectorOp("unary", n)] if first else [VectorOp("binary", n), VectorOp("binary", n)]
    if last:
        ops.append(VectorOp("binary", n))
    return tuple(ops)


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

    def compute_p(self, rows: int, cols: int, first: bool, masked: bool) -> float:
        """Cycles of compute_p's vector sequence on one row slice (memoised per shape)."""
        key = ("p", rows, cols, first, masked)
        if key not in self._cache:
            self._cache[key] = self.vector(compute_p_ops(rows, cols, first, masked))
        return self._cache[key]

    def compute_gu(self, rows: int, head: int, first: bool, last: bool) -> float:
        """Cycles of compute_gu's vector sequence (memoised per shape)."""
        key = ("gu", rows, head, first, last)
        if key not in self._cache:
            self._cache[key] = self.vector(compute_gu_ops(rows, head, first, last))
        return self._cache[key]

    def vector(self, ops: tuple[VectorOp, ...]) -> float:
        """Cycles of a sequence of vector instructions."""
        v = self.vec
        per_instr = {"unary": (v.startup_unary, v.completion, v.per_repeat_unary),
                     "binary": (v.startup_binary, v.completion, v.per_repeat_binary),
                     "reduce": (v.startup_binary, v.completion, v.per_repeat_binary),
                     "exp": (v.startup_unary, v.completion_exp, v.per_repeat_exp)}
        total = 0.0
        for op in ops:
            startup, completion, per_repeat = per_instr[op.kind]
            repeats = math.ceil(op.elements * FP32 / v.repeat_bytes)
            instrs = math.ceil(repeats / v.max_repeats)
            total += instrs * (startup + completion) + repeats * per_repeat * v.repeat_scale
        return total
