"""Global memory (GM through L2) shared by every core of the chip.

Each transfer is limited by its core's path rate and by the chip-wide GM
bandwidth, which all active cores share first-come first-served: the channel
is reserved for ``bytes / bandwidth`` cycles after the previous reservation.
Contention is therefore an outcome of the traffic, not a per-core-count
factor.  Every transfer also pays a fixed access latency.
"""
from __future__ import annotations


class GlobalMemory:
    def __init__(self, bandwidth: float, latency: float) -> None:
        self.bandwidth = bandwidth  # bytes per cycle, whole chip
        self.latency = latency  # cycles per transfer
        self.free_at = 0.0
        self.bytes = 0

    def transfer(self, now: float, nbytes: int, path_rate: float) -> tuple[float, float]:
        """(cycles the transfer takes from ``now``, cycles of it lost to sharing)."""
        own = nbytes / path_rate
        start = max(now, self.free_at)
        self.free_at = start + nbytes / self.bandwidth
        self.bytes += nbytes
        finish = max(now + own, self.free_at)
        return finish - now + self.latency, finish - (now + own)
