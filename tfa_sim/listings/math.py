"""What a listing computes, as expressions of its inputs: two listings that write the same expressions into a
stage's outputs compute the same bits, whatever their barriers, their order of independent instructions or the
tiles they keep temporaries in.  The stages compare a listing's expressions with the shipped listing's to run the
backend's stage kernel (the shipped math) or the instruction-by-instruction interpreter
(:mod:`tfa_sim.listings.interpret`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tfa_sim.listings.isa import COMMUTATIVE, IDENTITY
from tfa_sim.listings.resolve import Line

Expr = tuple[Any, ...]


def expressions(lines: Iterable[Line], inputs: Iterable[str], outputs: Iterable[str],
                scalars: Mapping[str, Any]) -> tuple[Expr, ...]:
    """The expression each of ``outputs`` holds after ``lines`` (vector instructions compute, TLOAD and TSTORE
    copy), over the leaves ``("in", name)`` of ``inputs``, numbers and the named ``scalars``; a tile read before
    anything wrote it is ``("old", name)`` (what the last call left)."""
    value: dict[str, Expr] = {name: ("in", name) for name in inputs}

    def read(tile: str) -> Expr:
        return value.get(tile, ("old", tile))

    for line in lines:
        name = line.op.name
        if name in ("TLOAD", "TSTORE"):
            sources = [read(t) for t in line.tiles("r")]
            for i, dst in enumerate(line.tiles("w")):
                value[dst] = sources[min(i, len(sources) - 1)] if name == "TLOAD" else tuple(sources)
            continue
        if not line.op.vector:
            continue
        args: list[Expr] = []
        for role, a in zip(line.roles, line.args):
            if role == "r":
                args.append(read(a))
            elif role == "s":
                args.append(("s", scalars.get(a, a) if isinstance(a, str) else float(a)))
            elif role == "m":
                args.append(("m", a))
        if name in IDENTITY or (name == "TMULS" and args[1] == ("s", 1.0)):
            result = args[0]
        else:
            if name in COMMUTATIVE:
                args = sorted(args, key=repr)
            result = (name, *args)
        for dst in line.tiles("w"):
            value[dst] = result
    return tuple(read(name) for name in outputs)
