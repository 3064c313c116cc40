"""Deadlock diagnosis: who waits on what, held by whom, as a wait-for graph.

Each blocked pipe points at the pipe that would unblock it (the holder of the
slot, the setter of the flag, the producer of the data).  A cycle in that
graph (networkx) is a deadlock; a chain ending at an idle pipe means a wait
that nothing will ever satisfy (a flag waited more often than it is set).
"""
from __future__ import annotations

from typing import Any

import networkx as nx


def deadlock_report(now: float, stuck_cores: list[Any]) -> str:
    """One paragraph: the blocked pipes, their waits, and the cycle or dead end."""
    graph = nx.DiGraph()
    lines = []
    for core in stuck_cores:
        for pipe in core.pipes():
            waiting = pipe.waiting_on()
            if waiting is None:
                continue
            ins, what, owner = waiting
            owner_name = owner.full_name if owner is not None else "nobody"
            graph.add_edge(pipe.full_name, owner_name)
            lines.append(f"{pipe.full_name} [{ins.label}, block {ins.block}] waits for {what}, "
                         f"signalled by {owner_name}")
    try:
        cycle = nx.find_cycle(graph)
        verdict = "wait-for cycle: " + " → ".join([a for a, _ in cycle] + [cycle[0][0]])
    except nx.NetworkXNoCycle:
        ends = [n for n in graph.nodes if graph.out_degree(n) == 0]
        verdict = ("no cycle; waits end at " + ", ".join(ends) +
                   " which has nothing left to do (a flag or slot waited more often than it is set)")
    return (f"deadlock at cycle {now:.0f}: {verdict}. Blocked: " + "; ".join(lines) +
            ". Fix the schedule (buffer counts, cv_fifo_size, cv_fifo_cons_sync_period, qk_preload).")
