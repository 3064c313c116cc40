"""A unit's issue stream: the scalar unit that walks a block's program and queues its instructions.

Each unit (the AIC, each AIV) runs its program as a generator that ``yield``s
instruction groups in program order; the stream puts each into its pipe's
queue (the generator gets the instruction back as the value of its
``yield``) and goes on at once, so the pipes run ahead of nothing and behind
nothing but their own waits.  The block ends when every stream's program is
exhausted and its last instruction has completed.

A *template* is a program's issued instructions, recorded once; a later block
with the same template key on the same core replays them (reset, same buffers)
instead of running the generators again — the timing-only fast path.
"""
from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import simpy

from tfa_sim.engine.pipes import Instr

#: A unit's program: yields instructions, receives each back.
Program = Generator[Instr, Instr, Any]


class IssueStream:
    """Issues one unit's program (a generator, or a recorded template) into the pipes' queues."""

    def __init__(self) -> None:
        self.last: Instr | None = None
        self.issued: list[Instr] = []

    def run(self, program: Program, record: bool = False) -> None:
        """Issue the whole program; with ``record``, keep the instructions as a template."""
        send = program.send
        issued = self.issued if record else None
        try:
            ins = next(program)
            while True:
                ins.pipe.issue(ins)
                if issued is not None:
                    issued.append(ins)
                self.last = ins
                ins = send(ins)
        except StopIteration:
            pass

    def replay(self, template: Sequence[Instr], block: int) -> None:
        """Issue a recorded template again, for ``block``."""
        for ins in template:
            ins.reset(block)
            ins.pipe.issue(ins)
        self.last = template[-1] if template else None

    def done(self) -> simpy.Event | None:
        """An event for the completion of the last instruction, or None if it has completed."""
        if self.last is None or self.last.finished:
            return None
        return self.last.done  # type: ignore[return-value]
