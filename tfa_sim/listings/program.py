"""A call's lines as the steps its unit issues: the scalar unit's flag waits and the instruction groups of each
pipe, with what each group waits for and what it does when it completes (docs/kernel.md, "Listings").

* Vector instructions in a row are one group on PIPE_V (a stream, priced to its barriers), TEXTRACTs in a row one
  on MTE1; a DMA (TLOAD, TSTORE), a TMATMUL and a ``mark`` are a group each.  A group ends at any other line
  that orders it: a flag wait of its pipe, a ``set_flag`` from it, an effect attached to it, a scalar wait, or a
  ``vec NAME`` line.
* ``wait_flag(A, B, EVENT_IDn)`` makes the next group on B wait for the group on A that ``set_flag(A, B,
  EVENT_IDn)`` followed; naming a ping-pong tile instead of an event (``wait_flag(PIPE_V, PIPE_MTE2, qk)``) takes a
  slot of that tile's buffer for the next group on B, and ``set_flag(PIPE_V, PIPE_MTE2, qk)`` gives it back when
  the group on A before it completes.
* TPOP, TALLOC, TDRAIN and ``wait_flag_dev`` are the scalar unit's waits (consecutive ones are one wait); a TALLOC
  also marks the FIFO tile claimed by the first group that then writes it.  TFREE, TPUSH and
  ``ffts_cross_core_sync`` act when the group they follow on their pipe completes.
* ``TMATMUL<Final>`` hands its accumulator to a ``TSTORE<Final>`` by unit flags (the store streams behind it).

A group's completion effects run in one order: claims, ring reads, slot releases, ring writes, FIFO frees,
pushes, flag sets (the order the stage code used before listings).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfa_sim.listings.isa import PIPES
from tfa_sim.listings.resolve import Line, is_barrier
from tfa_sim.listings.vocabulary import Vocabulary

#: Completion effects, in the order they run.
EFFECT_ORDER = ("claim", "ring_read", "release", "ring_write", "free", "push", "set")
#: Where a DMA's two ends live → the path of its rate (the preset's [move] keys) and its pipe.
PATHS = {("GM", "L1"): ("gm_to_l1", "MTE2"), ("GM", "UB"): ("gm_to_ub", "MTE2"), ("UB", "GM"): ("ub_to_gm", "MTE3"),
         ("L0C", "GM"): ("l0c_to_gm", "FIX")}


@dataclass
class Step:
    """One scalar wait (``pipe`` empty: ``waits`` of FIFOs and flags) or one instruction group on ``pipe``: its
    ``lines``, its ``label`` (the timeline's name), what it ``waits`` for (``("data", step)``, ``("slot", tile)``,
    ``("handoff", step)``) and its completion ``effects`` (``(kind, name)``)."""

    pipe: str
    lines: list[Line] = field(default_factory=list)
    label: str = ""
    waits: list[tuple[str, Any]] = field(default_factory=list)
    effects: list[tuple[str, str]] = field(default_factory=list)
    # what a call needs of the group, worked out once (:meth:`freeze`)
    instructions: tuple[Line, ...] = ()  # the instruction lines (its barriers left out; none in a ``mark``)
    reads: tuple[str, ...] = ()  # the tiles its instructions read, each once
    writes: tuple[str, ...] = ()
    ordered: tuple[tuple[str, str], ...] = ()  # the effects in their order (EFFECT_ORDER), the rings' included
    takes: tuple[str, ...] = ()  # the ping-pong tiles it takes
    kind: str = ""  # the timeline's name of a vector group or a mark
    carries: tuple[str, ...] = ()  # the tiles it writes that later calls of the unit read (the block's Q)
    # what each call reads of its lines, kept as plain fields (the driver issues every call; a Line is not compiled)
    issue_waits: tuple[tuple[str, Any], ...] = ()  # its waits but a hand-off
    handoff: int = -1  # the final matmul a TSTORE<Final> streams behind (-1: none)
    name: str = ""  # its first instruction's name (TLOAD, TSTORE, TMATMUL…)
    final: bool = False  # its first instruction has the Final phase (TMATMUL<Final>, TSTORE<Final>)
    dsts: tuple[str, ...] = ()  # its first instruction's written and read tiles, in operand order
    srcs: tuple[str, ...] = ()
    moves: tuple[tuple[str, str], ...] = ()  # per instruction: (its first written tile, its first read one)
    flag_waits: tuple[tuple[str, str], ...] = ()  # a scalar wait's lines: (the wait's name, its first operand)

    @property
    def is_wait(self) -> bool:
        return not self.pipe

    def freeze(self, rings: frozenset[str], carried: frozenset[str]) -> None:
        """Work out what a call needs of the group once; ``rings``: the tiles whose reads and writes are ring
        effects (the ``l1_exp_max`` entries); ``carried``: the tiles an earlier call wrote, whose writer a read of
        them in a later call waits for."""
        self.instructions = tuple(ln for ln in self.lines if ln.op.unit not in ("sync", "mark"))
        self.reads = tuple(dict.fromkeys(t for ln in self.instructions for t in ln.reads))
        self.writes = tuple(dict.fromkeys(t for ln in self.instructions for t in ln.writes))
        effects = [*self.effects, *(("ring_read", t) for t in self.reads if t in rings),
                   *(("ring_write", t) for t in self.writes if t in rings)]
        self.ordered = tuple(sorted(effects, key=lambda e: EFFECT_ORDER.index(e[0])))
        self.takes = tuple(ref for kind, ref in self.waits if kind == "slot")
        self.kind = self.label if not self.instructions else f"VEC {self.label}" if self.pipe == "V" else ""
        self.carries = tuple(t for t in self.writes if t in carried)
        self.issue_waits = tuple(w for w in self.waits if w[0] != "handoff")
        self.handoff = next((ref for kind, ref in self.waits if kind == "handoff"), -1)
        if self.instructions:
            first = self.instructions[0]
            self.name, self.final, self.dsts, self.srcs = first.name, "Final" in first.call.targs, first.writes, \
                first.reads
            self.moves = tuple((ln.writes[0], ln.reads[0]) for ln in self.instructions if ln.writes and ln.reads)
        if self.is_wait:
            self.flag_waits = tuple((ln.name, ln.args[0]) for ln in self.lines)


def where(vocabulary: Vocabulary, declared: dict[str, Any], consts: dict[str, Any], tile: str) -> str:
    """Where ``tile`` (maybe indexed: ``m[2]``) lives: the stage's place for it, UB for a listing's own tile,
    ``const`` for a constant."""
    base = tile.split("[", 1)[0]
    bound = vocabulary.tiles.get(base)
    if bound is not None:
        return bound.where
    if base in consts:
        return "const"
    if base in vocabulary.fifos:
        return "GM"
    return "UB" if base in declared else "?"


def dma_pipe(line: Line, place: Any) -> str:
    """The pipe of a TLOAD (MTE2) or TSTORE (MTE3 from UB, FIX from L0C or of a constant: the cube's +0)."""
    if line.name == "TLOAD":
        return "MTE2"
    return "MTE3" if any(place(t) == "UB" for t in line.reads) else "FIX"


def compile_steps(lines: tuple[Line, ...], place: Any, rings: frozenset[str] = frozenset(),
                  carried: frozenset[str] = frozenset()) -> tuple[Step, ...]:
    """The steps of one call's ``lines`` (module docstring); ``place(tile)`` says where a tile lives, ``rings``
    which tiles are ring entries, ``carried`` which are written by an earlier call of the unit (the block's Q)."""
    compiler = _Compiler(place, carried)
    for line in lines:
        compiler.line(line)
    for step in compiler.steps:
        step.freeze(rings, carried)
    return tuple(compiler.steps)


class _Compiler:
    """The state of :func:`compile_steps` as it walks a call's lines."""

    def __init__(self, place: Any, carried: frozenset[str]) -> None:
        self.place, self.carried = place, carried
        self.steps: list[Step] = []
        self.last_on: dict[str, int] = {}  # pipe → its latest group
        self.read_on: dict[str, str] = {}  # FIFO → the pipe of the latest group that read it (TFREE's default)
        self.wrote_on: dict[str, str] = {}  # FIFO → the pipe of the latest group that wrote it (TPUSH's default)
        self.waits_for: dict[str, list[tuple[str, Any]]] = {}  # pipe → what its next group waits for
        self.flags: dict[tuple[str, str, str], int | None] = {}  # (src, dst, event) set → the group it followed
        self.writer: dict[str, int] = {}  # tile → the group that wrote it last in this call
        self.claims: set[str] = set()  # FIFOs allocated, their first write not yet issued
        self.open: int | None = None  # the group later vector (or TEXTRACT) lines may join
        self.final_matmul: int | None = None

    def new(self, step: Step) -> int:
        step.waits = self.waits_for.pop(step.pipe, []) if step.pipe else []
        self.steps.append(step)
        self.open = None
        if step.pipe:
            self.last_on[step.pipe] = len(self.steps) - 1
        return len(self.steps) - 1

    def close(self, pipe: str) -> None:
        if self.open is not None and self.steps[self.open].pipe == pipe:
            self.open = None

    def written(self, i: int, line: Line) -> None:
        """Group ``i`` waits for the group of another pipe that last wrote a tile ``line`` reads — in this call, or
        an earlier one for a carried tile — (before the buffers it takes), and is the writer of what ``line``
        writes."""
        step = self.steps[i]
        for t in line.reads:
            w = self.writer.get(t)
            wait: tuple[str, Any] | None = None
            if w is not None and self.steps[w].pipe != step.pipe:
                wait = ("data", w)
            elif w is None and t in self.carried:
                wait = ("carried", t)
            if wait is not None and wait not in step.waits:
                slots = [k for k, (kind, _) in enumerate(step.waits) if kind == "slot"]
                step.waits.insert(slots[0] if slots else len(step.waits), wait)
        for t in line.writes:
            self.writer[t] = i

    def line(self, line: Line) -> None:
        op, unit = line.op, line.op.unit
        if unit in ("V", "MTE1"):
            i = self.open
            if i is not None and self.steps[i].pipe == unit and self.steps[i].label == line.label \
                    and unit not in self.waits_for:
                self.steps[i].lines.append(line)
            else:
                i = self.open = self.new(Step(unit, [line], line.label))
            self.last_on[unit] = i
            self.written(i, line)
        elif unit in ("dma", "M", "mark"):
            self.instruction(line, unit)
        elif unit == "wait":
            if self.open is not None or not self.steps or not self.steps[-1].is_wait:
                self.new(Step(""))
            self.steps[-1].lines.append(line)
            if op.name == "TALLOC":
                self.claims.add(line.args[0])
        elif unit == "effect":
            self.effect(line)
        elif op.name == "pipe_barrier":
            if is_barrier(line, "V") and self.open is not None and self.steps[self.open].pipe == "V":
                self.steps[self.open].lines.append(line)
        else:
            self.flag(line)

    def instruction(self, line: Line, unit: str) -> None:
        """A DMA, a matmul or a mark: a group of its own."""
        pipe = dma_pipe(line, self.place) if unit == "dma" else "M" if unit == "M" else PIPES[line.args[0]]
        i = self.new(Step(pipe, [line], line.args[1] if unit == "mark" else ""))
        self.written(i, line)
        if unit == "M" and "Final" in line.call.targs:
            self.final_matmul = i
        if unit != "dma":
            return
        for t in line.reads:
            if self.place(t) == "GM":
                self.read_on[t] = pipe
        for t in line.writes:
            if self.place(t) == "GM":
                self.wrote_on[t] = pipe
                if t in self.claims:
                    self.claims.discard(t)
                    self.steps[i].effects.append(("claim", t))
        if "Final" in line.call.targs and self.final_matmul is not None:
            self.steps[i].waits = [w for w in self.steps[i].waits if w != ("data", self.final_matmul)]
            self.steps[i].waits.insert(0, ("handoff", self.final_matmul))

    def effect(self, line: Line) -> None:
        """TFREE, TPUSH or ffts_cross_core_sync: on the latest group of its pipe."""
        name = line.op.name
        if name == "ffts_cross_core_sync":
            pipe, effect = PIPES[line.args[0]], ("set", line.args[1])
        else:
            fifo = line.args[0]
            pipe = PIPES[line.args[1]] if len(line.args) > 1 else \
                (self.read_on if name == "TFREE" else self.wrote_on)[fifo]
            effect = ("free" if name == "TFREE" else "push", fifo)
        self.steps[self.last_on[pipe]].effects.append(effect)
        self.close(pipe)

    def flag(self, line: Line) -> None:
        """set_flag / wait_flag: a data hand-off between pipes (an event), or a ping-pong tile given back
        (set) and taken (wait)."""
        src, dst, event = PIPES[line.args[0]], PIPES[line.args[1]], line.args[2]
        if line.op.name == "set_flag":
            if event.startswith("EVENT_ID"):
                self.flags[(src, dst, event)] = self.last_on.get(src)
            else:
                self.steps[self.last_on[src]].effects.append(("release", event))
            self.close(src)
            return
        if event.startswith("EVENT_ID"):
            source = self.flags.pop((src, dst, event), None)
            if source is not None:
                self.waits_for.setdefault(dst, []).append(("data", source))
        else:
            self.waits_for.setdefault(dst, []).append(("slot", event))
        self.close(dst)
