"""What an instruction group costs, in cycles, from the hardware preset.

* cube TMATMUL: ceil(M/16)·ceil(K/16)·ceil(N/16) + 6 per CubeK panel;
* on-chip moves (TEXTRACT L1→L0A/L0B): bytes / path rate;
* GM moves: bytes / path rate through the chip's L2 and HBM (engine.gm);
* vector work: the kernel's op sequence (:func:`compute_p_ops`, :func:`compute_gu_ops`) in groups separated
  by ``pipe_barrier(PIPE_V)``, each instruction as the passes of the intrinsics it is built from
  (:class:`VectorOp`), each intrinsic class with the startup, per-repeat and completion cycles the PTO-ISA
  library's instruction cost model measured (docs/timing.md, "Vector instructions").  A group streams: its
  first pass pays startup and completion, the others only their repeats (256 bytes each).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tfa_sim.spec.choices import SOFTMAX
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


def _op(name: str, kind: str, rows: int, cols: int, form: str = "map") -> VectorOp:
    return VectorOp(name, kind, rows, cols, FP32, form)


def _mask_prefix(rows: int, cols: int) -> tuple[Group, ...]:
    """A partly masked tile: TTRI | TMULS by −3.40282e38 | TADD to the scores, each behind a barrier."""
    return ((_op("TTRI", "scalar", rows, cols),), (_op("TMULS", "scalar", rows, cols),),
            (_op("TADD", "binary", rows, cols),))


def _softcap_prefix(rows: int, cols: int) -> tuple[Group, ...]:
    """Logit softcap on the scores, as tfa-sim's tanh model computes it (docs/numerics.md, "The tanh model";
    the reference kernel has no softcap, so the op list is tfa-sim's): u = x·s, v = u/c, both tanh
    branches (Horner polynomial; exp, add, divide, subtract), the selects and the sign, y = w·c."""
    def op(name: str, kind: str = "scalar") -> VectorOp:
        return _op(name, kind, rows, cols)

    horner = tuple(o for _ in range(4) for o in (op("TMUL", "binary"), op("TADDS")))
    return ((op("TMULS"),), (op("TDIVS", "div"),), (op("TABS"), op("TMUL", "binary")),
            horner + (op("TMUL", "binary"), op("TMUL", "binary"), op("TADD", "binary")),
            (op("TADD", "binary"), op("TEXP", "exp"), op("TADDS"), op("TDIV", "div"), op("TSUBS")),
            (op("TCMPS"), op("TSEL", "binary"), op("TCMPS"), op("TSEL", "binary"), op("TOR", "binary")),
            (op("TMULS"),))


#: What a ``kernel.softmax`` value does: compute_p's vector sequence on an unmasked rows×cols slice, in groups
#: between barriers (``first``: the block's first tile; ``softcap``: the scores are capped, the exponents unscaled).
SoftmaxSequence = Callable[[int, int, bool, bool], tuple[Group, ...]]


def compute_p_ops(rows: int, cols: int, first: bool, mask: str, softcap: bool = False,
                  body: SoftmaxSequence | None = None) -> tuple[Group, ...]:
    """compute_p on a rows×cols fp32 slice: the softmax sequence ``body`` (``kernel.softmax``'s; default the
    macro's) after the prefixes the slice needs; ``mask``: how the mask covers the slice, none | partial | full
    (:meth:`tfa_sim.spec.blocks.Block.coverage`); ``softcap``: the scores are capped first.  The row state
    (maxima, sums, ``l1_exp_max``) is a 1×rows tile."""
    if mask == "full":  # nothing visible: x_exp = 0, exp_max = 1, the running state unchanged
        return ((VectorOp("TMULS", "scalar", rows, cols, FP16), _op("TMULS", "scalar", 1, rows)),
                (_op("TADDS", "scalar", 1, rows),))
    prefix = (_softcap_prefix(rows, cols) if softcap else ()) + (_mask_prefix(rows, cols) if mask == "partial"
                                                                  else ())
    return prefix + (body or macro_softmax)(rows, cols, first, softcap)


def macro_softmax(rows: int, cols: int, first: bool, softcap: bool) -> tuple[Group, ...]:
    """``pto_macro_fa_softmax``'s sequence with the macro's ``pipe_barrier(PIPE_V)`` (docs/kernel.md, "compute_p,
    later tiles, vector ops in order"); with ``softcap`` the exponents take no scale (the TMULS beside the TEXP
    drop out)."""
    if softcap:
        body = macro_softmax(rows, cols, first, False)
        return tuple(tuple(o for o in g if o.name != "TMULS") if any(o.name == "TEXP" for o in g) else g
                     for g in body)
    tile, row = (rows, cols), (1, rows)
    if first:
        return ((_op("TROWMAX", "binary", *tile, "reduce"),),
                (_op("TROWEXPANDSUB", "binary", *tile, "expand"), _op("TMULS", "scalar", *tile),
                 _op("TEXP", "exp", *tile)),
                (_op("TROWSUM", "binary", *tile, "reduce"), _op("TCVT", "convert", *tile)))
    return ((_op("TROWMAX", "binary", *tile, "reduce"),), (_op("TMAX", "binary", *row),),
            (_op("TSUB", "binary", *row),), (_op("TMULS", "scalar", *row),),  # copy of the new max
            (_op("TROWEXPANDSUB", "binary", *tile, "expand"), _op("TMULS", "scalar", *row),
             _op("TMULS", "scalar", *tile), _op("TEXP", "exp", *row), _op("TEXP", "exp", *tile),
             _op("TCVT", "convert", *tile)),
            (_op("TMUL", "binary", *row), _op("TROWSUM", "binary", *tile, "reduce")),
            (_op("TADD", "binary", *row),))


def port_softmax(rows: int, cols: int, first: bool, softcap: bool) -> tuple[Group, ...]:
    """The port's ``emit_softmax`` sequence with its barriers where ``ptoas --enable-insert-sync`` puts them
    (:func:`port_softmax_steps`, :func:`insert_sync`)."""
    return insert_sync(port_softmax_steps(rows, cols, first, softcap))


@dataclass(frozen=True)
class Step:
    """One vector instruction of a compiler-synchronised sequence and the UB tiles it reads and writes."""

    op: VectorOp
    reads: frozenset[str]
    writes: frozenset[str]


def insert_sync(steps: tuple[Step, ...]) -> tuple[Group, ...]:
    """The groups ``ptoas --enable-insert-sync`` separates with ``pipe_barrier(PIPE_V)``: a barrier before
    each instruction that reads a tile an instruction since the last barrier wrote, or writes one such an
    instruction read or wrote (read after write, write after write, write after read)."""
    groups: list[Group] = []
    group: list[VectorOp] = []
    read: set[str] = set()
    written: set[str] = set()
    for step in steps:
        if group and (step.reads & written or step.writes & (read | written)):
            groups.append(tuple(group))
            group, read, written = [], set(), set()
        group.append(step.op)
        read |= step.reads
        written |= step.writes
    return (*groups, tuple(group)) if group else tuple(groups)


def port_softmax_steps(rows: int, cols: int, first: bool, softcap: bool = False) -> tuple[Step, ...]:
    """compute_p of the dsl build on a rows×cols fp32 slice: ``emit_softmax``'s instructions in order
    (pto-isa kernels/python/flash_atten/kernels/fa_builder.py), each with the tiles it touches (``m``, ``s``:
    the slice's running max and sum; ``lm``, ``ls``: local max and sum; ``e``: its ``l1_exp_max`` entry;
    ``t``: the reductions' scratch).  ``softcap``: tfa-sim's capped scores, the exponents without scale."""
    tile, row = (rows, cols), (1, rows)

    def step(name: str, kind: str, shape: tuple[int, int], reads: str, writes: str, form: str = "map") -> Step:
        return Step(_op(name, kind, *shape, form), frozenset(reads.split()), frozenset(writes.split()))

    scale = not softcap
    head = (step("TROWMAX", "binary", tile, "qk", "lm t", "reduce"),)
    if first:
        body = (step("TROWEXPANDSUB", "binary", tile, "qk lm", "p", "expand"),
                step("TMOV", "scalar", row, "lm", "m"),
                *((step("TMULS", "scalar", tile, "p", "p"),) if scale else ()),
                step("TEXP", "exp", tile, "p", "p"),
                step("TROWSUM", "binary", tile, "p", "s t", "reduce"))
    else:
        body = (step("TMAX", "binary", row, "lm m", "lm"), step("TSUB", "binary", row, "m lm", "e"),
                step("TMOV", "scalar", row, "lm", "m"), step("TROWEXPANDSUB", "binary", tile, "qk lm", "p", "expand"),
                *((step("TMULS", "scalar", row, "e", "e"), step("TMULS", "scalar", tile, "p", "p")) if scale else ()),
                step("TEXP", "exp", row, "e", "e"), step("TEXP", "exp", tile, "p", "p"),
                step("TMUL", "binary", row, "s e", "s"), step("TROWSUM", "binary", tile, "p", "ls t", "reduce"),
                step("TADD", "binary", row, "s ls", "s"))
    return (*head, *body, step("TCVT", "convert", tile, "p", "p16"))


def compute_gu_ops(rows: int, head: int, first: bool, last: bool) -> tuple[Group, ...]:
    """compute_gu on rows×HEAD (``pto_macro_fa_gu``): tile 0 is loaded straight into running_o (no vector
    work); later tiles rescale and add; the last divides by the running sum."""
    ops: tuple[VectorOp, ...] = () if first else (_op("TROWEXPANDMUL", "binary", rows, head, "expand"),
                                                  _op("TADD", "binary", rows, head))
    if last:
        ops += (_op("TROWEXPANDDIV", "div", rows, head, "expand"),)
    return (ops,) if ops else ()


def combine_factor_ops(rows: int, chunks: int) -> tuple[Group, ...]:
    """The combine's per-row work before the O loads: M = max over the chunks' maxima; per chunk
    f = exp((m − M)·s); L = Σ f·l."""
    def op(name: str, kind: str) -> VectorOp:
        return _op(name, kind, 1, rows)

    return ((op("TMAX", "binary"),) * max(1, chunks - 1),
            (op("TSUB", "binary"), op("TMULS", "scalar"), op("TEXP", "exp")) * chunks,
            (op("TMUL", "binary"), op("TADD", "binary")) * chunks)


def combine_accumulate_ops(rows: int, head: int) -> tuple[Group, ...]:
    """The combine's acc += f ⊙row O for one chunk."""
    return ((_op("TROWEXPANDMUL", "binary", rows, head, "expand"), _op("TADD", "binary", rows, head)),)


def combine_normalise_ops(rows: int, head: int) -> tuple[Group, ...]:
    """The combine's O = acc ⊘row L."""
    return ((_op("TROWEXPANDDIV", "div", rows, head, "expand"),),)


SOFTMAX.add("macro", macro_softmax, "`pto_macro_fa_softmax`'s sequence, `pipe_barrier(PIPE_V)` where the macro "
            "places them", "manual pto_macro_fa_softmax.hpp", (), __name__)
SOFTMAX.add("port", port_softmax, "the port's `emit_softmax` sequence, barriers where `ptoas --enable-insert-sync` "
            "inserts them (was `vec_barriers = insert_sync`)", "PTO-DSL fa_builder.py, compile.sh", (), __name__)


class Costs:
    """Cycle costs for one hardware preset and softmax sequence (``kernel.softmax``'s, default the macro's)."""

    def __init__(self, hw: Hardware, softmax: SoftmaxSequence = macro_softmax) -> None:
        self.hw = hw
        self.softmax = softmax
        self.cube = hw.cube
        self.vec = hw.vector
        self.move = hw.move
        self._figures = self._intrinsics(hw.vector)
        self._cache: dict[tuple, float] = {}

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

    def compute_p(self, rows: int, cols: int, first: bool, mask: str, softcap: bool = False) -> float:
        """Cycles of compute_p's vector sequence on one row slice (memoised per shape)."""
        return self._memo(("p", rows, cols, first, mask, softcap),
                          lambda: compute_p_ops(rows, cols, first, mask, softcap, self.softmax))

    def compute_gu(self, rows: int, head: int, first: bool, last: bool) -> float:
        """Cycles of compute_gu's vector sequence (memoised per shape)."""
        return self._memo(("gu", rows, head, first, last), lambda: compute_gu_ops(rows, head, first, last))

    def combine_factors(self, rows: int, chunks: int) -> float:
        """Cycles of the combine's max, factors and sum over ``chunks`` (:func:`combine_factor_ops`)."""
        return self._memo(("cf", rows, chunks), lambda: combine_factor_ops(rows, chunks))

    def combine_accumulate(self, rows: int, head: int) -> float:
        """Cycles of acc += f ⊙row O for one chunk."""
        return self._memo(("ca", rows, head), lambda: combine_accumulate_ops(rows, head))

    def combine_normalise(self, rows: int, head: int) -> float:
        """Cycles of O = acc ⊘row L."""
        return self._memo(("cn", rows, head), lambda: combine_normalise_ops(rows, head))

    def _memo(self, key: tuple, ops: Callable[[], tuple[Group, ...]]) -> float:
        if key not in self._cache:
            self._cache[key] = self.vector(ops())
        return self._cache[key]

    def vector(self, groups: tuple[Group, ...]) -> float:
        """Cycles of barrier-separated groups of vector instructions (module docstring): each group, and each
        stage after a barrier inside an instruction, is a stream whose first pass pays its class's startup and
        completion; every pass pays its repeats; a pass over a partial repeat (mask or count mode) pays
        ``vector.count_mode`` more."""
        total = 0.0
        for group in groups:
            fresh = True
            for op in group:
                for cls, repeats, partial, barrier in self._passes(op):
                    startup, per_repeat, completion = self._figures[cls]
                    if fresh or barrier:
                        total += startup + completion
                    total += repeats * per_repeat + (self.vec.count_mode if partial else 0.0)
                    fresh = False
        return total

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
