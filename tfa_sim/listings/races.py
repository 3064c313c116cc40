"""Races found, not simulated: a listing whose lines let the hardware read a tile before it is written, or write it
while another instruction still reads it, is refused before it runs (a :class:`RaceError`, exit 3, naming the two
lines, the tile and the rule).  The rules are the hardware's as the kernel sources and the ISA documentation
state them, not "every dependency needs a barrier" (docs/kernel.md, "Race rules", with each rule's source):

* **V1** — PIPE_V runs its instructions in order and each instruction's repeats in order, so an instruction that
  reads, overwrites or writes over a tile an earlier vector instruction writes or reads needs a
  ``pipe_barrier(PIPE_V)`` (or a ``wait_flag`` of PIPE_V) between them *unless both stream that tile element by
  element* — a map instruction's operands, an expand's tile (not its row values), a reduction's source (not its
  result or scratch).  Such a pair reads each repeat after the earlier one wrote it: the manual macros run chains
  of them with no barrier (pto_macro_fa_softmax: TROWEXPANDSUB→TMULS→TEXP; pto_macro_fa_gu:
  TROWEXPANDMUL→TADD→TROWEXPANDDIV), PTOAS prunes the barriers of exact-access chains (#674), the pto-isa barrier
  patch removes the GU barrier; a reduction's result, its scratch and a broadcast row do not stream (the patch tool
  keeps every barrier with such a dependency).
* **X1** — across pipes, a read of a tile another pipe wrote needs ``set_flag(A, B, ID)`` after the writer and
  ``wait_flag(A, B, ID)`` before the reader (the ISA's ordering rules), or the unit flags of ``TMATMUL<Final>``
  and ``TSTORE<Final>``.  **X2** — so does a write over a tile another pipe wrote or read.
* **D1** — a DMA queue may overlap its transfers: two on one pipe touching one tile, one writing it, need
  ``pipe_barrier`` of that pipe between them.
* **S1** — a tile of the listing's own read before any instruction of the call writes it.
* **P1–P3** — a ping-pong tile is taken (``wait_flag(…, tile)``) before it is used, not used after it is given
  back (``set_flag(…, tile)``), and given back in the call that took it (a tile held across calls excepted).
* **F1** — a FIFO tile is read after its TPOP and freed (TFREE) after, written after its TALLOC and pushed (TPUSH)
  after, in the listing's order.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from tfa_sim.listings.isa import PIPES
from tfa_sim.listings.program import dma_pipe
from tfa_sim.listings.resolve import Line, flatten
from tfa_sim.listings.syntax import Listing
from tfa_sim.listings.vocabulary import Vocabulary
from tfa_sim.spec.errors import InputError, ScheduleError

ORDERING = "pto-isa's ISA manual, machine-model/ordering-and-synchronization.md"
#: Each rule: what it forbids, its sources, the fix.
RULES = {
    "V1": ("the vector pipe may read or write the tile before the earlier instruction has finished with it "
           "(the two do not both stream it element by element)",
           "pto-isa kernels/python/flash_atten/scripts/patch_vec_barriers.py; PTOAS #173, #674; "
           "pto_macro_fa_softmax.hpp, pto_macro_fa_gu.hpp", "add pipe_barrier(PIPE_V) between them"),
    "X1": ("a pipe reads a tile another pipe writes with no flag between them",
           ORDERING, "add set_flag/wait_flag between them"),
    "X2": ("a pipe writes over a tile another pipe still writes or reads, with no flag between them",
           ORDERING, "add set_flag/wait_flag between them"),
    "D1": ("two transfers of one DMA queue touch the tile with no barrier between them (the queue may overlap "
           "them)", "pto-isa's ISA manual, scalar/ops/pipeline-sync/pipe-barrier.md", "add pipe_barrier of that pipe"),
    "S1": ("the listing's own tile is read before any instruction writes it", "the tile holds no data",
           "write it first, or read another tile"),
    "P1": ("a ping-pong tile is used without being taken", "the kernel's buffer events "
           "(fa_performance_kernel.cpp: wait_flag before a buffer's reuse)", "take it with wait_flag(…, TILE) first"),
    "P2": ("a ping-pong tile is used after it was given back: another call may write it", "the kernel's buffer "
           "events", "move its set_flag(…, TILE) after the last use"),
    "P3": ("a ping-pong tile is taken and never given back: the next call would wait for it forever",
           "the kernel's buffer events", "give it back with set_flag(…, TILE)"),
    "F1": ("a FIFO tile is used outside its protocol (TPOP before reading, TFREE after; TALLOC before writing, "
           "TPUSH after)", "pto-isa include/pto/npu/a2a3/TPush.hpp (TPipe)", "put the protocol lines around it"),
}


class RaceError(ScheduleError):
    """A listing the hardware would run wrong (exit 3)."""


def race(rule: str, first: Line | None, second: Line, tile: str) -> RaceError:
    what, source, fix = RULES[rule]
    lines = f"{first.call.where}: {first.text.strip()} and " if first is not None else ""
    return RaceError(f"{lines}{second.call.where}: {second.text.strip()}: {tile}: {rule}, {what} ({source}; "
                     f"docs/kernel.md, \"Race rules\"); {fix}")


def contexts(vocabulary: Vocabulary, choices: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    """Every combination of the values the stage's names take, with the run's choices."""
    keys = list(vocabulary.context)
    for values in itertools.product(*(vocabulary.context[k] for k in keys)):
        yield {**choices, **dict(zip(keys, values))}


def check_races(listing: Listing, vocabulary: Vocabulary, choices: Mapping[str, Any]) -> None:
    """Every rule over every call the listing may make (each combination of the stage's names)."""
    _fifo_protocol(listing, vocabulary)
    for names in contexts(vocabulary, choices):
        calls(flatten(listing, names, vocabulary.label), listing, vocabulary)


def pipe_of(line: Line, place: Any) -> str | None:
    unit = line.op.unit
    if unit in ("V", "MTE1", "M"):
        return unit
    if unit == "dma":
        return dma_pipe(line, place)
    if unit == "mark":
        return PIPES[line.args[0]]
    return None


def _streams(line: Line, index: int) -> bool:
    """Whether operand ``index`` of a vector instruction streams its tile element by element."""
    form, role = line.op.form, line.roles[index]
    if form == "map":
        return True
    if form == "expand":
        return index < 2
    return role == "r"


def calls(lines: tuple[Line, ...], listing: Listing, vocabulary: Vocabulary) -> None:
    """The rules over one call's ``lines`` (module docstring)."""
    check = _Call(listing, vocabulary)
    for pos, line in enumerate(lines):
        check.line(pos, line)
    for tile in sorted(check.taken - check.given):
        b = check.bound(tile)
        if b is not None and not b.held:
            last = next(ln for ln in reversed(lines) if tile in ln.args)
            raise race("P3", None, last, tile)


class _Call:
    """What :func:`calls` knows as it walks a call: each pipe's latest line and what it is ordered after (a
    vector clock, through the flags), each tile's writer and readers, the accesses since each pipe's barrier,
    the ping-pong tiles taken and given back."""

    def __init__(self, listing: Listing, vocabulary: Vocabulary) -> None:
        self.listing, self.vocabulary = listing, vocabulary
        self.last_on: dict[str, Line] = {}
        self.writer: dict[str, tuple[int, str, Line]] = {}
        self.readers: dict[str, list[tuple[int, str, Line]]] = {}
        self.clock: dict[str, dict[str, int]] = {}  # pipe → the latest position of each pipe ordered before it
        self.flagged: dict[tuple[str, str, str], dict[str, int]] = {}  # a set flag → the setter's clock
        self.window: dict[str, list[tuple[Line, str, bool, bool]]] = {}  # pipe → accesses since its barrier
        self.taken: set[str] = set()
        self.given: set[str] = set()

    def place(self, tile: str) -> str:
        base = tile.split("[", 1)[0]
        bound = self.vocabulary.tiles.get(base)
        return bound.where if bound is not None else "const" if base in self.listing.consts else "UB"

    def bound(self, tile: str) -> Any:
        return self.vocabulary.tiles.get(tile.split("[", 1)[0])

    def key(self, tile: str) -> str:
        """The tile an access is tracked under: the whole that a part (``m[2]`` of ``ml``) belongs to."""
        b = self.bound(tile)
        return b.within if b is not None and b.within else tile

    def line(self, pos: int, line: Line) -> None:
        op = line.op
        if op.name == "pipe_barrier":
            self.window.pop(PIPES[line.args[0]], None)
        elif op.name in ("set_flag", "wait_flag"):
            self.flag(line)
        elif op.unit == "effect":
            word = line.args[0] if op.name == "ffts_cross_core_sync" else line.args[1] if len(line.args) > 1 else None
            if word is not None and PIPES[word] not in self.last_on:
                raise InputError(f"{line.call.where}: {line.text.strip()} follows no instruction on {PIPES[word]} in "
                                 f"this call; put a mark({word}, \"NAME\") before it")
        else:
            pipe = pipe_of(line, self.place)
            if pipe is not None:
                self.instruction(pos, line, pipe)

    def flag(self, line: Line) -> None:
        src, dst, event = PIPES[line.args[0]], PIPES[line.args[1]], line.args[2]
        if line.op.name == "set_flag":
            if src not in self.last_on:
                raise InputError(f"{line.call.where}: {line.text.strip()} follows no instruction on {src} in this "
                                 f"call; put it after one, or a mark({line.args[0]}, \"NAME\") before it")
            if event.startswith("EVENT_ID"):
                self.flagged[(src, dst, event)] = dict(self.clock.get(src, {}))
            else:
                self.given.add(event)
        elif event.startswith("EVENT_ID"):
            seen = self.clock.setdefault(dst, {})
            for p, at in self.flagged.pop((src, dst, event), {}).items():  # what the setter had seen, transitively
                seen[p] = max(seen.get(p, -1), at)
            if dst == "V":
                self.window.pop("V", None)
        else:  # a fresh slot: nothing of the last one's accesses holds
            self.taken.add(event)
            self.given.discard(event)
            self.writer.pop(event, None)
            self.readers.pop(event, None)
            for accesses in self.window.values():
                accesses[:] = [a for a in accesses if a[1] != event]

    def instruction(self, pos: int, line: Line, pipe: str) -> None:
        self.last_on[pipe] = line
        self.clock.setdefault(pipe, {})[pipe] = pos
        accesses = [(i, a, role) for i, (role, a) in enumerate(zip(line.roles, line.args))
                    if role in "wrt" and self.place(a) != "const"]
        for i, name, role in accesses:
            self.access(line, pipe, i, name, role)
        for i, name, role in accesses:
            tile = self.key(name)
            self.window.setdefault(pipe, []).append((line, tile, role in "wt", line.op.vector and _streams(line, i)))
            if role in "wt":
                self.writer[tile] = (pos, pipe, line)
                self.readers[tile] = []
            if role in "rt":
                self.readers.setdefault(tile, []).append((pos, pipe, line))

    def access(self, line: Line, pipe: str, i: int, name: str, role: str) -> None:
        """The rules on one operand of an instruction on ``pipe``."""
        b, tile = self.bound(name), self.key(name)
        clock = self.clock[pipe]
        if b is not None and b.pool:
            if tile in self.given:
                raise race("P2", None, line, tile)
            if tile not in self.taken and not b.held:
                raise race("P1", None, line, tile)
        if role in "rt":
            w = self.writer.get(tile)
            if w is None and role == "r" and b is None and name.split("[", 1)[0] in self.listing.tiles:
                raise race("S1", None, line, tile)
            if w is not None and w[1] != pipe and clock.get(w[1], -1) < w[0] and not (
                    "Final" in line.call.targs and "Final" in w[2].call.targs):
                raise race("X1", w[2], line, tile)
        if role in "wt":
            for r in [*self.readers.get(tile, ()), *([self.writer[tile]] if tile in self.writer else [])]:
                if r[1] != pipe and clock.get(r[1], -1) < r[0]:
                    raise race("X2", r[2], line, tile)
        streams = line.op.vector and _streams(line, i)
        for other, t, wrote, other_streams in self.window.get(pipe, ()):
            if t == tile and other is not line and (wrote or role in "wt"):
                if pipe == "V" and streams and other_streams:
                    continue
                if pipe in ("V", "MTE2", "MTE3", "FIX"):
                    raise race("V1" if pipe == "V" else "D1", other, line, tile)


def _fifo_protocol(listing: Listing, vocabulary: Vocabulary) -> None:
    """F1 in the listing's order: a FIFO read after a TPOP and freed after, written after a TALLOC and pushed
    after (each in some branch: the calls that pop and push are not the ones that load and store)."""
    seen: dict[str, list[str]] = {}
    uses: list[tuple[str, str, Any]] = []
    for call in listing.calls():
        names = [a.name for a in call.args if hasattr(a, "name")]
        if call.op in ("TPOP", "TALLOC", "TFREE", "TPUSH"):
            seen.setdefault(names[0], []).append(call.op)
        elif call.op in ("TLOAD", "TSTORE"):
            fifo = names[-1] if call.op == "TLOAD" else names[0]
            if fifo in vocabulary.fifos:
                uses.append((fifo, call.op, call))
                before = "TPOP" if call.op == "TLOAD" else "TALLOC"
                if before not in seen.get(fifo, []):
                    raise RaceError(f"{call.where}: {call.text.strip()}: {fifo}: F1, {RULES['F1'][0]} "
                                    f"({RULES['F1'][1]}; docs/kernel.md, \"Race rules\"); add {before}({fifo}) "
                                    f"before it")
    for fifo, op, call in uses:
        after = "TFREE" if op == "TLOAD" else "TPUSH"
        later = [c for c in listing.calls() if c.op == after and c.args and getattr(c.args[0], "name", "") == fifo
                 and c.where.line > call.where.line]
        if not later:
            raise RaceError(f"{call.where}: {call.text.strip()}: {fifo}: F1, {RULES['F1'][0]} ({RULES['F1'][1]}; "
                            f"docs/kernel.md, \"Race rules\"); add {after}({fifo}) after it")
