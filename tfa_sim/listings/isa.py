"""The instructions a listing may use: each one's operands, pipe, cost class and, for vector instructions, what it
computes with the kernel's rounding (docs/kernel.md, "Listings", the instruction table).

Operand roles, one letter each: ``w`` a tile written, ``r`` a tile read, ``t`` a scratch tile (written, then read,
by the instruction's own passes), ``s`` a scalar (a number or ``scale``/``softcap``), ``m`` a mode word
(``CAST_ROUND``, ``LT``…), ``f`` a FIFO or flag, ``p`` a pipe (``PIPE_V``…), ``e`` an event (``EVENT_ID0``…) or
a ping-pong tile (the kernel's buffer events), ``q`` a quoted name.  A ``*`` lets the role before it repeat any
number of times, none included (a DMA of several tiles as one transfer; an optional pipe).

A vector instruction's cost class is the intrinsic its passes run on (the preset's ``[vector]`` figures:
:class:`~tfa_sim.spec.costs.Costs`), its form how it is built from them (``map``: one pass; ``reduce``: group
reductions to one value per row; ``expand``: a row broadcast, then passes).  Each class and form is the one the
model priced these instructions with before listings existed, so the shipped listings cost what the code did.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfa_sim.numerics import rounding as nx

F32 = np.float32
U32 = np.uint32

#: Pipes by the name a listing spells.
PIPES = {"PIPE_V": "V", "PIPE_MTE1": "MTE1", "PIPE_MTE2": "MTE2", "PIPE_MTE3": "MTE3", "PIPE_M": "M",
         "PIPE_FIX": "FIX", "PIPE_S": "S"}
EVENTS = tuple(f"EVENT_ID{i}" for i in range(8))
#: TCMPS's comparisons.
COMPARE = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal, "EQ": np.equal,
           "NE": np.not_equal}
MODES = ("CAST_ROUND", *COMPARE)


class Semantics:
    """What the vector instructions compute with, for one run: the exp model and the max of the numerics
    reference (``npu`` or ``cpu_sim``, :mod:`tfa_sim.numerics.rounding`), the type of ``x_exp``, the slice's mask."""

    def __init__(self, exp: Callable[[np.ndarray], np.ndarray], row_max: Callable[[np.ndarray], np.ndarray],
                 maximum: Callable[[np.ndarray, np.ndarray], np.ndarray], out_dtype: Any,
                 mask: np.ndarray | None = None) -> None:
        self.exp, self.row_max, self.maximum, self.out_dtype, self.mask = exp, row_max, maximum, out_dtype, mask


@dataclass(frozen=True)
class Op:
    """One instruction: its operand ``roles``, the ``unit`` that runs it (``V`` and ``MTE1``/``M`` are pipes;
    ``dma``: MTE2, MTE3 or FIX by where its tiles live; ``wait``: the scalar unit's flag wait; ``effect``: at the
    completion of an instruction before it; ``sync``: a barrier or flag), and for vector instructions the cost
    ``cls``, the ``form`` and ``fn`` (the values of its read operands and scalars, in order → the value written)."""

    name: str
    roles: str
    unit: str
    cls: str = ""
    form: str = "map"
    fn: Callable[..., Any] | None = None

    @property
    def vector(self) -> bool:
        return self.unit == "V"


def _f(x: Any) -> Any:
    return np.asarray(x, dtype=F32)


def _bits(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def fn(_s: Semantics, a: Any, b: Any) -> np.ndarray:
        return op(_f(a).view(U32), _f(b).view(U32)).view(F32)
    return fn


def _row(x: Any) -> np.ndarray:
    return _f(x)[:, None]


def _vector(name: str, roles: str, cls: str, fn: Callable[..., Any], form: str = "map") -> Op:
    return Op(name, roles, "V", cls, form, fn)


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with IEEE's exceptions silent (inf − inf, overflow: the same values as the kernel's)."""
    def run(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)
    return run


VECTOR = (
    _vector("TADD", "wrr", "binary", lambda s, a, b: _f(a) + _f(b)),
    _vector("TSUB", "wrr", "binary", lambda s, a, b: _f(a) - _f(b)),
    _vector("TMUL", "wrr", "binary", lambda s, a, b: _f(a) * _f(b)),
    _vector("TDIV", "wrr", "div", lambda s, a, b: _f(a) / _f(b)),
    _vector("TMAX", "wrr", "binary", lambda s, a, b: s.maximum(a, b)),
    _vector("TAND", "wrr", "binary", _bits(np.bitwise_and)),
    _vector("TOR", "wrr", "binary", _bits(np.bitwise_or)),
    _vector("TSEL", "wrrr", "binary", lambda s, c, a, b: np.where(np.asarray(c, bool), _f(a), _f(b)).astype(F32)),
    _vector("TADDS", "wrs", "scalar", lambda s, a, x: _f(a) + F32(x)),
    _vector("TSUBS", "wrs", "scalar", lambda s, a, x: _f(a) - F32(x)),
    _vector("TMULS", "wrs", "scalar", lambda s, a, x: np.asarray(a) * np.asarray(x, np.asarray(a).dtype)),
    _vector("TDIVS", "wrs", "div", lambda s, a, x: _f(a) / F32(x)),
    _vector("TMAXS", "wrs", "scalar", lambda s, a, x: s.maximum(a, np.full(np.shape(a), x, F32))),
    _vector("TEXPANDS", "ws", "scalar", lambda s, x: F32(x)),
    _vector("TCMPS", "wrsm", "scalar", lambda s, a, x, mode: COMPARE[mode](_f(a), F32(x))),
    _vector("TTRI", "w", "scalar", lambda s: np.asarray(s.mask, dtype=F32)),
    _vector("TEXP", "wr", "exp", lambda s, a: s.exp(_f(a))),
    _vector("TABS", "wr", "scalar", lambda s, a: (_f(a).view(U32) & U32(0x7FFFFFFF)).view(F32)),
    _vector("TMOV", "wr", "scalar", lambda s, a: np.array(a, copy=True)),
    _vector("TCVT", "wrm", "convert", lambda s, a, _mode: nx.narrow(a, s.out_dtype)),
    _vector("TROWMAX", "wrt", "binary", lambda s, a: s.row_max(a), "reduce"),
    _vector("TROWSUM", "wrt", "binary", lambda s, a: nx.row_sum(a), "reduce"),
    _vector("TROWEXPANDSUB", "wrr", "binary", lambda s, a, r: _f(a) - _row(r), "expand"),
    _vector("TROWEXPANDADD", "wrr", "binary", lambda s, a, r: _f(a) + _row(r), "expand"),
    _vector("TROWEXPANDMUL", "wrr", "binary", lambda s, a, r: _f(a) * _row(r), "expand"),
    _vector("TROWEXPANDDIV", "wrr", "div", lambda s, a, r: _f(a) / _row(r), "expand"),
    _vector("TROWEXPANDMAX", "wrr", "binary", lambda s, a, r: s.maximum(a, np.broadcast_to(_row(r), np.shape(a))),
            "expand"),
)

OTHERS = (
    Op("TLOAD", "ww*r", "dma"),  # one or more tiles from one GM source: one transfer
    Op("TSTORE", "wrr*", "dma"),  # one GM destination from one or more tiles: one transfer (FIX from L0C)
    Op("TEXTRACT", "wr", "MTE1"),
    Op("TMATMUL", "wrr", "M"),
    Op("TMATMUL_ACC", "wrrr", "M"),
    Op("TPOP", "f", "wait"),  # the consumer's wait(): the FIFO tile is ready
    Op("TALLOC", "f", "wait"),  # the producer's allocate(): a credit, when the credit rule asks for one
    Op("TDRAIN", "f", "wait"),  # the credits of a FIFO nobody waited for (the pipes' destructors)
    Op("wait_flag_dev", "f", "wait"),  # a cross-core flag (CV_BLOCK_END)
    Op("TFREE", "fp*", "effect"),  # the consumer's free(): the slot, and a credit when the rule says so
    Op("TPUSH", "fp*", "effect"),  # the producer's record(): the tile is ready
    Op("ffts_cross_core_sync", "pf", "effect"),  # set a cross-core flag once the pipe's work before it is done
    Op("mark", "pq", "mark"),  # tfa-sim's zero-cost marker on a pipe: effects after it attach to it
    Op("set_flag", "ppe", "sync"),
    Op("wait_flag", "ppe", "sync"),
    Op("pipe_barrier", "p", "sync"),
)

#: Every instruction a listing may name.
ISA = {op.name: op for op in (*VECTOR, *OTHERS)}
for _op in VECTOR:
    object.__setattr__(_op, "fn", _quiet(_op.fn))  # type: ignore[arg-type]

#: Instructions whose value is one of their operands (the math of a listing is the same without them).
IDENTITY = {"TMOV"}
#: Instructions whose two tile operands may be swapped without changing a bit (IEEE's + and × are commutative).
COMMUTATIVE = {"TADD", "TMUL"}


def fixed_roles(op: Op, count: int) -> str:
    """The role of each of ``count`` operands of ``op`` (a ``*`` repeats the role before it, none to many
    times), or "" if ``count`` does not fit."""
    roles = op.roles
    if "*" not in roles:
        return roles if count == len(roles) else ""
    star = roles.index("*")
    head, repeated, tail = roles[:star - 1], roles[star - 1], roles[star + 1:]
    times = count - len(head) - len(tail)
    return head + repeated * times + tail if times >= 0 else ""


def arity(op: Op) -> str:
    """``op``'s operand count in words, for an error message."""
    if "*" in op.roles:
        return f"at least {len(op.roles) - 2}"
    return str(len(op.roles))
