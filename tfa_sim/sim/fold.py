"""Folded timing-only runs: the time of a long run from a few short ones.

A launch whose blocks all issue the same program shape (no mask: every block
runs the same prologue, steady loop and tail, only longer or shorter) has, in
the steady state, a time that grows linearly with the tiles per block and
linearly with the full waves of blocks.  A folded run simulates short samples
of the launch — its first two and three waves (and the first two with the
partial last one), each block cut to its first k tiles for two cut lengths past
the preload prologue (:func:`cuts`) — and combines them (:class:`_Plan`) into
the full launch's time (a persistent grid's waves are units per core, whose
cuts keep the units' phase of the credit rule).  GM and
HBM bytes and every pipe's busy and stall cycles are combined the same way
(:func:`figures_of`), so busy shares, stalls and the bound pipe estimate the
full launch's; no per-core balance is reported.  A dimension already within
its samples is simulated in full (no fold along it); the combine launch folds
over waves only, and its busy and stall cycles are not added to the first
launch's.  The samples are
independent simulations: where a second CPU is free (in a sweep worker: when
its share of the CPUs is two or more), a forked process runs about half of
them (:func:`_measure`); the figures are the same either way.

Folding is a timing-only approximation, asked for explicitly (``tfa-sim run
--fold``, ``[sweep] fold = true``); its error against full runs is measured in
``benchmarks/bench_fold.py`` and stated in docs/guide/decode.md.  Runs with a
mask are never folded (their blocks differ), nor are launches that the manual
build's prefetch makes uneven (:func:`foldable`), and a run too small to gain is
simulated in full.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

from tfa_sim.engine.chip import Kernel, Launch, SimResult, run_chip
from tfa_sim.sim.parallel import Forked, can_fork
from tfa_sim.spec.blocks import Block, prefetch_signature, prefetched_columns, prefetched_rows, reads_prefetched
from tfa_sim.spec.geometry import Dispatch
from tfa_sim.spec.hardware import Hardware

#: Blocks per core of the samples, so that the wave the fold repeats is the third.  A hardware-dispatched
#: launch's first wave starts every core together, in step at the sync unit, and later waves do not
#: (bench_fold.py: samples of one and two waves, repeating the second, folded the manual 131072² 6.3 % high);
#: a persistent grid's first unit starts from empty FIFOs, the next ones run into their predecessor's tail.
WAVES = (2, 3)
PERSISTENT_WAVES = (2, 3)
#: Steady-state tiles between the prologue's ``qk_preload`` tiles and the shorter cut, and between the cuts: a
#: hardware-dispatched launch's cores fall out of the first tiles' step at the sync unit only over some 16
#: tiles (bench_fold.py); a persistent grid's cuts keep its units' phase and need fewer.
STEADY_TILES = 16
PERSISTENT_STEADY_TILES = 8

Key = tuple[int, int | None]  # (blocks, tiles per block or None for all)
#: A sample's additive figures: "cycles", "gm", "hbm", ("busy", pipe) and ("stall", pipe, stage, cause, what).
Figures = dict[Any, float]


def cuts(qk_preload: int, period: int = 1, tiles: int | None = None) -> tuple[int, int]:
    """The two cut lengths: the prologue issues ``qk_preload`` QK tiles ahead, after which every tile adds the
    same work, so two cuts past it set the line that :class:`_Plan` extrapolates (bench_fold.py measures it).
    The credit rule repeats every ``period`` tiles (the consumer sync period), so the cuts lie whole periods
    apart, at least :data:`STEADY_TILES`; given the blocks' ``tiles`` (a persistent grid, whose FIFOs count on
    across units), the cuts keep their phase too, :data:`PERSISTENT_STEADY_TILES` apart (bench_fold.py)."""
    least = STEADY_TILES if tiles is None else PERSISTENT_STEADY_TILES
    step = period * -(-least // period)  # whole credit periods
    first = qk_preload + step
    if tiles is not None:
        first += (tiles - first) % step
    return first, first + step


def _cut(block: Any, tiles: int) -> Any:
    """``block`` with only its first ``tiles`` logical tiles (a combine block is left whole)."""
    if not isinstance(block, Block) or block.tiles <= tiles:
        return block
    ids, active = block.tile_ids[:tiles], block.active[:tiles]
    key = None if block.key is None else (ids, *tuple(block.key)[1:])  # type: ignore[arg-type]
    return dataclasses.replace(block, tile_ids=ids, active=active, key=key)


def _sample(kernel: Kernel, hw: Hardware, count: int, tiles: int | None) -> SimResult:
    """The launch's first ``count`` dispatch positions (whole waves), each unit cut to ``tiles`` tiles (None:
    all)."""
    return _run_sample(kernel, hw, kernel.dispatch.head(count), tiles)


def sample_blocks(kernel: Kernel, hw: Hardware, blocks: Sequence[Any], tiles: int | None = None) -> SimResult:
    """``kernel``'s programs run on ``blocks`` alone (any blocks, its own or another launch's of the same
    program: a block's program depends only on the kernel's tiling, schedule and design choices and on the
    block), in ``kernel``'s grid on ``min(cores, len(blocks))`` cores, each cut to ``tiles`` tiles (None: whole);
    timing only, no event log.  The tuner's screen (tfa_sim.explore.tune.screen) probes one block at a time this
    way."""
    sample = Dispatch.of(blocks, hw.cube_cores, kernel.dispatch.persistent)
    return _run_sample(kernel, hw, sample, tiles)


def _run_sample(kernel: Kernel, hw: Hardware, sample: Dispatch, tiles: int | None) -> SimResult:
    cut = sample if tiles is None else sample.each(lambda b: _cut(b, tiles))
    return run_chip(_Sampled(kernel, cut), hw, log_events=False)


class _Sampled:
    """``kernel`` on a sample of its dispatch (a :class:`~tfa_sim.engine.chip.Kernel`)."""

    def __init__(self, kernel: Kernel, dispatch: Dispatch) -> None:
        self.dispatch = dispatch
        self.name, self.stages, self.config = kernel.name, kernel.stages, kernel.config
        self.start, self.template_key = kernel.start, kernel.template_key


def foldable(kernels: Sequence[Kernel]) -> str | None:
    """Why these launches cannot be folded, or None.

    A launch some of whose blocks read inputs the host prefetched (the manual build's S0·HEAD elements) folds
    only when those blocks all run in the waves its first sample holds (the first two) or are all its blocks: the
    fold takes one more wave's cost from its sampled waves, so prefetched blocks beyond them would count as hits
    in every later wave.
    Nor does it fold when the prefetch ends inside a block's K/V columns (S0 < S1) beyond the shorter tile cut:
    the cuts' difference would lie in the prefetched part and extrapolate its hits to the rest (a prefetched part
    within the shorter cut is in both cuts alike and leaves their difference alone).
    """
    dispatch, config = kernels[0].dispatch, kernels[0].config
    blocks = dispatch.order
    masked = [b for b in blocks if b.mask.kind != "none"]
    if masked:
        return f"the {masked[0].mask.kind} mask makes blocks differ"
    if not prefetched_rows(config):
        return None
    s = config.schedule
    short = cuts(s.qk_preload, s.cv_fifo_cons_sync_period)[0] * config.tiling.tile_s1  # the shorter cut's columns
    for b in blocks:
        done = prefetched_columns(b, config)
        if b.tile_ids and b.col0(0, 0) + short < done < b.tile_end * config.tiling.tile_s1:
            return (f"block {b.index} reads its K/V columns below {done} from what the host prefetched (S0·HEAD "
                    f"elements) and the rest from HBM: its tiles differ")
    hits = [i for i, b in enumerate(blocks) if reads_prefetched(b, config)]
    sampled = (PERSISTENT_WAVES if dispatch.persistent else WAVES)[0]
    if hits and len(hits) < len(blocks) and hits[-1] >= sampled * dispatch.cores:
        return (f"blocks up to {hits[-1]} read inputs the host prefetched (S0·HEAD elements), the later ones "
                f"from HBM: the waves differ beyond the first {sampled}")
    return None


class _Plan:
    """Which samples a launch needs and how their values combine into the full launch's.

    With more than three full waves: the first two, the first three (their difference is one more wave,
    counted f − 2 times) and, when the last wave is partial, the first two plus the partial one (its
    extra); a persistent grid's waves are units per core.  Along the tiles: two cut lengths,
    extrapolated linearly to the longest block's tiles.
    """

    def __init__(self, kernel: Kernel, qk_preload: int, period: int) -> None:
        dispatch = kernel.dispatch
        n, self.cores = dispatch.units, dispatch.cores
        self.full_waves, self.rest = dispatch.full_waves, dispatch.rest
        self.tiles = max((b.tiles for b in dispatch.order if isinstance(b, Block)), default=0)
        tile_cuts = cuts(qk_preload, period, self.tiles if dispatch.persistent else None)
        self.cuts: tuple[int | None, ...] = tile_cuts if self.tiles > tile_cuts[-1] else (None,)
        self.waves = PERSISTENT_WAVES if dispatch.persistent else WAVES
        waves = self.full_waves > self.waves[-1]
        extra = [self.waves[0] * self.cores + self.rest] if waves and self.rest else []
        self.counts = [w * self.cores for w in self.waves] + extra if waves else [n]

    @property
    def keys(self) -> list[Key]:
        return [(n, k) for n in self.counts for k in self.cuts]

    def combine(self, values: dict[Key, float]) -> float:
        """The full launch's value from the samples' (``values[count, cut]``)."""
        def at(cut: int | None) -> float:
            if len(self.counts) == 1:
                return values[self.counts[0], cut]
            w = self.waves[0]
            one, two = values[w * self.cores, cut], values[(w + 1) * self.cores, cut]
            partial = values[w * self.cores + self.rest, cut] - one if self.rest else 0.0
            return one + (two - one) * (self.full_waves - w) + partial

        if self.cuts == (None,):
            return at(None)
        k1, k2 = self.cuts
        assert k1 is not None and k2 is not None
        lo, hi = at(k1), at(k2)
        return lo + (hi - lo) * (self.tiles - k1) / (k2 - k1)


def figures_of(result: SimResult) -> Figures:
    """What a fold combines: time, bytes, sync messages, and each pipe's busy and stall cycles (all grow linearly
    alike)."""
    out: Figures = {"cycles": result.total_cycles, "gm": result.gm_bytes, "hbm": result.hbm_bytes,
                    "sync": result.sync_messages, "sync_busy": result.sync_busy, "sync_queued": result.sync_queued}
    for pipe in result.stats.pipes:
        out["busy", pipe.full_name] = pipe.busy
        out.update({("stall", pipe.full_name, *key): cycles for key, cycles in pipe.stall_by.items()})
    return out


def _figures(kernel: Kernel, hw: Hardware, keys: Sequence[Key]) -> list[Figures]:
    """The figures of each sample in ``keys``."""
    return [figures_of(_sample(kernel, hw, *k)) for k in keys]


def _measure(kernel: Kernel, hw: Hardware, keys: list[Key], largest: Key,
             parallel: bool) -> tuple[SimResult, dict[Key, Figures]]:
    """The largest sample's full result and every sample's figures.  With ``parallel`` a forked process runs
    the samples that the largest leaves over, about half the work (blocks × tiles) of them all; if it fails,
    they are run here again, which raises the error (a deadlock diagnosis, say) where it can be reported."""
    weight = {k: k[0] * (k[1] or 1) for k in keys}
    here: list[Key] = [largest]
    there: list[Key] = []
    for k in sorted((k for k in keys if k != largest), key=weight.__getitem__, reverse=True):
        lighter = here if sum(map(weight.__getitem__, here)) <= sum(map(weight.__getitem__, there)) else there
        lighter.append(k)
    helper = Forked(_figures, kernel, hw, there) if parallel and there else None
    try:
        result = _sample(kernel, hw, *largest)
        figures = {largest: figures_of(result)}
        figures.update(zip(here[1:], _figures(kernel, hw, here[1:])))
        away = helper.result() if helper else None
    finally:
        if helper:
            helper.close()
    figures.update(zip(there, away if away is not None else _figures(kernel, hw, there)))
    return result, figures


def _fold_launch(kernel: Kernel, hw: Hardware, qk_preload: int, period: int,
                 parallel: bool) -> tuple[SimResult, dict[str, Any]]:
    """A launch's largest sample with its time, bytes, busy and stall cycles replaced by the plan's
    combination (a figure that extrapolates below zero is 0)."""
    plan = _Plan(kernel, qk_preload, period)
    largest = max(plan.keys, key=lambda p: (p[0], p[1] or 0))
    result, figures = _measure(kernel, hw, plan.keys, largest, parallel)
    names = {name for f in figures.values() for name in f}
    fit = {name: max(0.0, plan.combine({p: f.get(name, 0.0) for p, f in figures.items()})) for name in names}
    result.total_cycles = fit["cycles"]
    result.gm_bytes, result.hbm_bytes = round(fit["gm"]), round(fit["hbm"])
    result.sync_messages, result.sync_busy, result.sync_queued = round(fit["sync"]), fit["sync_busy"], \
        fit["sync_queued"]
    stalls: dict[str, dict[tuple[str, str, str], float]] = defaultdict(dict)  # pipe → (stage, cause, what)
    for name, v in fit.items():
        if isinstance(name, tuple) and name[0] == "stall":  # "cycles", "gm", "hbm" are plain strings
            stalls[name[1]][name[2:]] = v
    for pipe in result.stats.pipes:
        pipe.busy = fit.get(("busy", pipe.full_name), 0.0)
        pipe.stall_by.clear()
        pipe.stall_by.update(stalls[pipe.full_name])
    result.blocks, result.waves = kernel.dispatch.units, kernel.dispatch.waves
    return result, {"launch": kernel.name, "samples": [list(p) for p in plan.keys],
                    "blocks": kernel.dispatch.units, "tiles": plan.tiles}


def simulate_folded(kernels: Sequence[Kernel], hw: Hardware, qk_preload: int, launch_gap: float = 0.0,
                    parallel: bool | None = None, period: int = 1) -> SimResult:
    """The launches folded one by one and laid end to end, ``launch_gap`` cycles apart (docs in the module
    docstring); ``period``: the consumer sync period (:func:`cuts`); ``parallel`` (default:
    :func:`~tfa_sim.sim.parallel.can_fork`) runs part of the samples in a forked process."""
    use_fork = can_fork() if parallel is None else parallel
    parts = [_fold_launch(k, hw, qk_preload, period, use_fork) for k in kernels]
    first, start, launches = parts[0][0], 0.0, []
    for at, ((result, _), kernel) in enumerate(zip(parts, kernels)):
        start += launch_gap if at else 0.0
        own = result.launches[0]
        dispatch = kernel.dispatch
        launches.append(Launch(own.name, own.first_block, dispatch.units, dispatch.cores, dispatch.waves, start,
                               start + result.total_cycles))
        start += result.total_cycles
    first.total_cycles, first.launches = start, launches
    first.core_busy, first.core_end = [], []  # the samples' balance is not the full run's
    first.gm_bytes = sum(r.gm_bytes for r, _ in parts)
    first.hbm_bytes = sum(r.hbm_bytes for r, _ in parts)
    first.sync_messages = sum(r.sync_messages for r, _ in parts)
    first.sync_busy = sum(r.sync_busy for r, _ in parts)
    first.sync_queued = sum(r.sync_queued for r, _ in parts)
    first.folded = [info for _, info in parts]
    return first


def sample_key(kernel: Kernel, hw: Hardware, count: int, tiles: int | None) -> Hashable:
    """What a sample's time depends on: the kernel's program (its config but the problem size), the chip and
    the sampled blocks' shapes and prefetched inputs — equal for the same samples of launches that differ only
    in their length."""
    config = kernel.config
    program = dataclasses.replace(config, case=dataclasses.replace(config.case, name="", s0=0, s1=0))
    blocks = [b if tiles is None else _cut(b, tiles) for b in kernel.dispatch.order[:count]]
    shapes = tuple((b.n_rows, b.batch, b.kv_head, b.tile_ids, b.active, b.mask.kind, b.chunks,
                    prefetch_signature(b, config)) for b in blocks if isinstance(b, Block))
    return repr((type(kernel).__name__, kernel.name, program, hw)), shapes, count, tiles


def folded_cycles(kernels: Sequence[Kernel], hw: Hardware, qk_preload: int, period: int, launch_gap: float,
                  memo: dict[Hashable, float]) -> float:
    """The folded time (cycles) of the launches alone, each sample simulated once across calls (``memo``: the
    samples' times by :func:`sample_key`; launches of one program share their samples).  A fit calls this for
    every long launch at every node of its search."""
    total = launch_gap * (len(kernels) - 1)
    for kernel in kernels:
        plan = _Plan(kernel, qk_preload, period)
        values = {}
        for key in plan.keys:
            name = sample_key(kernel, hw, *key)
            if name not in memo:
                memo[name] = _sample(kernel, hw, *key).total_cycles
            values[key] = memo[name]
        total += max(0.0, plan.combine(values))
    return total
