"""In-order hardware pipes and the instruction groups they execute.

A :class:`Pipe` (MTE2, MTE1, M, FIX on the cube; MTE2, V, MTE3 on a vector
core) executes :class:`Instr` groups strictly in issue order.  An instruction
starts once the pipe is free and all its waits have triggered — earlier
instructions' completion (a hand-off flag), a buffer slot, a cross-core flag
— then occupies the pipe for its cost in cycles.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

import simpy

from tfa_sim.buffers.slots import Pool

#: Why a pipe waited before an instruction could start (stall breakdown keys).
CAUSES = ("data", "slot", "credit", "gm")


class Instr:
    """One instruction group: a TLOAD, a TEXTRACT, a TMATMUL, a fixpipe store, a vector op sequence."""

    __slots__ = ("stage", "block", "tile", "sub", "label", "waits", "cost", "action", "after", "done",
                 "pipe", "slots", "nbytes", "flops", "start", "end")

    def __init__(self, stage: str, block: int, tile: int, sub: int, label: str,
                 waits: list[tuple[str, Any, str | None]], cost: float | Callable[[float], tuple[float, float]],
                 action: Callable[[Instr], None] | None = None, after: list[Callable[[Instr], None]] | None = None,
                 nbytes: int = 0, flops: int = 0) -> None:
        self.stage, self.block, self.tile, self.sub, self.label = stage, block, tile, sub, label
        self.waits = waits  # (cause, Instr | Pool, key for the granted slot or None)
        self.cost = cost
        self.action = action
        self.after = after or []
        self.done: simpy.Event | None = None
        self.pipe: Pipe | None = None
        self.slots: dict[str, int] = {}
        self.nbytes, self.flops = nbytes, flops
        self.start = self.end = 0.0


class Stats:
    """Aggregates shared by all pipes of a run: busy cycles, stalls, and the event log."""

    def __init__(self, log_events: bool) -> None:
        self.busy: dict[str, float] = {}
        self.stalls: dict[str, dict[str, float]] = {}
        self.events: list[tuple] | None = [] if log_events else None

    def stall(self, stage: str, cause: str, cycles: float) -> None:
        per = self.stalls.setdefault(stage, dict.fromkeys(CAUSES, 0.0))
        per[cause] += cycles


class Pipe:
    """One in-order pipe of one core; a SimPy process drains its instruction queue."""

    def __init__(self, env: simpy.Environment, unit: str, name: str, stats: Stats) -> None:
        self.env = env
        self.unit = unit
        self.name = name
        self.full_name = f"{unit}.{name}"
        self.stats = stats
        self.queue: deque[Instr] = deque()
        self.blocked: tuple[Instr, str, Any] | None = None  # (instr, what it waits on, who would signal)
        self._wakeup: simpy.Event | None = None
        stats.busy.setdefault(self.full_name, 0.0)
        env.process(self._run())

    def issue(self, ins: Instr) -> Instr:
        ins.pipe = self
        ins.done = self.env.event()
        self.queue.append(ins)
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()
        return ins

    def _run(self):
        env, stats = self.env, self.stats
        while True:
            if not self.queue:
                self._wakeup = env.event()
                yield self._wakeup
                continue
            ins = self.queue[0]
            for cause, source, key in ins.waits:
                if isinstance(source, Pool):
                    ev = source.request(ins.label)
                    what, owner = source.name, source.owner_pipe
                else:
                    ev = source.done
                    what, owner = f"{source.label} ({source.pipe.full_name})", source.pipe
                if not ev.triggered:
                    self.blocked = (ins, what, owner)
                    t0 = env.now
                    yield ev
                    stats.stall(ins.stage, cause, env.now - t0)
                if key is not None:
                    ins.slots[key] = ev.value
            self.blocked = None
            self.queue.popleft()
            if callable(ins.cost):
                cycles, gm_wait = ins.cost(env.now)
                if gm_wait > 0:
                    stats.stall(ins.stage, "gm", gm_wait)
            else:
                cycles = ins.cost
            ins.start = env.now
            if cycles > 0:
                yield env.timeout(cycles)
            ins.end = env.now
            stats.busy[self.full_name] += cycles
            if ins.action is not None:
                ins.action(ins)
            for fn in ins.after:
                fn(ins)
            ins.done.succeed()
            if stats.events is not None:
                stats.events.append((self.unit, self.name, ins.stage, ins.block, ins.tile, ins.sub, ins.label,
                                     ins.start, ins.end, ins.nbytes, ins.flops, dict(ins.slots)))
