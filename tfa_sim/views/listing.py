"""``tfa-sim listing STAGE [CONFIG]``: the listing a config runs for one stage, each line with its cycles on the
config's tile shapes and its share of the call — where the stage's time goes before one edits it.

The call priced is the stage's steady one (a full slice of a later tile: its vocabulary's ``steady``), or the one
``--when NAME=VALUE`` picks.  Vector instructions carry their share of their barrier-separated group's cycles (the
group's first pass pays its startup and completion: :meth:`~tfa_sim.spec.costs.Costs.vector_each`); a TEXTRACT its
bytes over its path's rate; a TMATMUL its fractal cycles; a DMA its bytes over its path's rate plus the L2's
latency per DMA, uncontended and hitting the L2 (the run's own GM contention is the simulation's); barriers,
flags and waits take no pipe time of their own.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from tfa_sim.listings.isa import ISA
from tfa_sim.listings.library import PROVIDERS, STAGES, StageListing, is_name
from tfa_sim.listings.program import PATHS, Step, where
from tfa_sim.listings.resolve import Line, is_barrier
from tfa_sim.listings.syntax import DTYPES
from tfa_sim.listings.vocabulary import VOCABULARIES
from tfa_sim.spec.errors import InputError
from tfa_sim.stages.driver import Bind, Binds, vector_ops
from tfa_sim.stages.plan import KernelPlan


def call_names(plan: KernelPlan, stage: str, when: Mapping[str, Any] | None = None
               ) -> tuple[dict[str, Any], dict[str, int]]:
    """The names and dimensions of the call to price: the stage's steady call, ``when`` setting names."""
    listing = _stage(plan, stage)
    vocabulary = listing.vocabulary
    assert vocabulary.steady is not None, "every stage declares its steady call"
    names, dims = vocabulary.steady(plan)
    for key, value in (when or {}).items():
        if key not in vocabulary.context:
            raise InputError(f"--when {key}=…: {stage}'s calls have no name {key!r}; use "
                             f"{', '.join(vocabulary.context)}")
        values = vocabulary.context[key]
        given = {str(v).lower(): v for v in values}.get(str(value).lower())
        if given is None:
            raise InputError(f"--when {key}={value}: {key} takes {', '.join(str(v).lower() for v in values)}")
        names[key] = given
    return names, dims


def _stage(plan: KernelPlan, stage: str) -> StageListing:
    if stage not in plan.listings:
        raise InputError(f"{stage!r} is not a stage with a listing; use one of {', '.join(STAGES)}")
    return plan.listings[stage]


def binds(listing: StageListing, dims: Mapping[str, int]) -> Binds:
    """Every name of the listing as a tile of its declared shape on ``dims`` (no data, no slots: for prices)."""
    vocabulary = listing.vocabulary

    def make(name: str) -> Bind | None:
        tile = vocabulary.tiles.get(name.split("[", 1)[0])
        if tile is None:
            return None
        rows, cols = (int(d) if d.isdigit() else dims[d] for d in tile.shape)
        return Bind(tile.where, rows, cols, DTYPES[tile.dtype], chunks=dims[tile.dmas] if tile.dmas else 1,
                    cube_k=dims.get("cube_k", 0))
    return Binds(make, listing, {k: v for k, v in dims.items() if k in vocabulary.dims})


def priced(plan: KernelPlan, stage: str, names: Mapping[str, Any], dims: Mapping[str, int]
           ) -> list[tuple[Line, str, float | None]]:
    """Each line of the call (``names``, ``dims``), in order, with its pipe and cycles (None: no pipe time of its
    own: a barrier, a flag, a wait)."""
    listing = _stage(plan, stage)
    steps = listing.steps(*(names[k] for k in listing.vocabulary.context))
    tiles = binds(listing, dims)
    cost: dict[int, tuple[str, float | None]] = {}
    for step in steps:
        for ln, cycles in _step(plan, step, tiles, listing):
            cost[id(ln)] = (step.pipe, cycles)
    return [(ln, *cost.get(id(ln), ("", None))) for ln in listing.lines(names)]


def _step(plan: KernelPlan, step: Step, tiles: Binds, listing: StageListing) -> list[tuple[Line, float | None]]:
    costs, pipe = plan.costs, step.pipe
    if not pipe or not step.instructions:
        return [(ln, 0.0 if ln.op.unit == "mark" else None) for ln in step.lines]
    if pipe == "V":
        each = iter(costs.vector_each(vector_ops(step, tiles)))
        return [(ln, None if is_barrier(ln, "V") else next(each)) for ln in step.lines]
    out: list[tuple[Line, float | None]] = []
    for ln in step.instructions:
        if pipe == "MTE1":
            src, dst = tiles[ln.reads[0]], tiles[ln.writes[0]]
            rate = costs.move.l1_to_l0a if dst.where == "L0A" else costs.move.l1_to_l0b
            out.append((ln, src.nbytes / rate))
        elif pipe == "M":
            acc, a = tiles[ln.writes[0]], tiles[ln.reads[-2]]
            out.append((ln, costs.matmul(acc.rows, acc.cols, a.cols, acc.cube_k)))
        else:
            out.append((ln, _dma(plan, ln, tiles, listing)))
    return out


def _dma(plan: KernelPlan, line: Line, tiles: Binds, listing: StageListing) -> float:
    """A DMA's bytes over its path's rate, plus the L2's latency once per DMA (its chunks)."""
    load = line.name == "TLOAD"
    gm = line.reads[0] if load else line.writes[0]
    near = line.writes if load else line.reads
    place = [where(listing.vocabulary, listing.listing.tiles, listing.listing.consts, t) for t in near]
    if "const" in place:
        return 0.0
    nbytes = tiles[gm].nbytes if load else sum(tiles[t].nbytes for t in near)
    path = PATHS[("GM", place[0]) if load else (place[0], "GM")][0]
    return nbytes / getattr(plan.costs.move, path) + tiles[gm].chunks * plan.hw.gm.l2_latency


def listing_table(plan: KernelPlan, stage: str, when: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The listing a plan runs for ``stage``, priced: which listing, the call priced (``names``, ``dims``), and each
    line (its number and text, pipe, cycles or None, share of the call's pipe cycles) with the total."""
    listing = _stage(plan, stage)
    names, dims = call_names(plan, stage, when)
    lines = priced(plan, stage, names, dims)
    total = sum(c for _, _, c in lines if c)
    return {"stage": stage, "listing": listing.value, "file": listing.listing.path, "case": plan.config.name,
            "hardware": plan.hw.name, "names": names, "dims": dims, "total_cycles": total,
            "lines": [{"line": ln.call.where.line, "text": ln.text.strip(), "pipe": pipe, "cycles": cycles,
                       "share": cycles / total if cycles and total else None} for ln, pipe, cycles in lines]}


def format_listing(table: Mapping[str, Any]) -> str:
    """:func:`listing_table` as the command prints it."""
    shown = ", ".join(f"{k}={str(v).lower()}" for k, v in table["names"].items())
    dims = ", ".join(f"{k} {v}" for k, v in table["dims"].items())
    which = f"listing {table['listing']!r} ({table['file']})" if is_name(table["listing"]) else \
        f"listing file {table['file']}"
    out = [f"{table['stage']}: {which}, {table['case']} on {table['hardware']}",
           f"the call priced: {shown}; {dims} (--when NAME=VALUE for another)",
           f"{'pipe':<5} {'cycles':>9} {'share':>6}  line"]
    for row in table["lines"]:
        cost = "" if row["cycles"] is None else f"{row['cycles']:9.1f}"
        share = "" if row["share"] is None else f"{100 * row['share']:5.1f}%"
        out.append(f"{row['pipe']:<5} {cost:>9} {share:>6}  {row['line']:>3}: {row['text']}")
    out.append(f"{'':<5} {table['total_cycles']:9.1f} 100.0%  the call's pipe cycles (not its span: pipes overlap)")
    return "\n".join(out)


def _tile_cell(name: str, tile: Any) -> str:
    marks = [m for m, on in (("ping-pong", tile.pool), ("carried", tile.carried), ("held", tile.held),
                             ("indexed", tile.indexed), (f"within {tile.within}", tile.within),
                             ("ring", tile.ring)) if on]
    return f"`{name}` {tile.where} [{', '.join(tile.shape)}] {tile.dtype} {tile.role}" + \
        (f" ({', '.join(marks)})" if marks else "")


def names_table() -> str:
    """docs/kernel.md's table of the names each stage binds for its listing (the stages' vocabularies)."""
    for module in PROVIDERS:
        importlib.import_module(module)
    rows = ["| stage | unit | tiles | FIFOs, flags, scalars | names a condition tests (their values) |",
            "|---|---|---|---|---|"]
    for stage in STAGES:
        v = VOCABULARIES[stage]
        tiles = "; ".join(_tile_cell(name, tile) for name, tile in v.tiles.items())
        others = ", ".join(f"`{n}`" for n in sorted(v.fifos | v.flags | v.scalars)) or "—"
        tests = "; ".join(f"`{k}` ({', '.join(str(x).lower() for x in vals)})" for k, vals in v.context.items())
        rows.append(f"| `{stage}` | {v.unit} | {tiles} | {others} | {tests} |")
    return "\n".join(rows)


def instruction_table() -> str:
    """docs/kernel.md's table of the instructions a listing may use (:data:`~tfa_sim.listings.isa.ISA`)."""
    rows = ["| instruction | operands | runs on | priced as |", "|---|---|---|---|"]
    for op in ISA.values():
        price = f"`{op.cls}` passes, {op.form}" if op.vector else UNIT_PRICES[op.unit]
        rows.append(f"| `{op.name}` | `{op.roles}` | {UNITS.get(op.name) or UNITS[op.unit]} | {price} |")
    return "\n".join(rows)


#: How each kind of unit is named and priced in :func:`instruction_table`.
UNITS = {"V": "PIPE_V", "MTE1": "PIPE_MTE1", "M": "PIPE_M", "TLOAD": "PIPE_MTE2",
         "TSTORE": "PIPE_MTE3 from UB, PIPE_FIX from L0C",
         "wait": "the scalar unit (a wait)", "effect": "at the pipe's last instruction before it",
         "mark": "its pipe", "sync": "—"}
UNIT_PRICES = {"MTE1": "bytes over the L1→L0 rate", "M": "fractal cycles (the preset's cube)",
               "dma": "bytes over the path's rate, the L2's latency per DMA; GM contention simulated",
               "wait": "the time until the flag is set", "effect": "nothing", "mark": "nothing",
               "sync": "nothing; orders the pipes"}
