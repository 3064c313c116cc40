"""Bottleneck analysis of a run: the task graph, its critical path, bubbles by cause, and plans.

The task graph (networkx DAG) has one node per executed instruction group and
an edge for every wait that released it — data hand-offs, slot releases,
FIFO flags and credits (with the flag latency) — plus, per core, an edge
from one block's end to the next block's first instructions (dispatch).
Pipe order is *not* an edge: the graph says what must precede what, the pipes
say what can run at once.  So the longest path equals the simulated makespan
exactly when no instruction on it ever waited for its pipe, and is shorter
when resources are the bound.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: a run without the event log never builds the graph
    import networkx as nx

from tfa_sim.rundir.events import DISPATCH, EventLog
from tfa_sim.spec.units import parse_unit, pipe_kind, without_lane
from tfa_sim.views.critical_path import SINK, SOURCE, critical_path, structural_edges

#: Beyond this many instruction groups the graph analysis is skipped (and says so).
MAX_GRAPH_NODES = 300_000


def task_graph(events: list | EventLog, overhead: Mapping[str, float], launches: Sequence[int] = ()) -> nx.DiGraph:
    """Nodes: instruction ids with ``dur``, ``stage``, ``resource``; edges with ``lat`` and ``cause``: one per
    wait that released an instruction, then the launch and dispatch edges of
    :func:`tfa_sim.views.critical_path.structural_edges` (the dispatch spans of the log are these edges, not nodes)."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_node(SOURCE, dur=0.0, stage="launch", resource=None)
    g.add_node(SINK, dur=0.0, stage="end", resource=None)
    events = [e for e in events if e.pipe != DISPATCH]
    for e in events:
        g.add_node(e.id, dur=e.end - e.start, stage=e.stage, resource=f"{e.unit}.{e.pipe}", start=e.start)
        for pred, cause, lat, via in e.deps:
            g.add_edge(pred, e.id, lat=lat, cause=cause, via=via)
        g.add_edge(e.id, SINK, lat=0.0, cause="end", via="")
    structural = structural_edges([e.id for e in events], [e.end for e in events],
                                  [parse_unit(e.unit).core for e in events], [e.block for e in events],
                                  [bool(e.deps) for e in events], overhead, launches)
    for v, preds in structural.items():
        for p, lat, cause in preds:
            g.add_edge(p, v, lat=lat, cause=cause, via="")
    return g


def critical_path_report(log: EventLog, overhead: Mapping[str, float], launches: Sequence[int] = ()) -> dict[str, Any]:
    """Critical path length, its share per stage (and sync/overhead), and the instructions on it — the longest
    path of :func:`task_graph`, computed from the columnar log by :mod:`tfa_sim.views.critical_path`."""
    if len(log) > MAX_GRAPH_NODES:
        return {"skipped": f"{len(log)} instruction groups > {MAX_GRAPH_NODES}: narrow the run "
                           f"(fewer blocks or tiles) to get the critical path"}
    return critical_path(log, overhead, launches)


def bubbles(pipes: list, total_cycles: float, top: int = 8) -> list[dict[str, Any]]:
    """Stall time by pipe kind and cause, as a share of that kind's pipe-time; largest first."""
    count: dict[str, int] = defaultdict(int)
    waits: dict[tuple[str, str, str], float] = defaultdict(float)
    for pipe in pipes:
        kind = pipe_kind(pipe.full_name)
        count[kind] += 1
        for (_stage, cause, what), cycles in pipe.stall_by.items():
            waits[(kind, cause, without_lane(what))] += cycles
    rows: list[dict[str, Any]] = []
    for (kind, cause, what), cycles in waits.items():
        frac = cycles / (count[kind] * total_cycles) if total_cycles else 0.0
        rows.append({"pipe": kind, "cause": cause, "waiting_for": what, "fraction": round(frac, 4),
                     "text": f"{kind} stalled {frac:.0%} of the time waiting for {_describe(cause, what)}"})
    rows.sort(key=lambda r: -r["fraction"])
    return [r for r in rows if r["fraction"] >= 0.005][:top]


def _describe(cause: str, what: str) -> str:
    if cause == "credit":
        return f"a {what.split('.')[0].replace('_tile_fifo', '').upper()}-FIFO credit ({what})"
    if cause == "slot":
        return f"a free {what} slot"
    if cause == "gm":
        return "GM bandwidth"
    return what if what.startswith("data") else f"{what} (data)"


def plan(events: list | EventLog, overhead: Mapping[str, float], units: dict[str, int] | None,
         launches: Sequence[int] = ()) -> list[tuple[int, float, float]]:
    """A list schedule of the run's task graph: ``units=None`` — unlimited resources (ASAP);
    otherwise each pipe kind (``cube.M``, ``vec.V`` …) gets ``units.get(kind, 1)`` servers per unit.
    Ready tasks go to free servers by longest remaining path first.  Returns (id, start, end)."""
    import networkx as nx

    g = task_graph(events, overhead, launches)
    order = list(nx.topological_sort(g))
    tail: dict[Any, float] = {}
    for v in reversed(order):
        tail[v] = g.nodes[v]["dur"] + max((g.edges[v, w]["lat"] + tail[w] for w in g.successors(v)), default=0.0)
    ready_at: dict[Any, float] = defaultdict(float)
    missing = {v: g.in_degree(v) for v in g}
    out: list[tuple[int, float, float]] = []
    free: dict[str, list[float]] = {}
    heap: list[tuple[float, float, int, Any]] = []  # (ready time, -priority, seq, node)
    seq = 0

    def push(v: Any) -> None:
        nonlocal seq
        heapq.heappush(heap, (ready_at[v], -tail[v], seq, v))
        seq += 1

    push(SOURCE)
    while heap:
        t_ready, _prio, _seq, v = heapq.heappop(heap)
        res = g.nodes[v]["resource"]
        start = t_ready
        if units is not None and res is not None:
            servers = free.setdefault(res, [0.0] * units.get(pipe_kind(res), 1))
            k = min(range(len(servers)), key=servers.__getitem__)
            start = max(t_ready, servers[k])
            servers[k] = start + g.nodes[v]["dur"]
        end = start + g.nodes[v]["dur"]
        if v not in (SOURCE, SINK):
            out.append((v, start, end))
        for w in g.successors(v):
            ready_at[w] = max(ready_at[w], end + g.edges[v, w]["lat"])
            missing[w] -= 1
            if missing[w] == 0:
                push(w)
    return out
