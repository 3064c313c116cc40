"""What an instruction group costs, in cycles, from the hardware preset: the cost rule of each instruction class
(the listings say which instructions a stage issues: :mod:`tfa_sim.listings`).

* cube TMATMUL: ceil(M/16)·ceil(K/16)·ceil(N/16) + 6 per CubeK panel;
* on-chip moves (TEXTRACT L1→L0A/L0B): bytes / path rate;
* GM moves: bytes / path rate through the chip's L2 and HBM (engine.gm);
* vector work: a listing's vector instructions in groups separated by ``pipe_barrier(PIPE_V)``, each instruction
  as the passes of the intrinsics it is built from (:class:`VectorOp`), each intrinsic class with the startup,
  per-repeat and completion cycles the PTO-ISA library's instruction cost model measured (docs/timing.md, "Vector
  instructions").  A group streams: its first pass pays startup and completion, the others only their repeats
  (256 bytes each).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from tfa_sim.spec.hardware import Hardware, VectorParams

FP32 = 4
FP16 = 2


@dataclass(frozen=True)
class VectorOp:
    """One vector instruction of the kernel on a rows×cols tile.

    ``kind`` is the intrinsic class its element passes run on (binary | div | scalar | exp | convert: which
    startup, per-repeat and completion figures apply); ``form`` how the instruction is built from them:
    ``map`` one pass over the tile, ``reduce`` a row reduction (group reductions of 8 values at a time until
    one per row, a barrier between stages), ``expand`` a row broadcast (one ``vbrcb`` of the row values, a
    barrier, then one pass per 64 columns)."""

    name: str  # the kernel's instruction (TROWMAX, TEXP, …)
    kind: str
    rows: int
    cols: int
    itemsize: int = FP32
    form: str = "map"


#: Ops between two pipe_barrier(PIPE_V): they stream; the group waits for its last one to complete.
Group = tuple[VectorOp, ...]


class Costs:
    """Cycle costs for one hardware preset (memoising the vector groups a run prices, by their instructions)."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self.cube = hw.cube
        self.vec = hw.vector
        self.move = hw.move
        self._figures = self._intrinsics(hw.vector)
        self._cache: dict[tuple[Group, ...], float] = {}

    def matmul(self, m: int, n: int, k: int, cube_k: int) -> float:
        """TMATMUL cycles of an M×K·K×N product split into K-panels of ``cube_k``."""
        f = self.cube.fractal
        panels = math.ceil(k / cube_k)
        per_panel = math.ceil(m / f) * math.ceil(cube_k / f) * math.ceil(n / f) + self.cube.matmul_overhead
        return panels * per_panel

    def matmul_first_unit(self, m: int, n: int, k: int, cube_k: int) -> float:
        """Cycles from a TMATMUL's start until its final K panel has finished one L0C fractal (when a unit flag
        first sets): the earlier panels, the final panel's overhead and one fractal's ``cube_k / 16`` steps."""
        f = self.cube.fractal
        per_panel = math.ceil(m / f) * math.ceil(cube_k / f) * math.ceil(n / f) + self.cube.matmul_overhead
        return (math.ceil(k / cube_k) - 1) * per_panel + self.cube.matmul_overhead + math.ceil(cube_k / f)

    def fractals(self, m: int, n: int) -> int:
        """L0C fractals (16×16 fp32) of an m×n accumulator: the units a unit flag tracks."""
        f = self.cube.fractal
        return math.ceil(m / f) * math.ceil(n / f)

    def extract(self, nbytes_l0a: int, nbytes_l0b: int) -> float:
        """TEXTRACT L1→L0A and L1→L0B of one sub-tile's panels (one MTE1 group)."""
        return nbytes_l0a / self.move.l1_to_l0a + nbytes_l0b / self.move.l1_to_l0b

    def vector_memo(self, groups: tuple[Group, ...]) -> float:
        """:meth:`vector`, memoised: a run prices the same few groups many times."""
        cost = self._cache.get(groups)
        if cost is None:
            cost = self._cache[groups] = self.vector(groups)
        return cost

    def vector(self, groups: tuple[Group, ...]) -> float:
        """Cycles of barrier-separated groups of vector instructions (module docstring): each group, and each
        stage after a barrier inside an instruction, is a stream whose first pass pays its class's startup and
        completion; every pass pays its repeats; a pass over a partial repeat (mask or count mode) pays
        ``vector.count_mode`` more."""
        total = 0.0
        for _, cycles in self._terms(groups):
            total += cycles
        return total

    def vector_each(self, groups: tuple[Group, ...]) -> list[float]:
        """Each instruction's share of :meth:`vector`'s cycles, in order (a group's first pass carries its
        startup and completion): where a stage's vector time goes, line by line (``tfa-sim listing``)."""
        out = [0.0] * sum(len(group) for group in groups)
        for i, cycles in self._terms(groups):
            out[i] += cycles
        return out

    def _terms(self, groups: tuple[Group, ...]) -> Iterator[tuple[int, float]]:
        """The cycles :meth:`vector` adds, in its order, each with its instruction's index: a stream's startup
        and completion, then each pass's repeats."""
        i = -1
        for group in groups:
            fresh = True
            for op in group:
                i += 1
                for cls, repeats, partial, barrier in self._passes(op):
                    startup, per_repeat, completion = self._figures[cls]
                    if fresh or barrier:
                        yield i, startup + completion
                    yield i, repeats * per_repeat + (self.vec.count_mode if partial else 0.0)
                    fresh = False

    def _passes(self, op: VectorOp) -> list[tuple[str, int, bool, bool]]:
        """(intrinsic class, repeats, partial repeat, after a barrier) of each pass ``op`` makes."""
        per = self.vec.repeat_bytes // op.itemsize  # elements per repeat

        def span(elements: int) -> tuple[int, bool]:
            return math.ceil(elements / per), elements % per != 0

        if op.form == "map":
            return [(op.kind, *span(op.rows * op.cols), False)]
        if op.form == "expand":  # vbrcb the row values, barrier, one pass per `per` columns over the rows
            return [("broadcast", 0, False, False), (op.kind, op.rows * math.ceil(op.cols / per), False, True)]
        passes = [("reduce", *span(op.rows * op.cols), False)]  # group reductions: one value per 8
        left = math.ceil(op.cols / 8)
        while left > 1:
            passes.append(("reduce", *span(op.rows * left), True))
            left = math.ceil(left / 8)
        return passes

    @staticmethod
    def _intrinsics(v: VectorParams) -> dict[str, tuple[float, float, float]]:
        """(startup, per repeat, completion) of each intrinsic class."""
        return {"binary": (v.binary_startup, v.binary_per_repeat, v.binary_completion),
                "div": (v.div_startup, v.div_per_repeat, v.div_completion),
                "scalar": (v.scalar_startup, v.scalar_per_repeat, v.scalar_completion),
                "exp": (v.exp_startup, v.exp_per_repeat, v.exp_completion),
                "convert": (v.convert_startup, v.convert_per_repeat, v.convert_completion),
                "reduce": (v.reduce_startup, v.reduce_per_repeat, v.reduce_completion),
                "broadcast": (0.0, 0.0, v.broadcast_completion)}
