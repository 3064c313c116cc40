"""A listing file read into statements: the grammar of docs/kernel.md, "Listings", and its one-line errors.

A listing is one stage's program, one statement a line, ``#`` to the end of a line a comment::

    listing compute_p                 # the stage it is (first statement)
    sync auto                         # the lines after it: PIPE_V barriers where ptoas --enable-insert-sync
                                      # puts them (``sync spelled``, the default: only those written)
    tile p [rows, cols] f32           # a scratch tile of the listing's own: its shape and element type
    const one 1.0                     # a constant tile, filled before the loop
    vec softmax                       # the name the vector groups after it carry in the timeline
    if first and mask != "none"       # blocks: if / elif / else / end, conditions on the call (Python syntax)
        TROWMAX(m, qk, t)             # an instruction: the kernel's name, destination first
    end
    for n in range(1, chunks)         # a loop over an integer range; tiles may be indexed: m[n]
        TMAX(big_m, big_m, m[n])
    end

Reading checks the grammar only (what every line is); :mod:`tfa_sim.listings.check` checks what the lines name.
Every error is an :class:`~tfa_sim.spec.errors.InputError` naming ``file:line`` and the fix.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from tfa_sim.spec.errors import InputError

#: Element types a ``tile`` line may give, with their bytes.
DTYPES = {"f32": 4, "f16": 2, "mask": 4}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:<([^<>]*)>)?\s*\((.*)\)\s*;?$")
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|0[xX][0-9a-fA-F]+)$")
TILE_ARG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(.+)\])?$")
#: Python expression nodes a condition, a shape, a loop bound or an index may use.
EXPR_NODES = (ast.Expression, ast.Name, ast.Load, ast.Constant, ast.Compare, ast.BoolOp, ast.And, ast.Or,
              ast.UnaryOp, ast.Not, ast.USub, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Eq, ast.NotEq,
              ast.Lt, ast.LtE, ast.Gt, ast.GtE)


@dataclass(frozen=True)
class Where:
    """A line of a listing file: its path (or shipped name) and number, for every diagnosis."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class Expr:
    """A Python expression over the call's names (a condition, a shape, a bound, an index), checked once."""

    __slots__ = ("text", "code", "names")

    def __init__(self, text: str, where: Where) -> None:
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise InputError(f"{where}: {text.strip()!r} is not an expression; write a condition such as "
                             f"`first and mask == \"partial\"`") from None
        for node in ast.walk(tree):
            if not isinstance(node, EXPR_NODES) or (isinstance(node, ast.Constant) and
                                                    not isinstance(node.value, (int, float, str, bool))):
                raise InputError(f"{where}: {text.strip()!r} uses {type(node).__name__}; a listing's expressions "
                                 f"take names, numbers, strings, comparisons, and/or/not and + - * //")
        self.text = text.strip()
        self.code = compile(tree, str(where), "eval")
        self.names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))

    def value(self, names: dict[str, Any]) -> Any:
        return eval(self.code, {"__builtins__": {}}, names)  # noqa: S307 - nodes whitelisted above

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class TileArg:
    """A tile operand: a name, with an index expression for a tile of a loop (``m[n]``)."""

    name: str
    index: Expr | None = None


@dataclass(frozen=True)
class Number:
    value: float
    text: str


@dataclass(frozen=True)
class Text:
    """A quoted operand (a marker's name)."""

    value: str


Arg = TileArg | Number | Text


@dataclass(frozen=True)
class Call:
    """One instruction line: the kernel's name, its template arguments (``TMATMUL<Final>``) and operands."""

    op: str
    targs: tuple[str, ...]
    args: tuple[Arg, ...]
    where: Where
    text: str


@dataclass
class If:
    branches: list[tuple[Expr, list[Any]]]
    orelse: list[Any]
    where: Where


@dataclass
class For:
    var: str
    bounds: tuple[Expr, ...]
    body: list[Any]
    where: Where


@dataclass(frozen=True)
class Vec:
    """``vec NAME``: the vector groups after it are called ``VEC NAME`` in the timeline."""

    label: str
    where: Where


@dataclass(frozen=True)
class Sync:
    """``sync auto`` or ``sync spelled``: how the lines after it get their PIPE_V barriers."""

    mode: str
    where: Where


@dataclass(frozen=True)
class TileDecl:
    name: str
    shape: tuple[Expr, Expr]
    dtype: str
    where: Where


@dataclass(frozen=True)
class ConstDecl:
    name: str
    value: float
    where: Where


Stmt = Call | If | For | Vec | Sync


@dataclass
class Listing:
    """A listing file as read: the stage, the barrier rule, the tiles and constants it declares, the statements."""

    stage: str
    path: str
    text: str
    tiles: dict[str, TileDecl] = field(default_factory=dict)
    consts: dict[str, ConstDecl] = field(default_factory=dict)
    body: list[Stmt] = field(default_factory=list)

    @functools.cached_property
    def digest(self) -> str:
        """The text's sha256: the same text is the same listing wherever it lives."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    def calls(self) -> list[Call]:
        """Every instruction line, in file order (inside every branch and loop)."""
        out: list[Call] = []

        def walk(stmts: list[Any]) -> None:
            for s in stmts:
                if isinstance(s, Call):
                    out.append(s)
                elif isinstance(s, If):
                    for _, body in s.branches:
                        walk(body)
                    walk(s.orelse)
                elif isinstance(s, For):
                    walk(s.body)
        walk(self.body)
        return out


def strip_comment(line: str) -> str:
    """The line without its ``#`` comment (a ``#`` inside quotes is text)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def split_args(text: str, where: Where) -> list[str]:
    """Operands split at the top-level commas."""
    parts, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth or quote:
        raise InputError(f"{where}: unbalanced brackets or quotes in {text.strip()!r}; close them")
    parts.append(text[start:])
    parts = [p.strip() for p in parts]
    if parts == [""]:
        return []
    if any(not p for p in parts):
        raise InputError(f"{where}: an empty operand in ({text.strip()}); remove the extra comma")
    return parts


def parse_arg(text: str, where: Where) -> Arg:
    if NUMBER.match(text):
        return Number(float(int(text, 16)) if text.lower().startswith("0x") else float(text), text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return Text(text[1:-1])
    m = TILE_ARG.match(text)
    if not m:
        raise InputError(f"{where}: operand {text!r} is not a tile, a number or a quoted name; write e.g. "
                         f"`p`, `m[n]`, `0.5` or \"block end\"")
    return TileArg(m.group(1), Expr(m.group(2), where) if m.group(2) else None)


def parse_call(text: str, where: Where) -> Call:
    m = CALL.match(text)
    if not m:
        raise InputError(f"{where}: {text!r} is not an instruction; write NAME(dst, src, …) as the kernel does, "
                         f"or a statement (listing, sync, tile, const, vec, if, elif, else, for, end)")
    targs = tuple(a.strip() for a in m.group(2).split(",")) if m.group(2) else ()
    return Call(m.group(1), targs, tuple(parse_arg(a, where) for a in split_args(m.group(3), where)), where, text)


def read(text: str, path: str) -> Listing:
    """The statements of ``text`` (from ``path``, a file or a shipped name), or InputError naming the line."""
    reader = _Reader(path, text)
    for number, raw in enumerate(text.splitlines(), 1):
        line = strip_comment(raw).strip()
        if line:
            reader.line(Where(path, number), line)
    if reader.listing is None:
        raise InputError(f"{path}: the listing is empty; it starts with `listing STAGE`")
    if reader.stack:
        raise InputError(f"{reader.stack[-1][0].where}: this block has no `end`; close it")
    reader.listing.body = reader.body
    return reader.listing


class _Reader:
    """:func:`read`'s state: the listing once its header is read, the blocks open and the statements so far."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        self.listing: Listing | None = None
        self.stack: list[tuple[Any, list[Any]]] = []  # open blocks: (If or For, the body being filled)
        self.body: list[Any] = []

    def target(self) -> list[Any]:
        return self.stack[-1][1] if self.stack else self.body

    def line(self, where: Where, line: str) -> None:
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        if self.listing is None:
            if word != "listing" or not IDENT.match(rest):
                raise InputError(f"{where}: a listing starts with `listing STAGE` (e.g. `listing compute_p`); "
                                 f"got {line!r}")
            self.listing = Listing(rest, self.path, self.text)
        elif word == "listing":
            raise InputError(f"{where}: a second `listing` line; one file holds one stage's listing")
        elif word in ("tile", "const"):
            self.declaration(where, word, rest)
        elif word == "sync":
            if rest not in ("auto", "spelled"):
                raise InputError(f"{where}: `sync {rest}`: write `sync auto` (barriers by ptoas's rule) or "
                                 f"`sync spelled` (as written, the default)")
            self.target().append(Sync(rest, where))
        elif word == "vec":
            if not re.match(r"[\w ,]+$", rest):
                raise InputError(f"{where}: write `vec NAME` (letters, digits, spaces), e.g. `vec softmax`")
            self.target().append(Vec(rest, where))
        elif word in ("if", "elif", "else", "for", "end"):
            self.block(where, word, rest)
        else:
            self.target().append(parse_call(line, where))

    def declaration(self, where: Where, word: str, rest: str) -> None:
        listing = self.listing
        assert listing is not None
        if word == "const":
            name, _, value = rest.partition(" ")
            if not IDENT.match(name) or not NUMBER.match(value.strip()):
                raise InputError(f"{where}: write a constant as `const NAME NUMBER`, e.g. `const one 1.0`")
            _declare(listing, name, where)
            listing.consts[name] = ConstDecl(name, float(value), where)
            return
        m = re.match(r"([A-Za-z_]\w*)\s*\[(.*)\]\s*(\w+)$", rest)
        if not m:
            raise InputError(f"{where}: write a tile as `tile NAME [ROWS, COLS] TYPE` (TYPE: {', '.join(DTYPES)}), "
                             f"e.g. `tile p [rows, cols] f32`")
        dims = split_args(m.group(2), where)
        if len(dims) != 2:
            raise InputError(f"{where}: tile {m.group(1)} has {len(dims)} dimensions; give [ROWS, COLS]")
        if m.group(3) not in DTYPES:
            raise InputError(f"{where}: tile {m.group(1)} has type {m.group(3)!r}; use one of {', '.join(DTYPES)}")
        _declare(listing, m.group(1), where)
        listing.tiles[m.group(1)] = TileDecl(m.group(1), (Expr(dims[0], where), Expr(dims[1], where)), m.group(3),
                                             where)

    def block(self, where: Where, word: str, rest: str) -> None:
        """``if`` / ``elif`` / ``else`` / ``for`` / ``end``."""
        stack = self.stack
        if word == "if":
            block = If([(Expr(rest, where), [])], [], where)
            self.target().append(block)
            stack.append((block, block.branches[0][1]))
        elif word in ("elif", "else"):
            if not stack or not isinstance(stack[-1][0], If) or stack[-1][1] is stack[-1][0].orelse:
                raise InputError(f"{where}: `{word}` without an open `if`; add the `if` or remove this line")
            block = stack.pop()[0]
            if word == "elif":
                block.branches.append((Expr(rest, where), []))
                stack.append((block, block.branches[-1][1]))
            elif rest:
                raise InputError(f"{where}: `else` takes no condition; write `elif {rest}`")
            else:
                stack.append((block, block.orelse))
        elif word == "for":
            m = re.match(r"([A-Za-z_]\w*)\s+in\s+range\s*\((.*)\)$", rest)
            if not m:
                raise InputError(f"{where}: write a loop as `for NAME in range(START, STOP)`")
            bounds = split_args(m.group(2), where)
            if not 1 <= len(bounds) <= 2:
                raise InputError(f"{where}: range takes one or two bounds, got {len(bounds)}")
            loop = For(m.group(1), tuple(Expr(b, where) for b in bounds), [], where)
            self.target().append(loop)
            stack.append((loop, loop.body))
        elif not stack:
            raise InputError(f"{where}: `end` with no open `if` or `for`; remove it")
        else:
            stack.pop()


def _declare(listing: Listing, name: str, where: Where) -> None:
    if name in listing.tiles or name in listing.consts:
        raise InputError(f"{where}: {name} is declared twice; give each tile and constant one line")
