"""A unit's issue stream: the scalar unit that walks a block's program and queues its instructions.

Each unit (the AIC, each AIV) runs its program as a generator that ``yield``s,
in program order, instruction groups and :class:`Wait` steps.  The stream puts
each instruction into its pipe's queue at once (the generator gets the item
back as the value of its ``yield``); the pipes then run on their own.  A
:class:`Wait` is a cross-core wait executed by the scalar unit itself (the
kernel's ``wait_flag_dev``: a FIFO's ``wait()`` or ``allocate()``): nothing
after it is issued to any pipe of the unit until every flag it names has been
granted, while what was issued before keeps running.  The block ends when every
stream's program is exhausted and its last instruction has completed.

A *template* is a program's items, recorded once; a later block with the same
template key on the same core replays them (reset, same buffers) instead of
running the generators again — the timing-only fast path.
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import simpy

from tfa_sim.buffers.pools import Flag, Pending
from tfa_sim.clock.simpy_adapter import now
from tfa_sim.engine.pipes import Instr, Pipe, StreamWait

#: A unit's program: yields instructions and waits, receives each back.
Program = Generator[Any, Any, Any]


class Wait(StreamWait):
    """``wait_flag_dev`` on the scalar unit: take one count of each flag, in order, before issuing on."""

    __slots__ = ("flags", "index")

    def __init__(self, stage: str, flags: Sequence[Flag]) -> None:
        super().__init__(stage)
        self.flags = tuple(flags)
        self.index = 0  # flags granted so far

    def reset(self) -> None:
        super().reset()
        self.index = 0


class IssueStream:
    """Issues one unit's program (a generator, or a recorded template) into the pipes' queues."""

    def __init__(self, env: simpy.Environment, unit: str, pipes: Sequence[Pipe]) -> None:
        self.env = env
        self.unit = unit
        self.pipes = pipes  # the unit's pipes (deadlock report: an idle pipe waits for its stream)
        self.last: Instr | None = None
        self.items: list[Any] | None = None  # recorded template (when recording)
        self.blocked: Wait | None = None
        self.exhausted = False
        self._next: Callable[[], Any] = iter(()).__next__
        self._item: Any = None  # the item being issued (a Wait that blocked, or the next to fetch)
        self._wait: Wait | None = None  # a granted Wait not yet attached to an instruction
        self._end: simpy.Event | None = None

    def run(self, program: Program, record: bool = False) -> None:
        """Issue ``program`` from its start; with ``record``, keep its items as a template."""
        self.items = [] if record else None
        send = program.send
        self._next = lambda: send(self._item)
        self._item = None
        try:
            self._item = next(program)
        except StopIteration:
            self._exhaust()
            return
        self._pump()

    def replay(self, template: Sequence[Any], block: int) -> None:
        """Issue a recorded template again, for ``block``."""
        for item in template:
            item.reset(block) if isinstance(item, Instr) else item.reset()
        self.items = None
        items: Iterator[Any] = iter(template)
        self._next = items.__next__
        self._item = None
        try:
            self._item = self._next()
        except StopIteration:
            self._exhaust()
            return
        self._pump()

    def _pump(self, _event: Any = None) -> None:
        """Issue items until the program ends or a wait blocks."""
        item, items = self._item, self.items
        while True:
            if isinstance(item, Instr):
                if self._wait is not None:
                    item.stream_wait, self._wait = self._wait, None
                item.pipe.issue(item)
                self.last = item
            elif not self._granted(item):
                self._item = item
                return
            if items is not None:
                items.append(item)
            self._item = item
            try:
                item = self._next()
            except StopIteration:
                self._exhaust()
                return

    def _granted(self, wait: Wait) -> bool:
        """Request the wait's flags from the first not yet granted; False (and registered) if one is pending."""
        if self.blocked is None:
            wait.since = now(self.env)
        else:
            self.blocked = None
            wait.index += 1
        flags = wait.flags
        while wait.index < len(flags):
            flag = flags[wait.index]
            ev = flag.request(wait)
            if isinstance(ev, Pending):  # queued: it calls back once granted
                ev.callback = self._resume
                self.blocked = wait
                wait.blocker = flag
                return False
            wait.granted(flag, ev)
            wait.index += 1
        wait.granted_at = now(self.env)
        self._wait = wait
        return True

    def _resume(self, event: Any) -> None:
        assert self.blocked is not None
        wait = self.blocked
        wait.granted(wait.flags[wait.index], event)
        self._pump()

    def _exhaust(self) -> None:
        self.exhausted = True
        if self._end is not None:
            self._end_after_last()

    def _end_after_last(self) -> None:
        assert self._end is not None
        if self.last is None or self.last.finished:
            self._end.succeed()
        else:
            self.last.done.callbacks.append(self._succeed_end)

    def _succeed_end(self, _event: Any) -> None:
        assert self._end is not None
        self._end.succeed()

    def done(self) -> simpy.Event | None:
        """An event for the end of the stream (program exhausted, last instruction complete), or None if
        it has ended."""
        if self.exhausted and (self.last is None or self.last.finished):
            return None
        if self._end is None:
            self._end = self.env.event()
            if self.exhausted:
                self._end_after_last()
        return self._end

    def waiting_on(self) -> tuple[Wait, Flag] | None:
        """(the blocked wait, the flag it waits for), or None."""
        if self.blocked is None:
            return None
        return self.blocked, self.blocked.flags[self.blocked.index]
