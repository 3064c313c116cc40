"""The critical path of a run, straight from the columnar event log (no graph objects).

The same task graph as :func:`tfa_sim.views.analysis.task_graph` — an edge for every wait that released an
instruction, plus launch and block-dispatch edges per core — walked once in instruction-id order: an
instruction is numbered when it completes and depends only on instructions completed before it, so id
order is a topological order.  Ties are broken as the networkx walk breaks them (predecessors in the order
their edges were added, a repeated edge keeping its first place and its last latency), so both give the same
path.  This needs a few dicts of ints per instruction instead of networkx's node and edge dicts: about a
tenth of the memory and time, which matters for runs of a few hundred thousand instruction groups.
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfa_sim.rundir.events import CAUSES, DISPATCH, EventLog

SOURCE, SINK = "start", "end"


def structural_edges(ids: Sequence[int], ends: Sequence[float], cores: Sequence[int], blocks: Sequence[int],
                     has_deps: Sequence[bool], overhead: Mapping[str, float],
                     launches: Sequence[int]) -> dict[int, list[tuple[Any, float, str]]]:
    """Launch and dispatch edges of the task graph, from instructions given as columns in log order: the first
    instructions (no dependencies) of each block hang off the source, the core's previous block's last
    instruction or the previous launch's ends; (pred, latency, cause) by id.  A core's first block starts
    ``kernel_start + core·core_stagger + block_dispatch`` after its predecessors, a later one ``block_dispatch``
    after the core's previous block ends; ``overhead`` is the preset's [overhead] table (runs written before
    ``kernel_start`` existed have none: 0), ``launches`` the first block index of each launch after the first."""
    stagger, dispatch = overhead["core_stagger"], overhead["block_dispatch"]
    start = overhead.get("kernel_start", 0.0)
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)  # (core, block) → positions, log order
    for at, key in enumerate(zip(cores, blocks)):
        groups[key].append(at)
    out: dict[int, list[tuple[Any, float, str]]] = defaultdict(list)
    block_end: dict[tuple[int, int], int] = {}
    block_ids: dict[tuple[int, int], list[int]] = {}
    launch_ends: dict[int, list[int]] = defaultdict(list)
    for (core, block), ats in sorted(groups.items(), key=lambda kv: min(ids[a] for a in kv[1])):
        launch = bisect.bisect_right(launches, block)
        prev = block_end.get((launch, core))
        before: list[Any] = [SOURCE] if launch == 0 else launch_ends[launch - 1]
        for a in ats:
            if has_deps[a]:
                continue
            after = prev if prev is None or prev < ids[a] else _latest_before(block_ids[(launch, core)], ids[a])
            if after is None:
                out[ids[a]] += [(p, start + core * stagger + dispatch, "launch") for p in before]
            else:
                out[ids[a]].append((after, dispatch, "dispatch"))
        block_end[(launch, core)] = ids[max(ats, key=lambda a: ends[a])]
        block_ids[(launch, core)] = sorted(ids[a] for a in ats)
        launch_ends[launch] = [i for (lc, _c), i in block_end.items() if lc == launch]
    return out


def _latest_before(block: list[int], at: int) -> int | None:
    """The last instruction of ``block`` (its ids, sorted) completed before instruction ``at``: what a persistent
    core's next unit, which overlaps the unit before it, can have waited for (None: nothing of it was done)."""
    i = bisect.bisect_left(block, at)
    return block[i - 1] if i else None


def critical_path(log: EventLog, overhead: Mapping[str, float], launches: Sequence[int] = ()) -> dict[str, Any]:
    """Critical path length, its share per stage (and sync/overhead), and the instructions on it (ids)."""
    ev = log.events.view()
    dispatch_code = log.names("pipes").index(DISPATCH) if DISPATCH in log.names("pipes") else -1
    rows = np.flatnonzero(ev["pipe"] != dispatch_code)
    ids = ev["id"][rows]
    edges = log.edges.view()
    order = np.argsort(edges["dst"], kind="stable")  # each instruction's edges together, in the order added
    dst, src, lat = edges["dst"][order].tolist(), edges["src"][order].tolist(), edges["lat"][order].tolist()
    cause = edges["cause"][order].tolist()
    has_deps = np.isin(ids, edges["dst"])
    structural = structural_edges(ids.tolist(), ev["end"][rows].tolist(), log.core_of_rows()[rows].tolist(),
                                  ev["block"][rows].tolist(), has_deps.tolist(), overhead, launches)
    dur = dict(zip(ids.tolist(), (ev["end"][rows] - ev["start"][rows]).tolist()))
    dist: dict[Any, float] = {SOURCE: 0.0}
    back: dict[Any, tuple[Any, float, str] | None] = {SOURCE: None}
    durations: dict[Any, float] = {SOURCE: 0.0, **dur}
    e, n_edges = 0, len(dst)
    for v in np.sort(ids).tolist():
        while e < n_edges and dst[e] < v:
            e += 1
        preds: dict[Any, tuple[float, str]] = {}
        while e < n_edges and dst[e] == v:
            preds[src[e]] = (lat[e], CAUSES[cause[e]])
            e += 1
        for p, latency, why in structural.get(v, ()):
            preds[p] = (latency, why)
        best, arg = 0.0, None
        for u, (latency, why) in preds.items():
            cand = dist[u] + durations[u] + latency
            if arg is None or cand > best:
                best, arg = cand, (u, latency, why)
        dist[v], back[v] = best, arg
    best, arg = 0.0, None
    for v in ids.tolist():  # the sink's edges, in log order
        cand = dist[v] + durations[v]
        if arg is None or cand > best:
            best, arg = cand, (v, 0.0, "end")
    stages = log.names("stages")
    stage = dict(zip(ids.tolist(), (stages[s] for s in ev["stage"][rows].tolist())))
    share: dict[str, float] = defaultdict(float)
    path: list[Any] = []
    step = arg
    while step is not None:
        u, latency, why = step
        share[stage[u] if u != SOURCE else "launch"] += durations[u]
        if latency:
            share["overhead" if why in ("launch", "dispatch") else "sync"] += latency
        path.append(u)
        step = back[u]
    path.reverse()
    return {"length_cycles": round(best, 3), "instructions": len(path) - 1,
            "share": {k: round(v / best, 4) for k, v in sorted(share.items(), key=lambda kv: -kv[1]) if v},
            "path": path[1:]}
