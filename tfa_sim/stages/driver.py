"""A stage call's listing issued: its steps (:mod:`tfa_sim.listings.program`) as the unit's flag waits and
instruction groups, each with its cost by instruction class, its waits, its data steps and its completion effects.

The stage module says what the listing's names are in this call (:class:`Bind`: where a tile lives, its shape,
its data, its ping-pong slot, a FIFO tile or a flag) and what its vector and matmul groups compute; everything
else follows from the lines: which pipe, in what order, waiting for what, priced how.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from tfa_sim.buffers.data import Const, Move
from tfa_sim.engine.issue import Program
from tfa_sim.engine.pipes import Effect, GmMove, Instr
from tfa_sim.listings.program import PATHS, Step
from tfa_sim.listings.resolve import is_barrier
from tfa_sim.listings.syntax import DTYPES, ConstDecl
from tfa_sim.spec import work
from tfa_sim.spec.costs import Group, VectorOp
from tfa_sim.stages.handoffs import matmul, store
from tfa_sim.stages.site import Site


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
    not bind), else the ``listing``'s own tiles and constants on the call's ``dims`` (:func:`scratch_bind`, by
    base name)."""

    def __init__(self, make: Callable[[str], Bind | None], listing: Any, dims: dict[str, int]) -> None:
        self.made: dict[str, Bind] = {}
        self.make, self.listing, self.dims = make, listing, dims

    def __getitem__(self, name: str) -> Bind:
        bind = self.made.get(name)
        if bind is None:
            bind = self.make(name)
            if bind is None:
                bind = self.listing.scratch(self.dims, scratch_bind)[name.split("[", 1)[0]]
            self.made[name] = bind
        return bind

    def __delitem__(self, name: str) -> None:
        """Forget ``name``'s binding: the next use makes another (a ping-pong tile taken again)."""
        del self.made[name]


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
            flags = [f for name, tile in step.flag_waits for f in _flags(name, binds[tile])]
            if flags:
                yield site.wait(flags)
            continue
        for ref in step.takes:
            if ref in taken:
                del binds[ref]
            taken.add(ref)
        waits = tuple([_wait(kind, ref, done, binds, site) for kind, ref in step.issue_waits])
        then = _effects(step, binds)
        pipe = site.pipe[step.pipe]
        if not step.instructions:  # a mark (on PIPE_V, a point the stage's math may run at)
            before = site.previous(pipe)
            if before is not None and not waits:  # ordered after its pipe's work: the task graph's edge
                waits = (before,)
            op = compute(step, binds) if compute is not None and step.pipe == "V" else None
            ins = yield site.instr(t, sub, pipe, step.kind, 0.0, waits, op, then, 0, 0, None)
        elif step.pipe == "V":
            cost, label = _vector(site, step, binds, shape)
            op = compute(step, binds) if compute is not None and cost else None
            ins = yield site.instr(t, sub, pipe, step.kind, cost, waits, op, then, 0, 0, label)
        elif step.pipe == "MTE1":
            ins = yield _extract(site, t, sub, pipe, step, binds, waits, then, compute is not None)
        elif step.pipe == "M":
            acc, a = binds[step.dsts[0]], binds[step.srcs[-2]]
            op = compute(step, binds) if compute is not None else None
            ins = yield from matmul(site, t, sub, pipe, acc.rows, acc.cols, a.cols, acc.cube_k, step.final, waits, op,
                                    then, 2 * acc.rows * acc.cols * a.cols)
        elif step.handoff >= 0 and isinstance(done[step.handoff], tuple):  # a TSTORE<Final> behind its matmul
            srcs, nbytes, kind, op = _transfer(step, binds, compute is not None, extra)
            ins = yield from store(site, t, sub, pipe, kind, nbytes, site.costs.fractals(srcs[0].rows, srcs[0].cols),
                                   done[step.handoff], waits, op, then)
        else:
            ins = yield _dma(site, t, sub, pipe, step, binds, waits, then, compute is not None, extra)
        done[i] = ins
        last = ins[1] if isinstance(ins, tuple) else ins
        for tile in step.carries:
            site.carried[tile] = last
    return last


def _flags(name: str, bind: Bind) -> Sequence[Any]:
    """The flags one scalar wait line (``name`` on ``bind``) takes: a FIFO tile's ready flags (TPOP) or credits
    (TALLOC), the credits nobody waited for (TDRAIN), a cross-core flag (``wait_flag_dev``)."""
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
             then: tuple[Effect, ...], data: bool) -> Instr:
    """TEXTRACTs in a row: one MTE1 group of their bytes to L0A and to L0B."""
    a = b = 0
    moves: list[Effect] = []
    for dst_name, src_name in step.moves:
        dst, src = binds[dst_name], binds[src_name]
        if dst.where == "L0A":
            a += src.nbytes
        else:
            b += src.nbytes
        if data:
            moves.append(Move(src.location, dst.location))
    op = tuple(moves) if data else None
    return site.instr(t, sub, pipe, "TEXTRACT", site.costs.extract(a, b), waits, op, then, a + b, 0,
                      work.extract(a, b))


def _transfer(step: Step, binds: Binds, data: bool, extra: Extra | None
              ) -> tuple[list[Bind], int, str, tuple[Effect, ...] | None]:
    """A TLOAD's or TSTORE's sources, the bytes of its GM side (nothing moves from a constant), its timeline name
    and its data steps."""
    load = step.name == "TLOAD"
    dsts, srcs = [binds[t] for t in step.dsts], [binds[t] for t in step.srcs]
    gm = srcs[0] if load else dsts[0]
    near = dsts if load else srcs
    nbytes = 0 if any(b.where == "const" for b in near) else (gm.nbytes if load else sum(b.nbytes for b in srcs))
    op: tuple[Effect, ...] | None = None
    if data and gm.nbytes:  # a slice of no rows moves nothing
        pairs = [(gm.location, d.location) for d in dsts] if load else \
            list(zip((s.location for s in srcs), gm.location if len(srcs) > 1 else (gm.location,)))
        op = tuple(Move(a, b) for a, b in pairs if a is not None and b is not None)  # (no data: the stage reads
        op += extra(step, binds) if extra is not None else ()  # its inputs itself, the combine its partials)
    return srcs, nbytes, gm.load if load else gm.store, op


def _dma(site: Site, t: int, sub: int, pipe: Any, step: Step, binds: Binds, waits: tuple[Any, ...],
         then: tuple[Effect, ...], data: bool, extra: Extra | None) -> Instr:
    """A TLOAD or TSTORE: the bytes of its GM side on its path through the L2."""
    srcs, nbytes, kind, op = _transfer(step, binds, data, extra)
    cost: float | GmMove = 0.0
    if nbytes:
        load = step.name == "TLOAD"
        gm, near = (srcs[0], binds[step.dsts[0]]) if load else (binds[step.dsts[0]], srcs[0])
        path = PATHS[(gm.where, near.where) if load else (near.where, gm.where)][0]
        cost = site.gm_move(nbytes, path, gm.line, gm.chunks)
    return site.instr(t, sub, pipe, kind, cost, waits, op, then, nbytes, 0, None)


def scratch_bind(decl: Any, dims: Mapping[str, int]) -> Bind:
    """How the listing's own tiles are bound: UB tiles of their declared shape; its constants as numbers."""
    if isinstance(decl, ConstDecl):
        return Bind("const", location=Const(np.float32(decl.value)))
    rows, cols = (int(e.value(dict(dims))) for e in decl.shape)
    return Bind("UB", rows, cols, DTYPES[decl.dtype])
