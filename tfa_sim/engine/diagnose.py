"""Deadlock diagnosis: who waits on what, held by whom, as a wait-for graph.

Each blocked pipe points at the pipe that would unblock it (the holder of the
slot, the setter of the flag, the producer of the data); a unit's issue stream
blocked on a cross-core flag points at the flag's setter, and every idle pipe
of that unit points at the stream (its next instruction is not issued yet).  A
cycle in that graph (networkx) is a deadlock; a chain ending at an idle pipe
means a wait that nothing will ever satisfy (a flag waited more often than it
is set).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx


def _edges(core: Any, graph: nx.DiGraph, lines: list[str]) -> None:
    for pipe in core.pipes():
        waiting = pipe.waiting_on()
        if waiting is None:
            continue
        ins, what, owner = waiting
        owner_name = owner.full_name if owner is not None else "nobody"
        graph.add_edge(pipe.full_name, owner_name)
        lines.append(f"{pipe.full_name} [{ins.label}, block {ins.block}] waits for {what}, signalled by {owner_name}")
    for stream in core.streams:
        waiting = stream.waiting_on()
        if waiting is None:
            continue
        wait, flag = waiting
        node = f"{stream.unit} issue stream"
        owner_name = flag.owner_pipe.full_name if flag.owner_pipe is not None else "nobody"
        graph.add_edge(node, owner_name)
        after = f" after {stream.last.label}" if stream.last is not None else " before its first instruction"
        lines.append(f"{node} ({wait.stage}{after}) waits for {flag.name}, signalled by {owner_name}")
        for pipe in stream.pipes:
            if pipe.idle:
                graph.add_edge(pipe.full_name, node)


def deadlock_report(now: float, stuck_cores: list[Any]) -> str:
    """One paragraph: the blocked pipes and issue streams, their waits, and the cycle or dead end.  networkx is
    imported here, not with the module: only a deadlocked run needs it, and every run imports the engine."""
    import networkx as nx

    graph = nx.DiGraph()
    lines: list[str] = []
    for core in stuck_cores:
        _edges(core, graph, lines)
    try:
        cycle = nx.find_cycle(graph)
        verdict = "wait-for cycle: " + " → ".join([a for a, _ in cycle] + [cycle[0][0]])
    except nx.NetworkXNoCycle:
        ends = [n for n in graph.nodes if graph.out_degree(n) == 0]
        verdict = ("no cycle; waits end at " + ", ".join(ends) +
                   " which has nothing left to do (a flag or slot waited more often than it is set)")
    return (f"deadlock at cycle {now:.0f}: {verdict}. Blocked: " + "; ".join(lines) +
            ". Fix the schedule (buffer counts, cv_fifo_size, cv_fifo_cons_sync_period, qk_preload).")
