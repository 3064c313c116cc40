"""In-order hardware pipes and the instruction groups they execute.

A :class:`Pipe` (MTE2, MTE1, M, FIX on the cube; MTE2, V, MTE3 on a vector
core) executes :class:`Instr` groups strictly in issue order.  An instruction
starts once the pipe is free and all its waits have triggered — earlier
instructions' completion (a hand-off flag), a buffer slot, a cross-core flag
— then occupies the pipe for its cost in cycles (one SimPy event at its end).
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Callable, NamedTuple

import simpy

from tfa_sim.buffers.slots import Granted, PingPong, Pool

FINISHED = Granted(None)

#: Why a pipe waited before an instruction could start (stall breakdown keys).
CAUSES = ("data", "slot", "credit", "gm")
STAGES = ("compute_qk", "compute_p", "compute_pv", "compute_gu", "epilogue")


class Instr:
    """One instruction group: a TLOAD, a TEXTRACT, a TMATMUL, a fixpipe store, a vector op sequence."""

    __slots__ = ("stage", "block", "tile", "sub", "kind", "waits", "cost", "action", "after", "_done",
                 "waiters", "finished", "pipe", "slots", "nbytes", "flops", "start", "end", "id", "deps")

    def __init__(self, stage: str, block: int, tile: int, sub: int, kind: str,
                 waits: list[tuple[str, Any, str | None]], cost: float | GmMove,
                 action: Callable[[Instr], None] | None = None, after: list[Callable[[Instr], None]] | None = None,
                 nbytes: int = 0, flops: int = 0) -> None:
        self.stage, self.block, self.tile, self.sub, self.kind = stage, block, tile, sub, kind
        self.waits = waits  # (cause, Instr | Pool, key for the granted slot or None)
        self.cost = cost
        self.action = action
        self.after = after or []
        self._done: simpy.Event | None = None
        self.waiters: list[Pipe] | None = None  # pipes blocked on this instruction's completion
        self.finished = False
        self.pipe: Pipe | None = None
        self.slots: dict[str, int] = {}
        self.nbytes, self.flops = nbytes, flops
        self.start = self.end = 0.0
        self.id = -1  # numbered when executed (event log)
        self.deps: list[tuple[Instr, str, float, str]] | None = None  # (predecessor, cause, latency, via) if logging

    @property
    def label(self) -> str:
        """E.g. ``TLOAD K [compute_qk t3 #1]`` (#: sub-tile on the cube, row slice on a vector core)."""
        return f"{self.kind} [{self.stage} t{self.tile} #{self.sub}]"

    @property
    def done(self) -> simpy.Event | Granted:
        """Triggers when the instruction has completed (created only if somebody has to wait)."""
        if self.finished:
            return FINISHED
        if self._done is None:
            self._done = self.pipe.env.event()
        return self._done


class _Done(simpy.Event):
    """The end of an instruction's occupancy: a bare event with one callback (cheaper than a Timeout)."""

    def __init__(self, env: simpy.Environment, callback: Callable[[Any], None]) -> None:
        self.env = env
        self.callbacks = [callback]
        self._value = None
        self._ok = True


class GmMove:
    """The cost of a GM transfer: ``nbytes`` at the core's path ``rate``, through the shared GM."""

    __slots__ = ("nbytes", "rate")

    def __init__(self, nbytes: int, rate: float) -> None:
        self.nbytes, self.rate = nbytes, rate


class Record(NamedTuple):
    """One executed instruction group in the event log (times in cycles)."""

    id: int
    unit: str  # coreN.cubecore0 | coreN.veccoreA
    pipe: str
    stage: str
    block: int
    tile: int
    sub: int  # sub-tile (cube) or row slice (vector)
    kind: str
    start: float
    end: float
    nbytes: int
    flops: int
    slots: dict[str, int]
    deps: tuple[tuple[int, str, float, str], ...]  # (predecessor id, data|slot|credit, latency, via flag/slot)


class Stats:
    """Aggregates shared by all pipes of a run: busy cycles, stalls, and the event log."""

    def __init__(self, log_events: bool) -> None:
        self.pipes: list[Pipe] = []
        self.pools: list[Any] = []  # PingPong / GmFifo objects with occupancy samples (when logging)
        self.next_id = 0
        self.events: list[Record] | None = [] if log_events else None

    @property
    def stalls(self) -> dict[str, dict[str, float]]:
        """Stall cycles per stage and cause (data, slot, credit, gm), summed over pipes."""
        out = {s: dict.fromkeys(CAUSES, 0.0) for s in STAGES}
        for pipe in self.pipes:
            for (stage, cause, _what), cycles in pipe.stall_by.items():
                out[stage][cause] += cycles
        return out

    @property
    def busy(self) -> dict[str, float]:
        """Busy cycles per pipe (``coreN.unit.PIPE``)."""
        return {p.full_name: p.busy for p in self.pipes}

    @property
    def instructions(self) -> int:
        return sum(p.executed for p in self.pipes)


class Pipe:
    """One in-order pipe of one core.

    Driven by callbacks rather than a generator process: the pipe looks at the
    head of its queue, registers itself on the first wait that has not yet
    triggered, and otherwise schedules one event for the end of the
    instruction.  Callbacks let a finishing instruction hand off to a waiting
    pipe in the same cycle without a SimPy event, which large timing-only runs
    need to stay fast.
    """

    def __init__(self, env: simpy.Environment, unit: str, name: str, stats: Stats, gm: Any = None) -> None:
        self.env = env
        self.gm = gm
        self.busy = 0.0
        self.executed = 0
        self.stall_by: defaultdict[tuple[str, str, str], float] = defaultdict(float)  # (stage, cause, what)
        self.unit = unit
        self.name = name
        self.full_name = f"{unit}.{name}"
        #: how a stall on this pipe's data reads in the bottleneck report
        self.as_source = f"data from {'cube' if '.cubecore' in unit else 'vec'}.{name}"
        self.stats = stats
        self.queue: deque[Instr] = deque()
        self.blocked: tuple[Instr, Any] | None = None  # (instruction, the Instr or Pool it waits on)
        self._running: Instr | None = None
        self._advancing = False  # re-entry guard: a finishing pipe may call back into this one
        self._pending: Any = None  # the not-yet-triggered wait of the head instruction
        self._wait_index = 0
        self._blocked_since = 0.0
        stats.pipes.append(self)
        self.log = stats.events is not None

    def issue(self, ins: Instr) -> Instr:
        ins.pipe = self
        self.queue.append(ins)
        if self._pending is None and len(self.queue) == 1:
            self._advance()
        return ins

    def _advance(self, _event: Any = None) -> None:
        """Start the head instruction if its waits allow; otherwise wait on the first that does not.

        A wait on another instruction is a direct hand-off (the finishing pipe calls
        back at the same cycle); slots and flags are SimPy events.
        """
        if self._running is not None or self._advancing:
            return
        self._advancing = True
        queue, env = self.queue, self.env
        while queue:
            ins = queue[0]
            waits = ins.waits
            index = self._wait_index
            while index < len(waits):
                cause, source, key = waits[index]
                pending = self._pending
                if pending is None:
                    if source.__class__ is Instr:
                        if not source.finished:
                            if source.waiters is None:
                                source.waiters = [self]
                            else:
                                source.waiters.append(self)
                            self._block(ins, source, source, index)
                            return
                        value = ev = None
                    else:
                        ev = source.request(ins)
                        if not ev.triggered:
                            ev.callbacks.append(self._advance)
                            self._block(ins, source, ev, index)
                            return
                        value = ev.value
                else:
                    if pending.__class__ is Instr:
                        if not pending.finished:
                            self._advancing = False
                            return
                        value = None
                    else:
                        if not pending.triggered:
                            self._advancing = False
                            return
                        value = pending.value
                    waited = env._now - self._blocked_since
                    what = source.pipe.as_source if source.__class__ is Instr else source.short_name
                    self.stall_by[(ins.stage, cause, what)] += waited
                    self._pending = self.blocked = None
                if key is not None:
                    ins.slots[key] = value
                if self.log:
                    self._record_dep(ins, cause, source, pending if pending is not None else ev)
                index += 1
            self._wait_index = 0
            queue.popleft()
            now = ins.start = env._now
            cost = ins.cost
            if cost.__class__ is GmMove:
                cycles, gm_wait = self.gm.transfer(now, cost.nbytes, cost.rate)
                if gm_wait > 0:
                    self.stall_by[(ins.stage, "gm", "GM bandwidth")] += gm_wait
            else:
                cycles = cost
            if cycles > 0:
                self._running = ins
                env.schedule(_Done(env, self._complete), delay=cycles)
                break
            self._finish(ins, 0)
        self._advancing = False

    def _record_dep(self, ins: Instr, cause: str, source: Any, granted: Any) -> None:
        """Remember which instruction enabled this wait (for the critical path)."""
        if ins.deps is None:
            ins.deps = []
        if source.__class__ is Instr:
            ins.deps.append((source, cause, 0.0, ""))
            return
        if granted.pred is not None:
            ins.deps.append((granted.pred, cause, getattr(source, "latency", 0.0), source.short_name))

    def _block(self, ins: Instr, source: Any, pending: Any, index: int) -> None:
        self._pending, self._wait_index = pending, index
        self._blocked_since = self.env._now
        self.blocked = (ins, source)
        self._advancing = False

    def _complete(self, _event: Any) -> None:
        ins = self._running
        self._advancing = True
        self._running = None
        self._finish(ins, self.env._now - ins.start)
        self._advancing = False
        self._advance()

    def _finish(self, ins: Instr, cycles: float) -> None:
        stats = self.stats
        ins.end = self.env._now
        self.executed += 1
        self.busy += cycles
        if ins.action is not None:
            ins.action(ins)
        for fn in ins.after:
            fn(ins)
        ins.finished = True
        if ins._done is not None:
            ins._done.succeed()
        if self.log:
            ins.id = stats.next_id
            stats.next_id += 1
            stats.events.append(Record(ins.id, self.unit, self.name, ins.stage, ins.block, ins.tile, ins.sub,
                                       ins.kind, ins.start, ins.end, ins.nbytes, ins.flops, dict(ins.slots),
                                       tuple((d.id, cause, lat, via) for d, cause, lat, via in ins.deps or ())))
        if ins.waiters is not None:
            for pipe in ins.waiters:
                pipe._advance()

    def waiting_on(self) -> tuple[Instr, str, Any] | None:
        """(blocked instruction, what it waits for, the pipe that would signal it), or None."""
        if self.blocked is None:
            return None
        ins, source = self.blocked
        if isinstance(source, PingPong):
            holder = source.holder[source.next]
            held = f" (slot {source.next} held by {holder.label})" if isinstance(holder, Instr) else ""
            return ins, source.name + held, source.owner_pipe
        if isinstance(source, Pool):
            return ins, source.name, source.owner_pipe
        return ins, f"{source.label} ({source.pipe.full_name})", source.pipe
