"""A listing as one call runs it: its conditions decided, its loops unrolled, its tiles named, and (``sync auto``)
the barriers ptoas's rule adds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfa_sim.listings.isa import ISA, Op, fixed_roles
from tfa_sim.listings.syntax import Call, For, If, Listing, Number, Sync, Text, TileArg, Vec
from tfa_sim.spec.errors import InputError

#: Roles whose operand is a tile.
TILE_ROLES = "wrt"


@dataclass(frozen=True)
class Line:
    """One instruction of a call: the listing line, its instruction, each operand's role and value (a tile's
    name, with its index: ``m[2]``; a number; a word), the vector group name in effect, and whether the compiler's
    rule put it there (``inserted``: a barrier of a ``sync auto`` listing)."""

    call: Call
    op: Op
    roles: str
    args: tuple[Any, ...]
    label: str
    auto: bool = False  # under ``sync auto``
    inserted: bool = False
    reads: tuple[str, ...] = ()  # the tiles it reads and writes (a scratch operand both), set from the roles
    writes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", self.tiles("rt"))
        object.__setattr__(self, "writes", self.tiles("wt"))

    @property
    def name(self) -> str:
        return self.op.name

    def tiles(self, roles: str) -> tuple[str, ...]:
        """The tiles of the operands with one of ``roles``."""
        return tuple(a for r, a in zip(self.roles, self.args) if r in roles)

    def word(self, role: str, i: int = 0) -> Any:
        """The ``i``-th operand of ``role`` (a pipe, an event, a FIFO…)."""
        return [a for r, a in zip(self.roles, self.args) if r == role][i]

    @property
    def text(self) -> str:
        return "pipe_barrier(PIPE_V)  # inserted (sync auto)" if self.inserted else self.call.text


def flatten(listing: Listing, names: dict[str, Any], label: str) -> tuple[Line, ...]:
    """The lines of ``listing`` one call runs, ``names`` giving each condition's and bound's names (memoised per
    listing and names)."""
    key = tuple(sorted(names.items()))
    cache: dict[Any, tuple[Line, ...]] = listing.__dict__.setdefault("_flat", {})
    if key not in cache:
        lines: list[Line] = []
        _walk(listing.body, dict(names), lines, [label, False])
        cache[key] = auto_sync(tuple(lines))
    return cache[key]


def _walk(stmts: list[Any], names: dict[str, Any], out: list[Line], state: list[Any]) -> None:
    """Append the lines of ``stmts`` to ``out``; ``state``: [the vector label, whether ``sync auto``] in effect."""
    for s in stmts:
        if isinstance(s, Call):
            out.append(_line(s, names, state[0], state[1]))
        elif isinstance(s, Vec):
            state[0] = s.label
        elif isinstance(s, Sync):
            state[1] = s.mode == "auto"
        elif isinstance(s, If):
            for cond, body in s.branches:
                if _value(cond, names, s.where):
                    _walk(body, names, out, state)
                    break
            else:
                _walk(s.orelse, names, out, state)
        elif isinstance(s, For):
            bounds = [_value(b, names, s.where) for b in s.bounds]
            for i in range(*bounds):
                _walk(s.body, {**names, s.var: i}, out, state)


def _value(expr: Any, names: dict[str, Any], where: Any) -> Any:
    try:
        return expr.value(names)
    except NameError as e:
        raise InputError(f"{where}: {e.args[0].split(chr(39))[1]!r} is not a name this stage's conditions know; "
                         f"use {', '.join(sorted(names))}") from None
    except (TypeError, ZeroDivisionError) as e:
        raise InputError(f"{where}: {expr!r} cannot be evaluated ({e}); fix the expression") from None


def _line(call: Call, names: dict[str, Any], label: str, auto: bool) -> Line:
    op = ISA[call.op]
    args: list[Any] = []
    for a in call.args:
        if isinstance(a, TileArg):
            args.append(a.name if a.index is None else f"{a.name}[{_value(a.index, names, call.where)}]")
        elif isinstance(a, Number):
            args.append(a.value)
        else:
            assert isinstance(a, Text)
            args.append(a.value)
    return Line(call, op, fixed_roles(op, len(args)), tuple(args), label, auto)


BARRIER = ISA["pipe_barrier"]


def auto_sync(lines: tuple[Line, ...]) -> tuple[Line, ...]:
    """``lines`` with a ``pipe_barrier(PIPE_V)`` where ``ptoas --enable-insert-sync`` puts one, before each vector
    instruction under ``sync auto`` that reads a tile a vector instruction since the last barrier wrote, or writes
    one such an instruction read or wrote (read after write, write after write, write after read)."""
    out: list[Line] = []
    read: set[str] = set()
    written: set[str] = set()
    for line in lines:
        if is_barrier(line, "V"):
            read, written = set(), set()
        elif line.op.vector:
            reads, writes = set(line.reads), set(line.writes)
            if line.auto and (reads & written or writes & (read | written)):
                out.append(Line(line.call, BARRIER, "p", ("PIPE_V",), line.label, True, True))
                read, written = set(), set()
            read |= reads
            written |= writes
        out.append(line)
    return tuple(out)


def is_barrier(line: Line, pipe: str) -> bool:
    """``line`` is ``pipe_barrier(PIPE_<pipe>)``."""
    return line.op.name == "pipe_barrier" and line.args[0] == f"PIPE_{pipe}"
