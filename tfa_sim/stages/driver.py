"""A stage call's listing issued: its steps (:mod:`tfa_sim.listings.program`) as the unit's flag waits and
instruction groups, each with its cost by instruction class, its waits, its data steps and its completion effects.

The stage module says what the listing's names are in this call (:class:`Bind`: where a tile lives, its shape,
its data, its ping-pong slot, a FIFO tile or a flag) and what its vector and matmul groups compute; everything
else follows from the lines: which pipe, in what order, waiting for what, priced how.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from tfa_sim.buffers.data import Const, Move
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, GmMove, Instr
from tfa_sim.listings.program import PATHS, Step
from tfa_sim.listings.resolve import Line, is_barrier
from tfa_sim.listings.syntax import DTYPES, ConstDecl
from tfa_sim.spec import work
from tfa_sim.spec.costs import Costs, Group, VectorOp
from tfa_sim.stages.handoffs import matmul, store

#: Each run's priced vector groups, by the group and its tiles' shapes (a run issues a few shapes many times).
VECTOR_MEMO: weakref.WeakKeyDictionary[Costs, dict[Any, tuple[float, str | None]]] = weakref.WeakKeyDictionary()


class Bind:
    """What one name of the listing is in this call: ``where`` it lives and its ``shape`` and element size (a
    tile), its data (``location``, numerics on), its ping-pong ``slot``, the L2 ``line`` and DMA ``chunks`` of a
    GM tile and the timeline's name of a load from it and a store to it (``load``, ``store``), a FIFO tile
    (``fifo``) or cross-core ``flags``, effects when a group reads or writes it (``on_read``, ``on_write``: the
    ``l1_exp_max`` ring), an accumulator's CubeK (``cube_k``)."""

    __slots__ = ("where", "rows", "cols", "itemsize", "location", "slot", "line", "chunks", "load", "store", "fifo",
                 "flags", "drain", "on_read", "on_write", "cube_k")

    def __init__(self, where: str, rows: int = 0, cols: int = 0, itemsize: int = 4, location: Any = None,
                 slot: Any = None, line: Hashable | None = None, chunks: int = 1, load: str = "", store: str = "",
                 fifo: Any = None, flags: Sequence[Any] = (), drain: Sequence[Any] = (),
                 on_read: tuple[Effect, ...] = (), on_write: tuple[Effect, ...] = (), cube_k: int = 0) -> None:
        self.where, self.rows, self.cols, self.itemsize = where, rows, cols, itemsize
        self.location = slot if location is None and slot is not None else location
        self.slot, self.line, self.chunks, self.load, self.store = slot, line, chunks, load, store
        self.fifo, self.flags, self.drain, self.on_read, self.on_write = fifo, flags, drain, on_read, on_write
        self.cube_k = cube_k

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.itemsize


class Binds:
    """The call's names, each made when the listing first uses it (a ping-pong slot is taken in the order the
    listing meets its buffers, as the kernel's counters run): ``make(name)`` the stage's (None for a name it does
    not bind), else ``scratch``: the listing's own tiles and constants (:func:`scratch_bind`, by base name)."""

    def __init__(self, make: Callable[[str], Bind | None], scratch: dict[str, Bind]) -> None:
        self.made: dict[str, Bind] = {}
        self.make, self.scratch = make, scratch

    def __getitem__(self, name: str) -> Bind:
        bind = self.made.get(name)
        if bind is None:
            bind = self.make(name)
            if bind is None:
                bind = self.scratch[name.split("[", 1)[0]]
            self.made[name] = bind
        return bind

    def __delitem__(self, name: str) -> None:
        """Forget ``name``'s binding: the next use makes another (a ping-pong tile taken again)."""
        del self.made[name]


class Site:
    """Where a stage's calls issue on one unit: the stage, the unit's pipes, how an instruction is made there
    (``instr(t, sub, pipe, kind, cost, waits, op, then, nbytes, flops, work)``) and a wait (``wait(flags)``), the
    run's costs and GM moves, and ``previous(pipe)``: the pipe's latest instruction of the unit, which a ``mark``
    with nothing else to wait for is ordered after (the pipe is in order; the task graph needs the edge).  Made
    once per unit and stage (:meth:`BlockKernel.site`)."""

    def __init__(self, stage: str, pipes: Any, instr: Callable[..., Instr], wait: Callable[[Sequence[Any]], Any],
                 costs: Costs, gm_move: Callable[[int, str, Hashable | None, int], GmMove],
                 previous: Callable[[Any], Instr | None] | None = None) -> None:
        self.stage, self.pipes, self.instr, self.wait, self.costs, self.gm_move = stage, pipes, instr, wait, costs, \
            gm_move
        self.previous = previous  # a pipe → its latest instruction of the unit (a mark is ordered after it)
        self.priced: dict[Any, tuple[float, str | None]] = VECTOR_MEMO.setdefault(costs, {})
        self.carried: dict[str, Instr] = {}  # a carried tile → the instruction that wrote it (the block's Q load)


#: What the stage's groups compute (numerics on): ``compute(step, binds)`` → the data steps of a vector or matmul
#: group (None: none), ``extra(step, binds)`` → steps a DMA adds to its moves (a dump).
Compute = Callable[[Step, Binds], "tuple[Effect, ...] | None"]
Extra = Callable[[Step, Binds], "tuple[Effect, ...]"]


def issue(site: Site, steps: tuple[Step, ...], binds: Binds, t: int, sub: int, shape: tuple[int, ...],
          compute: Compute | None = None, extra: Extra | None = None) -> Program:
    """Issue one call's ``steps`` as tile ``t``, sub-tile or slice ``sub``; ``shape``: the call's dimensions (its
    vector groups are priced once per shape); ``compute``, ``extra``: numerics on.  Returns the instruction of
    the call's last group, or None."""
    done: list[Any] = [None] * len(steps)  # per step: its instruction, or (head, last) of a split matmul
    last: Instr | None = None
    taken: set[str] = set()  # ping-pong tiles taken in this call: taking one again takes another slot
    for i, step in enumerate(steps):
        if not step.pipe:  # the scalar unit's flag wait
            flags = [f for line in step.lines for f in _flags(line, binds)]
            if flags:
                yield site.wait(flags)
            continue
        for ref in step.takes:
            if ref in taken:
                del binds[ref]
            taken.add(ref)
        waits = tuple(_wait(kind, ref, done, binds, site) for kind, ref in step.waits if kind != "handoff")
        then = _effects(step, binds)
        pipe = getattr(site.pipes, step.pipe)
        if not step.instructions:  # a mark (on PIPE_V, a point the stage's math may run at)
            before = site.previous(pipe) if site.previous is not None else None
            if before is not None and not waits:  # ordered after its pipe's work: the task graph's edge
                waits = (before,)
            op = compute(step, binds) if compute is not None and step.pipe == "V" else None
            ins = yield site.instr(t, sub, pipe, step.kind, 0.0, waits, op, then, 0, 0, None)
        elif step.pipe == "V":
            cost, label = _vector(site, step, binds, shape)
            op = compute(step, binds) if compute is not None and cost else None
            ins = yield site.instr(t, sub, pipe, step.kind, cost, waits, op, then, 0, 0, label)
        elif step.pipe == "MTE1":
            ins = yield from _extract(site, t, sub, pipe, step, binds, waits, then, compute is not None)
        elif step.pipe == "M":
            line = step.instructions[0]
            acc, a, b = (binds[name] for name in (line.writes[0], *line.reads[-2:]))
            op = compute(step, binds) if compute is not None else None
            ins = yield from matmul(partial(site.instr, t, sub, pipe), site.costs, acc.rows, acc.cols, a.cols,
                                    acc.cube_k, "Final" in line.call.targs, waits, op, then, 2 * acc.rows * acc.cols
                                    * a.cols)
        else:
            ins = yield from _dma(site, t, sub, pipe, step, binds, waits, then, done, compute is not None, extra)
        done[i] = ins
        last = ins[1] if isinstance(ins, tuple) else ins
        for tile in step.carries:
            site.carried[tile] = last
    return last


def _flags(line: Line, binds: Binds) -> Sequence[Any]:
    """The flags one scalar wait line takes: a FIFO tile's ready flags (TPOP) or credits (TALLOC), the credits
    nobody waited for (TDRAIN), a cross-core flag (``wait_flag_dev``)."""
    bind = binds[line.args[0]]
    name = line.op.name
    if name == "TPOP":
        return bind.fifo.ready
    if name == "TALLOC":
        return bind.fifo.credits
    return bind.drain if name == "TDRAIN" else bind.flags


def _wait(kind: str, ref: Any, done: list[Any], binds: Binds, site: Site) -> Any:
    if kind == "slot":
        return binds[ref].slot
    if kind == "carried":
        return site.carried[ref]
    ins = done[ref]
    return ins[1] if isinstance(ins, tuple) else ins


def _effects(step: Step, binds: Binds) -> tuple[Effect, ...]:
    """The group's completion effects in their order (:data:`tfa_sim.listings.program.EFFECT_ORDER`)."""
    effects: list[Effect] = []
    for kind, name in step.ordered:
        bind = binds[name]
        if kind == "release":
            effects.append(bind.slot.release)
        elif kind == "ring_read":
            effects += bind.on_read
        elif kind == "ring_write":
            effects += bind.on_write
        elif kind == "claim":
            effects.append(bind.fifo.claim)
        elif kind == "free":
            tile = bind.fifo
            effects += (tile.free, tile.credit) if tile.notifies else (tile.free,)
        elif kind == "push":
            effects.append(bind.fifo.push)
        else:
            effects += [flag.set for flag in bind.flags]
    return tuple(effects)


def vector_ops(step: Step, binds: Binds) -> tuple[Group, ...]:
    """The group's vector instructions as :class:`~tfa_sim.spec.costs.VectorOp` between its barriers: each on its
    destination's shape (a row reduction on its source's), of the widest element among its tiles."""
    groups: list[Group] = []
    group: list[VectorOp] = []
    for line in step.lines:
        if is_barrier(line, "V"):
            groups.append(tuple(group))
            group = []
            continue
        op = line.op
        tiles = [binds[t] for t in line.reads + line.writes if binds[t].where != "const"]
        shape = binds[line.reads[0] if op.form == "reduce" else line.writes[0]]
        group.append(VectorOp(op.name, op.cls, shape.rows, shape.cols, max(t.itemsize for t in tiles), op.form))
    return (*groups, tuple(group)) if group else tuple(groups)


def _vector(site: Site, step: Step, binds: Binds, shape: tuple[int, ...]) -> tuple[float, str | None]:
    """(cycles, work label) of a vector group, priced once per call shape; nothing on a slice with no rows."""
    key = (id(step), shape)
    priced = site.priced.get(key)
    if priced is None:
        groups = vector_ops(step, binds)
        if any(op.rows * op.cols == 0 for g in groups for op in g):
            priced = (0.0, None)
        else:
            priced = (site.costs.vector_memo(groups), work.vector_label(site.costs, groups) or None)
        site.priced[key] = priced
    return priced


def _extract(site: Site, t: int, sub: int, pipe: Any, step: Step, binds: Binds, waits: tuple[Any, ...],
             then: tuple[Effect, ...], data: bool) -> Program:
    """TEXTRACTs in a row: one MTE1 group of their bytes to L0A and to L0B."""
    to = {"L0A": 0, "L0B": 0}
    moves: list[Effect] = []
    for line in step.instructions:
        dst, src = binds[line.writes[0]], binds[line.reads[0]]
        to[dst.where] += src.nbytes
        moves.append(Move(src.location, dst.location))
    op = tuple(moves) if data else None
    a, b = to["L0A"], to["L0B"]
    cost = site.costs.extract(a, b)
    ins = yield site.instr(t, sub, pipe, "TEXTRACT", cost, waits, op, then, a + b, 0, work.extract(a, b))
    return ins


def _dma(site: Site, t: int, sub: int, pipe: Any, step: Step, binds: Binds, waits: tuple[Any, ...],
         then: tuple[Effect, ...], done: list[Any], data: bool, extra: Extra | None) -> Program:
    """A TLOAD or TSTORE: the bytes of its GM side on its path through the L2 (nothing moves from a constant)."""
    line = step.instructions[0]
    load = line.name == "TLOAD"
    dsts, srcs = [binds[t] for t in line.writes], [binds[t] for t in line.reads]
    gm = srcs[0] if load else dsts[0]
    near = dsts if load else srcs
    nbytes = 0 if any(b.where == "const" for b in near) else (gm.nbytes if load else sum(b.nbytes for b in srcs))
    kind = gm.load if load else gm.store
    op: tuple[Effect, ...] | None = None
    if data and gm.nbytes:  # a slice of no rows moves nothing
        pairs = [(gm.location, d.location) for d in dsts] if load else \
            list(zip((s.location for s in srcs), gm.location if len(srcs) > 1 else (gm.location,)))
        op = tuple(Move(a, b) for a, b in pairs if a is not None and b is not None)  # (no data: the stage reads
        op += extra(step, binds) if extra is not None else ()  # its inputs itself, the combine its partials)
    handoff = next((ref for kind_, ref in step.waits if kind_ == "handoff"), None)
    if handoff is not None and isinstance(done[handoff], tuple):
        head, last = done[handoff]
        acc = srcs[0]
        ins = yield from store(partial(site.instr, t, sub, pipe), site.gm_move, kind, nbytes,
                               site.costs.fractals(acc.rows, acc.cols), (head, last), waits, op, then)
        return ins
    cost: float | GmMove = 0.0
    if nbytes:
        path = PATHS[(gm.where, near[0].where) if load else (near[0].where, gm.where)][0]
        cost = site.gm_move(nbytes, path, gm.line, gm.chunks)
    ins = yield site.instr(t, sub, pipe, kind, cost, waits, op, then, nbytes, 0, None)
    return ins


def scratch_bind(decl: Any, dims: Mapping[str, int]) -> Bind:
    """How the listing's own tiles are bound: UB tiles of their declared shape; its constants as numbers."""
    if isinstance(decl, ConstDecl):
        return Bind("const", location=Const(np.float32(decl.value)))
    rows, cols = (int(e.value(dict(dims))) for e in decl.shape)
    return Bind("UB", rows, cols, DTYPES[decl.dtype])
