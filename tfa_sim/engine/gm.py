"""Global memory: the chip's L2 cache and HBM, shared by every core.

Every transfer is limited by its core's path rate (the MTE's bytes per cycle),
moves through the chip-wide L2 (``l2_bandwidth`` bytes per cycle, shared first
come first served) and pays the L2 access latency.  A read that misses L2 —
the first read of an input line — also moves through HBM (``hbm_bandwidth``,
shared) and pays the miss latency.  Every block of a head reads the same K and
V chunks, so only their first reader misses; later readers hit L2, but no
sooner than the line arrives.  Q rows are read once per block (always a miss).
The FIFOs' traffic, written and read back within a few tiles, and the output
stay in L2.  Contention is an outcome of the traffic, not a per-core-count
factor.
"""
from __future__ import annotations

from collections.abc import Hashable
from heapq import heappop, heappush
from typing import Final

#: ``line`` of a read that always misses L2 (data read once: a block's Q rows).
MISS: Final = "miss"
#: An input read the host prefetched into the L2 before the launch (the manual build's PTO_PREFETCH): a hit.
PREFETCHED: Final = "prefetched"


class GlobalMemory:
    def __init__(self, l2_bandwidth: float, l2_latency: float, hbm_bandwidth: float, miss_latency: float) -> None:
        self.l2_bandwidth, self.l2_latency = l2_bandwidth, l2_latency  # bytes/cycle (whole chip), cycles
        self.hbm_bandwidth, self.miss_latency = hbm_bandwidth, miss_latency
        self.hbm_free = 0.0
        self.flows: list[tuple[float, float]] = []  # transfers in flight through L2: (end cycle, path rate)
        self.asked = 0.0  # the path rates of the transfers in flight, summed
        self.lines: dict[Hashable, float] = {}  # input line → cycle it is in L2
        self.bytes = 0  # all GM traffic (through L2)
        self.hbm_bytes = 0  # the part that came from HBM

    def transfer(self, now: float, nbytes: int, path_rate: float, line: Hashable | None = None,
                 chunks: int = 1) -> tuple[float, float]:
        """(cycles the transfer takes from ``now``, cycles of it lost to sharing).

        ``line``: None for L2 traffic (FIFOs, output), :data:`MISS` for a read that always misses,
        :data:`PREFETCHED` for one in L2 before the launch, any other key for an input line that misses on its
        first read only; ``chunks``: DMA instructions the
        bytes are moved in, each paying the L2 latency.
        """
        flows = self.flows
        while flows and flows[0][0] <= now:
            self.asked -= heappop(flows)[1]
        if not flows:
            self.asked = 0.0  # no drift from the running sum
        asked = self.asked + path_rate
        rate = path_rate * self.l2_bandwidth / asked if asked > self.l2_bandwidth else path_rate
        own = nbytes / path_rate
        finish = now + nbytes / rate
        heappush(flows, (finish, path_rate))
        self.asked = asked
        latency = self.l2_latency * chunks
        self.bytes += nbytes
        if line is not None and line is not PREFETCHED:
            arrival = self.lines.get(line) if line is not MISS else None
            if arrival is None:  # from HBM
                hbm_start = max(now, self.hbm_free)
                self.hbm_free = hbm_start + nbytes / self.hbm_bandwidth
                finish = max(finish, self.hbm_free)
                latency += self.miss_latency
                self.hbm_bytes += nbytes
                if line is not MISS:
                    self.lines[line] = finish + latency
            else:  # an L2 hit on a line another core brought in
                finish = max(finish, arrival - latency)
        return finish - now + latency, finish - (now + own)
