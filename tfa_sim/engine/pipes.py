"""In-order hardware pipes and the instruction groups they execute.

A :class:`Pipe` (MTE2, MTE1, M, FIX on the cube; MTE2, V, MTE3 on a vector
core) executes :class:`Instr` groups strictly in issue order.  An instruction
starts once the pipe is free and all its waits have triggered, in the order
listed — an earlier instruction's completion (an intra-core hand-off), a
buffer :class:`~tfa_sim.buffers.pools.Slot`, a cross-core
:class:`~tfa_sim.buffers.pools.Flag` — then occupies the pipe for its cost in
cycles (one SimPy event at its end).  When it completes, its ``op`` moves or
computes the real tiles (numerics on) and its ``then`` effects release slots
and set flags.  The engine knows no stage by name: stages are labels here.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import simpy

from tfa_sim.buffers.pools import Flag, Pending, Pool, Slot
from tfa_sim.clock.simpy_adapter import Alarm, now
from tfa_sim.engine.gm import MISS, PREFETCHED, GlobalMemory
from tfa_sim.engine.ops import BlockOps
from tfa_sim.rundir.events import CAUSES, EventLog
from tfa_sim.spec.units import parse_unit

#: A completion effect: called with the instruction that completes (a bound method of a buffer).
Effect = Callable[["Instr"], None]


class GmMove:
    """The cost of a GM transfer: ``nbytes`` at the core's path ``rate``, through the shared L2 (and HBM for
    a ``line`` that misses, see :mod:`tfa_sim.engine.gm`), issued as ``chunks`` DMA instructions back to back
    (each pays the access latency)."""

    __slots__ = ("nbytes", "rate", "line", "chunks")

    def __init__(self, nbytes: int, rate: float, line: Hashable | None = None, chunks: int = 1) -> None:
        self.nbytes, self.rate, self.line, self.chunks = nbytes, rate, line, chunks


class StreamWait:
    """A wait of a unit's issue stream (see ``tfa_sim.engine.issue.Wait``), as the instruction issued right
    after it sees it: when the stream began to wait (``since``), when it went on (``granted_at``), the flag
    it blocked on last (``blocker``) and who set each flag it took (``deps``, for the critical path)."""

    __slots__ = ("stage", "since", "granted_at", "blocker", "deps")

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.deps: list[tuple[Any, str, float, str]] = []
        self.reset()

    def reset(self) -> None:
        """Ready for the stream's next wait (a replayed template reuses the object and its list)."""
        self.since = self.granted_at = 0.0
        self.blocker: Any = None
        self.deps.clear()  # copied, never kept, by the instruction that follows the wait (Pipe._stream_stall)

    def granted(self, flag: Flag, grant: Flag | Pending) -> None:
        """One count of ``flag`` was taken; remember who set it."""
        if grant.pred is not None:
            self.deps.append((grant.pred, flag.cause, grant.value, flag.short_name))


class Instr:
    """One instruction group: a TLOAD, a TEXTRACT, a TMATMUL, a fixpipe store, a vector op sequence.

    ``waits`` are Instr (data hand-off), Slot (take a buffer slot) or Flag (a
    cross-core flag) in the order the hardware meets them; ``cost`` is cycles
    or a :class:`GmMove`; ``op`` the data steps (numerics on, else None);
    ``then`` the effects at completion, in order; ``nbytes`` and ``flops`` what it moves and computes, and
    ``work`` (instructions whose work splits over resources of different peaks: a vector op sequence, a
    TEXTRACT) that split as a label (:mod:`tfa_sim.spec.work`), for the roofline.
    """

    __slots__ = ("pipe", "stage", "block", "tile", "sub", "kind", "waits", "cost", "op", "then", "nbytes",
                 "flops", "work", "_done", "waiters", "finished", "start", "end", "id", "deps", "stream_wait")

    def __init__(self, pipe: Pipe, stage: str, block: int, tile: int, sub: int, kind: str, cost: float | GmMove,
                 waits: tuple[Any, ...] = (), op: tuple[Effect, ...] | None = None, then: tuple[Effect, ...] = (),
                 nbytes: int = 0, flops: int = 0, work: str | None = None) -> None:
        self.pipe = pipe
        self.stage, self.block, self.tile, self.sub, self.kind = stage, block, tile, sub, kind
        self.cost = cost
        self.waits = waits
        self.op = op
        self.then = then
        self.nbytes, self.flops, self.work = nbytes, flops, work
        self._done: simpy.Event | None = None
        self.waiters: list[Pipe] | None = None  # pipes blocked on this instruction's completion
        self.finished = False
        self.start = self.end = 0.0
        self.id = -1  # numbered when executed (event log)
        self.deps: list[tuple[Instr, str, float, str]] | None = None  # (predecessor, cause, latency, via) if logging
        self.stream_wait: StreamWait | None = None  # the issue stream's wait right before this instruction

    def reset(self, block: int) -> None:
        """Make the instruction ready to run again, for ``block`` (a replayed program template); its list of
        waiters is emptied and kept, not freed and made again."""
        self.block = block
        self._done = self.deps = None
        if self.waiters is not None:
            self.waiters.clear()
        self.finished = False
        self.id = -1

    @property
    def label(self) -> str:
        """E.g. ``TLOAD K [compute_qk t3 #1]`` (#: sub-tile on the cube, row slice on a vector core)."""
        return f"{self.kind} [{self.stage} t{self.tile} #{self.sub}]"

    @property
    def done(self) -> simpy.Event:
        """Triggers when the instruction completes (created only if somebody has to wait; not for one that
        has completed already)."""
        assert not self.finished, "wait for an instruction only while it has not completed"
        if self._done is None:
            self._done = self.pipe.env.event()
        return self._done


class Stats:
    """Aggregates shared by all pipes of a run: busy cycles, stalls, and the event log."""

    def __init__(self, log_events: bool, stages: Iterable[str] = ()) -> None:
        self.stages = tuple(stages)  # the kernel's stage names, in report order
        self.pipes: list[Pipe] = []
        self.pools: list[Any] = []  # pools / FIFOs with occupancy samples (when logging)
        self.next_id = 0
        self.events: EventLog | None = EventLog() if log_events else None
        self.ops: BlockOps | None = None  # with worker threads (sim.simulation.op_workers): data steps run per block

    @property
    def stalls(self) -> dict[str, dict[str, float]]:
        """Stall cycles per stage and cause (data, slot, credit, gm), summed over pipes."""
        out = {s: dict.fromkeys(CAUSES, 0.0) for s in self.stages}
        for pipe in self.pipes:
            for (stage, cause, _what), cycles in pipe.stall_by.items():
                out.setdefault(stage, dict.fromkeys(CAUSES, 0.0))[cause] += cycles
        return out

    @property
    def busy(self) -> dict[str, float]:
        """Busy cycles per pipe (``coreN.unit.PIPE``)."""
        return {p.full_name: p.busy for p in self.pipes}

    def span(self, unit: str, pipe: str, stage: str, block: int, kind: str, start: float, end: float) -> None:
        """Log work that is not an instruction group of a pipe (a block's dispatch)."""
        if self.events is not None:
            log = self.events
            log.add(self.next_id, log.unit_code(unit), log.pipe_code(pipe), stage, block, -1, 0, kind, start, end, 0, 0)
            self.next_id += 1

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

    def __init__(self, env: simpy.Environment, unit: str, name: str, stats: Stats,
                 gm: GlobalMemory | None = None) -> None:
        self.env = env
        self.gm = gm
        self.line_base: Hashable = None  # whose input lines the block on this core reads (Block.line_base)
        #: a finished instruction keeps its waits (a recorded template replays it); else they are dropped, so
        #: that a long program does not keep every instruction it ran alive through the chain of hand-offs
        self.keep_waits = True
        self.busy = 0.0
        self.executed = 0
        self.stall_by: defaultdict[tuple[str, str, str], float] = defaultdict(float)  # (stage, cause, what)
        self.unit = unit
        self.name = name
        self.full_name = f"{unit}.{name}"
        #: how a stall on this pipe's data reads in the bottleneck report
        self.as_source = f"data from {parse_unit(unit).kind}.{name}"
        self.stats = stats
        self.queue: list[Instr] = []  # issued, not started: queue[head:] (emptied whenever it runs dry)
        self.head = 0
        self.blocked: tuple[Instr, Any] | None = None  # (instruction, the Instr/Slot/Flag it waits on)
        self._running: Instr | None = None
        self._end = 0.0  # when the running instruction completes
        self._alarm = Alarm(env, self._complete)  # the running instruction's end
        self._advancing = False  # re-entry guard: a finishing pipe may call back into this one
        self._pending: Any = None  # the not-yet-triggered wait of the head instruction
        self._wait_index = 0
        self._blocked_since = 0.0
        self.last_end = 0.0  # when the pipe's previous instruction completed
        stats.pipes.append(self)
        self.log = stats.events is not None
        if stats.events is not None:  # the log's codes of this pipe's unit and name
            self._unit_code, self._pipe_code = stats.events.unit_code(unit), stats.events.pipe_code(name)

    @property
    def idle(self) -> bool:
        """Nothing running, nothing queued, nothing waited for."""
        return self._running is None and not self.queue and self.blocked is None

    def issue(self, ins: Instr) -> Instr:
        self.queue.append(ins)
        if self._pending is None and len(self.queue) - self.head == 1:
            self._advance()
        return ins

    def _advance(self, _event: Any = None) -> None:
        """Start head instructions while their waits allow (zero-cost ones complete at once).

        The head's waits are walked in order from the one it last blocked on; the pipe registers on
        the first that has not triggered and returns.  A wait on another instruction is a direct
        hand-off (the finishing pipe calls back at the same cycle); slots and flags call back through
        their Pending.
        """
        if self._running is not None or self._advancing:
            return
        self._advancing = True
        queue, env, log = self.queue, self.env, self.log
        while queue:
            ins = queue[self.head]
            waits = ins.waits
            if waits:
                index = self._wait_index
                if self._pending is not None:
                    if not self._resumed(ins, waits[index]):
                        return
                    index += 1
                for at in range(index, len(waits)):
                    source: Instr | Slot | Pool = waits[at]
                    if isinstance(source, Instr):
                        if not source.finished:
                            self._block_on_instr(ins, source, at)
                            return
                        if log:
                            self._record_dep(ins, source, None)
                        continue
                    grant = source.request(ins)
                    if isinstance(grant, Pending):  # queued: it calls back once granted
                        grant.callback = self._advance
                        self._block(ins, source, grant, at)
                        return
                    if log:
                        self._record_dep(ins, source, grant)
                self._wait_index = 0
            self.head += 1
            if self.head == len(queue):
                queue.clear()
                self.head = 0
            start = ins.start = now(env)
            if ins.stream_wait is not None:
                self._stream_stall(ins, ins.stream_wait)
            cost = ins.cost
            cycles = self._gm_cycles(ins, cost, start) if isinstance(cost, GmMove) else cost
            if cycles > 0:
                self._running = ins
                self._end = start + cycles
                self._alarm.set(start, cycles)
                break
            self._finish(ins, 0, start)
        self._advancing = False

    def _gm_cycles(self, ins: Instr, move: GmMove, start: float) -> float:
        """Cycles of a GM transfer that starts now: the core's path rate through the shared L2 (and HBM for an
        input line read first here, :mod:`tfa_sim.engine.gm`); the time lost to sharing is a ``gm`` stall."""
        line = move.line
        if line is not None and line is not MISS and line is not PREFETCHED:
            line = (self.line_base, line)
        assert self.gm is not None, "a GM transfer on a pipe without GM"
        cycles, gm_wait = self.gm.transfer(start, move.nbytes, move.rate, line, move.chunks)
        if gm_wait > 0:
            self.stall_by[(ins.stage, "gm", "GM bandwidth")] += gm_wait
        return cycles

    def _resumed(self, ins: Instr, source: Any) -> bool:
        """The head was blocked on ``source``: has it triggered?  If so, count the stall and go on."""
        pending = self._pending
        if not (pending.finished if isinstance(pending, Instr) else pending.triggered):
            self._advancing = False  # woken by something else: keep waiting
            return False
        cause, what = ("data", source.pipe.as_source) if isinstance(source, Instr) else \
            (source.cause, source.short_name)
        self.stall_by[(ins.stage, cause, what)] += now(self.env) - self._blocked_since
        self._pending = self.blocked = None
        if self.log:
            self._record_dep(ins, source, None if isinstance(pending, Instr) else pending)
        return True

    def _block_on_instr(self, ins: Instr, source: Instr, index: int) -> None:
        if source.waiters is None:
            source.waiters = [self]
        else:
            source.waiters.append(self)
        self._block(ins, source, source, index)

    def _stream_stall(self, ins: Instr, wait: StreamWait) -> None:
        """The time this pipe sat idle because its unit's issue stream was waiting on a flag."""
        idle = wait.granted_at - max(self.last_end, wait.since)
        if idle > 0:
            flag = wait.blocker
            self.stall_by[(wait.stage, flag.cause, flag.short_name)] += idle
        if self.log:
            ins.deps = [*wait.deps, *(ins.deps or ())]

    def _record_dep(self, ins: Instr, source: Any, granted: Any) -> None:
        """Remember which instruction enabled this wait (for the critical path); ``granted`` carries the
        ``pred`` of a slot or flag grant."""
        deps = ins.deps
        if deps is None:
            deps = ins.deps = []
        if isinstance(source, Instr):
            deps.append((source, "data", 0.0, ""))
        elif granted.pred is not None:
            latency = granted.value if isinstance(source, Flag) else 0.0  # a set's delay; a slot has none
            deps.append((granted.pred, source.cause, latency, source.short_name))

    def _block(self, ins: Instr, source: Any, pending: Any, index: int) -> None:
        self._pending, self._wait_index = pending, index
        self._blocked_since = now(self.env)
        self.blocked = (ins, source)
        self._advancing = False

    def _complete(self, _event: Any) -> None:
        ins = self._running
        assert ins is not None
        self._advancing = True
        self._running = None
        self._finish(ins, self._end - ins.start, self._end)  # the alarm's cycle: the clock reads it now
        self._advancing = False
        self._advance()

    def _finish(self, ins: Instr, cycles: float, end: float) -> None:
        stats = self.stats
        ins.end = self.last_end = end
        self.executed += 1
        self.busy += cycles
        if self.log:
            # numbered before its effects run: instructions they finish record this one as a dependency
            ins.id = stats.next_id
            stats.next_id += 1
        if ins.op is not None:
            if stats.ops is not None:
                stats.ops.add(ins)  # run with its block's steps on a worker (engine/ops.py)
            else:
                for step in ins.op:
                    step(ins)
        for effect in ins.then:
            effect(ins)
        ins.finished = True
        if ins._done is not None:
            ins._done.succeed()
        if self.log:
            self._log(ins)
        if not self.keep_waits:
            ins.waits, ins.then, ins.deps, ins.stream_wait = (), (), None, None
        if ins.waiters:
            for pipe in ins.waiters:
                pipe._advance()

    def _log(self, ins: Instr) -> None:
        """Append the finished instruction, its slots and its dependencies to the columnar event log."""
        log = self.stats.events
        assert log is not None
        ident = ins.id
        log.add(ident, self._unit_code, self._pipe_code, ins.stage, ins.block, ins.tile, ins.sub, ins.kind,
                ins.start, ins.end, ins.nbytes, ins.flops)
        for w in ins.waits:
            if isinstance(w, Slot):
                log.slot(ident, w.pool.short_name, w.index)
        if ins.deps:
            log.edges_to(ident, ins.deps)
        if ins.work:  # a vector sequence without ops (GU's first tile) has none
            log.work_of(ident, ins.work)

    def waiting_on(self) -> tuple[Instr, str, Any] | None:
        """(blocked instruction, what it waits for, the pipe that would signal it), or None."""
        if self.blocked is None:
            return None
        ins, source = self.blocked
        if isinstance(source, Slot):
            pool = source.pool
            return ins, pool.name + pool.holder_label(source.want), pool.owner_pipe
        if isinstance(source, Pool):
            return ins, source.name, source.owner_pipe
        return ins, f"{source.label} ({source.pipe.full_name})", source.pipe
