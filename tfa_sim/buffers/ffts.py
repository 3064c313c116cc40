"""The chip's cross-core sync unit (FFTS): every flag set of every core is one message it serves in turn.

A FIFO flag's ``record()``/``free()`` is ``ffts_cross_core_sync`` (pto-isa ``include/pto/npu/a2a3/TPush.hpp``):
a message to the FFTS, whose control block the host hands every launch (``rtGetC2cCtrlAddr``) and which
sets the flag the waiting core's ``wait_flag_dev`` polls.  All cores' messages go through the one unit, so
they queue: each takes ``service`` cycles of it, first come first served.  With a few cores the queue is
empty and a set costs only the flag latency; with many cores syncing every tile (consumer sync period 1)
the unit saturates and its throughput bounds the chip's tile rate (docs/timing.md, "Cross-core sync").
"""
from __future__ import annotations


class Ffts:
    """One server for the cross-core flag messages of all cores: ``deliver(now)`` is when a message sent at
    ``now`` has been served (sends arrive in time order, so the queue is its last departure)."""

    def __init__(self, service: float) -> None:
        self.service = service
        self.free_at = 0.0  # when the unit has served every message sent so far
        self.messages = 0
        self.queued = 0.0  # cycles messages spent waiting for the unit, summed

    def deliver(self, now: float) -> float:
        """The cycle a message sent at ``now`` leaves the unit."""
        start = now if now > self.free_at else self.free_at
        self.queued += start - now
        self.free_at = start + self.service
        self.messages += 1
        return self.free_at
