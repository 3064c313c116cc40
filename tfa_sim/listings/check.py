"""What a listing's lines name, checked before anything runs: every instruction known and given its operands,
every tile, FIFO, pipe, event and name known to its stage, the shapes of each instruction's tiles fitting it.
A problem is one line naming ``file:line`` and the fix (an :class:`~tfa_sim.spec.errors.InputError`, exit 2)."""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from tfa_sim.listings.isa import EVENTS, ISA, MODES, PIPES, Op, arity, fixed_roles
from tfa_sim.listings.syntax import Call, Expr, For, If, Listing, Number, Text, TileArg
from tfa_sim.listings.vocabulary import Vocabulary
from tfa_sim.spec.errors import InputError

#: Template arguments an instruction may take.
TEMPLATES = {"TMATMUL": ("Final",), "TMATMUL_ACC": ("Final",), "TSTORE": ("Final",)}
#: Where each end of a DMA, a TEXTRACT and a TMATMUL may live.
DMA_FROM = {"TLOAD": ("GM",), "TSTORE": ("UB", "L0C", "const")}
DMA_TO = {"TLOAD": ("L1", "UB"), "TSTORE": ("GM",)}


def _close(word: str, known: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(known), n=1)
    return f"did you mean {match[0]!r}?" if match else ""


def shape_of(name: str, listing: Listing, vocabulary: Vocabulary) -> tuple[str, str] | None:
    """``name``'s shape as text (``("rows", "cols")``), None for a constant (it takes any)."""
    bound = vocabulary.tiles.get(name)
    if bound is not None:
        return bound.shape
    decl = listing.tiles.get(name)
    if decl is not None:
        return (decl.shape[0].text, decl.shape[1].text)
    return None


def place_of(name: str, listing: Listing, vocabulary: Vocabulary) -> str:
    bound = vocabulary.tiles.get(name)
    if bound is not None:
        return bound.where
    return "const" if name in listing.consts else "UB"


def check(listing: Listing, vocabulary: Vocabulary, choices: Iterable[str]) -> None:
    """Every problem :mod:`this module <tfa_sim.listings.check>` looks for, the first as an InputError."""
    names = set(vocabulary.context) | set(choices) | set(vocabulary.dims)
    for decl in listing.tiles.values():
        if decl.name in vocabulary.tiles:
            raise InputError(f"{decl.where}: tile {decl.name} is one of {vocabulary.stage}'s own names; give the "
                             f"listing's tile another name")
        for e in decl.shape:
            _names(e, set(vocabulary.dims), decl.where, "a tile's shape")
    for const in listing.consts.values():
        if const.name in vocabulary.tiles:
            raise InputError(f"{const.where}: constant {const.name} is one of {vocabulary.stage}'s own names; "
                             f"rename it")
    _walk(listing.body, listing, vocabulary, names)


def _names(expr: Expr, known: set[str], where: Any, what: str) -> None:
    unknown = sorted(expr.names - known)
    if unknown:
        hint = _close(unknown[0], known)
        raise InputError(f"{where}: {what} names {unknown[0]!r}, which {'is not one of ' if known else 'no '}this "
                         f"stage's names{': ' + ', '.join(sorted(known)) if known else ''}"
                         f"{'; ' + hint if hint else ''}")


def _walk(stmts: list[Any], listing: Listing, vocabulary: Vocabulary, names: set[str]) -> None:
    for s in stmts:
        if isinstance(s, Call):
            _call(s, listing, vocabulary, names)
        elif isinstance(s, If):
            for cond, body in s.branches:
                _names(cond, names, s.where, "the condition")
                _walk(body, listing, vocabulary, names)
            _walk(s.orelse, listing, vocabulary, names)
        elif isinstance(s, For):
            for b in s.bounds:
                _names(b, names, s.where, "the loop's range")
            _walk(s.body, listing, vocabulary, names | {s.var})


def _call(call: Call, listing: Listing, vocabulary: Vocabulary, names: set[str]) -> None:
    where = call.where
    op = ISA.get(call.op)
    if op is None:
        hint = _close(call.op, ISA)
        raise InputError(f"{where}: {call.op} is not an instruction tfa-sim models{'; ' + hint if hint else ''} "
                         f"(docs/kernel.md, \"Listings\", lists them)")
    for targ in call.targs:
        if targ not in TEMPLATES.get(op.name, ()):
            raise InputError(f"{where}: {op.name}<{targ}>: "
                             + (f"{op.name} takes <{', '.join(TEMPLATES[op.name])}>" if op.name in TEMPLATES
                                else f"{op.name} takes no template argument") + "; remove it")
    roles = fixed_roles(op, len(call.args))
    if not roles:
        raise InputError(f"{where}: {op.name} takes {arity(op)} operands ({_signature(op)}), got {len(call.args)}")
    for role, arg in zip(roles, call.args):
        _operand(op, role, arg, call, listing, vocabulary, names)
    _shapes(op, roles, call, listing, vocabulary)


def _signature(op: Op) -> str:
    words = {"w": "dst", "r": "src", "t": "tmp", "s": "scalar", "m": "mode", "f": "fifo", "p": "PIPE_X",
             "e": "EVENT_ID or tile", "q": "\"name\""}
    out: list[str] = []
    for r in op.roles:
        if r == "*":
            out[-1] += ", …"
        else:
            out.append(words[r])
    return ", ".join(out)


def _operand(op: Op, role: str, arg: Any, call: Call, listing: Listing, vocabulary: Vocabulary,
             names: set[str]) -> None:
    where = call.where
    if role == "q":
        if not isinstance(arg, Text):
            raise InputError(f"{where}: {op.name}'s last operand is a quoted name, e.g. \"block end\"")
        return
    if role == "s":
        if isinstance(arg, Number) or (isinstance(arg, TileArg) and arg.name in vocabulary.scalars
                                       and arg.index is None):
            return
        raise InputError(f"{where}: {op.name} takes a number or {', '.join(sorted(vocabulary.scalars)) or 'a number'}"
                         f" here, got {_text(arg)}")
    if not isinstance(arg, TileArg):
        raise InputError(f"{where}: {op.name} takes a name here ({_role(role)}), got {_text(arg)}")
    name = arg.name
    if role in "mp":
        words = MODES if role == "m" else tuple(PIPES)
        if name not in words or arg.index is not None:
            hint = _close(name, words)
            raise InputError(f"{where}: {name} is not a {_role(role)}; use one of {', '.join(words)}"
                             f"{'; ' + hint if hint else ''}")
        return
    if role == "f":
        fifos = vocabulary.fifos | vocabulary.flags
        if name not in fifos:
            raise InputError(f"{where}: {op.name} takes one of {vocabulary.stage}'s FIFOs or flags "
                             f"({', '.join(sorted(fifos)) or 'it has none'}), got {name}")
        return
    if role == "e":
        bound = vocabulary.tiles.get(name)
        if name in EVENTS or (bound is not None and bound.pool):
            return
        pools = sorted(n for n, t in vocabulary.tiles.items() if t.pool)
        raise InputError(f"{where}: {op.name}'s event is EVENT_ID0…EVENT_ID7 or a ping-pong tile "
                         f"({', '.join(pools) or 'none in this stage'}), got {name}")
    bound = vocabulary.tiles.get(name)
    known_tile = bound is not None or name in listing.tiles or (role == "r" and name in listing.consts)
    if not known_tile:
        if role != "r" and name in listing.consts:
            raise InputError(f"{where}: {op.name} writes {name}, a constant; write a tile")
        known = sorted({*vocabulary.tiles, *listing.tiles, *listing.consts})
        hint = _close(name, known)
        own = ", ".join(sorted(vocabulary.tiles))
        raise InputError(f"{where}: unknown tile {name!r}{'; ' + hint if hint else ''} (declare it: tile {name} "
                         f"[ROWS, COLS] f32, or use one of {vocabulary.stage}'s: {own})")
    if arg.index is not None:
        if bound is not None and not bound.indexed:
            raise InputError(f"{where}: {name} is one tile, not one per index; drop [{arg.index!r}]")
        _names(arg.index, names, where, "the index")
    elif bound is not None and bound.indexed:
        raise InputError(f"{where}: {name} is one tile per chunk; index it, e.g. {name}[n]")


def _role(role: str) -> str:
    return {"m": "mode", "p": "pipe", "w": "tile", "r": "tile", "t": "tile", "f": "FIFO or flag"}[role]


def _text(arg: Any) -> str:
    if isinstance(arg, Number):
        return arg.text
    if isinstance(arg, Text):
        return f'"{arg.value}"'
    return arg.name


class _Tiles:
    """An instruction's tile operands, their shapes and places, for :func:`_shapes`."""

    def __init__(self, roles: str, call: Call, listing: Listing, vocabulary: Vocabulary) -> None:
        self.listing, self.vocabulary, self.where = listing, vocabulary, call.where
        self.tiles = [(r, a.name) for r, a in zip(roles, call.args) if r in "wrt" and isinstance(a, TileArg)]

    def shape(self, name: str) -> tuple[str, str] | None:
        return shape_of(name, self.listing, self.vocabulary)

    def place(self, name: str) -> str:
        return place_of(name, self.listing, self.vocabulary)

    def show(self, name: str) -> str:
        s = self.shape(name)
        return f"{name} [{', '.join(s)}]" if s else name


def _shapes(op: Op, roles: str, call: Call, listing: Listing, vocabulary: Vocabulary) -> None:
    """The shapes and places of an instruction's tiles fit it."""
    tiles = _Tiles(roles, call, listing, vocabulary)
    if op.vector:
        _vector_shapes(op, tiles)
    elif op.name in DMA_FROM:
        _dma_shapes(op, tiles)
    elif op.name in ("TEXTRACT", "TMATMUL", "TMATMUL_ACC"):
        _cube_shapes(op, tiles)


def _vector_shapes(op: Op, t: _Tiles) -> None:
    where, shape, show = t.where, t.shape, t.show
    for _, name in t.tiles:
        if t.place(name) not in ("UB", "const"):
            raise InputError(f"{where}: {op.name} works on UB tiles; {name} lives in {t.place(name)}")
    if op.form == "reduce":
        dst, src, tmp = (n for _, n in t.tiles)
        if shape(dst) != ("1", _rows(shape(src))) or shape(tmp) != shape(src):
            raise InputError(f"{where}: {op.name} reduces {show(src)} into one value per row [1, "
                             f"{_rows(shape(src))}] with scratch of its shape; got {show(dst)}, {show(tmp)}")
    elif op.form == "expand":
        dst, src, row = (n for _, n in t.tiles)
        if shape(dst) != shape(src) or (shape(row) is not None and shape(row) != ("1", _rows(shape(src)))):
            raise InputError(f"{where}: {op.name} writes {show(dst)} from {show(src)} and one value per row "
                             f"[1, {_rows(shape(src))}]; got {show(row)}")
    else:
        shaped = [n for _, n in t.tiles if shape(n) is not None]
        if any(shape(n) != shape(shaped[0]) for n in shaped):
            raise InputError(f"{where}: {op.name} is element-wise: its tiles have one shape; got "
                             f"{', '.join(show(n) for n in shaped)}")


def _dma_shapes(op: Op, t: _Tiles) -> None:
    where, place = t.where, t.place
    dsts = [n for r, n in t.tiles if r == "w"]
    srcs = [n for r, n in t.tiles if r == "r"]
    for ends, allowed, what in ((srcs, DMA_FROM[op.name], "from"), (dsts, DMA_TO[op.name], "to")):
        for n in ends:
            if place(n) not in allowed:
                raise InputError(f"{where}: {op.name} moves {what} {' or '.join(allowed)}; {n} lives in {place(n)}")
    if op.name == "TSTORE" and t.vocabulary.unit != "AIC" and any(place(n) == "const" for n in srcs):
        raise InputError(f"{where}: TSTORE of a constant is the cube's (a FIXPIPE of +0); a vector core stores a "
                         f"UB tile")
    near, far = (dsts, srcs) if op.name == "TLOAD" else (srcs, dsts)
    if len(near) == 1 and place(near[0]) != "const" and t.shape(near[0]) != t.shape(far[0]):
        raise InputError(f"{where}: {op.name} moves {t.show(far[0])} and {t.show(near[0])}: the shapes differ")


def _cube_shapes(op: Op, t: _Tiles) -> None:
    where, place, shape, show = t.where, t.place, t.shape, t.show
    if op.name == "TEXTRACT":
        dst, src = (n for _, n in t.tiles)
        if place(dst) not in ("L0A", "L0B") or place(src) != "L1" or shape(dst) != shape(src):
            raise InputError(f"{where}: TEXTRACT moves an L1 tile into L0A or L0B of its shape; got {show(dst)} in "
                             f"{place(dst)} from {show(src)} in {place(src)}")
        return
    acc, a, b = t.tiles[0][1], t.tiles[-2][1], t.tiles[-1][1]
    if (place(acc), place(a), place(b)) != ("L0C", "L0A", "L0B"):
        raise InputError(f"{where}: {op.name} multiplies L0A by L0B into L0C; got {acc} in {place(acc)}, "
                         f"{a} in {place(a)}, {b} in {place(b)}")
    if op.name == "TMATMUL_ACC" and t.tiles[1][1] != acc:
        raise InputError(f"{where}: TMATMUL_ACC accumulates into the tile it reads: write "
                         f"TMATMUL_ACC({acc}, {acc}, {a}, {b})")
    (m, n), (ma, ka), (kb, nb) = shape(acc), shape(a), shape(b)  # type: ignore[misc]
    if (m, ka, n) != (ma, kb, nb):
        raise InputError(f"{where}: {op.name} multiplies {show(a)} by {show(b)} into {show(acc)}: the shapes do not "
                         f"chain (M×K · K×N → M×N)")


def _rows(shape: tuple[str, str] | None) -> str:
    return shape[0] if shape else "?"
