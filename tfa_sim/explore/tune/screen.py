"""The tuner's screen: every legal candidate's time estimated from short probe simulations of its blocks.

No second model of the kernel: a **probe** runs one block of the candidate alone on one core with the real
engine (:func:`tfa_sim.sim.fold.sample_blocks`), cut to two tile counts past the preload prologue
(``qk_preload + 2`` and ``qk_preload + 6``; a shorter block is cut to its last two lengths, a one-tile block
run whole).  The two runs give the block's **per-tile** time, its **fill** (dispatch, prologue and drain:
the time at zero tiles by the line through the two), the GM bytes through L2 and the HBM bytes per tile and
of the fill, and every pipe's busy cycles per tile (the screen's bound pipe).  A probe that deadlocks or
hits a hazard marks the candidate ``schedule_error`` with the diagnosis.

What a block issues depends only on the tiling, the schedule's program knobs (preload, FIFO depth and
period, buffer counts), the kernel's design choices (``kernel.*``), its rows, whether it is a split-S1 chunk
and, for a mask, which tiles and sub-tiles it sees; so probes are cached under that key (:func:`probe_key`),
and the knobs that only change the block list — ``block_order``, ``s1_split``, ``gqa_pack``,
``hardware.cores`` — cost no new probe.

The **launch estimate** uses the candidate's real launch (its :class:`~tfa_sim.stages.plan.KernelPlan`'s geometry:
the blocks each core runs, in dispatch order, in whichever launch grid).  Core c
starts ``c · core_stagger`` cycles in and has the work Σ over its blocks of fill + tiles · per_tile (cycles at
full speed), the bytes Σ fill bytes + tiles · bytes per tile and likewise the cross-core flag messages.  The
cores share the chip's L2 and HBM as the engine shares them, in proportion to what they ask for once together
they ask for more (docs/timing.md, "GM moves"), and the chip's sync unit, one message per
``sync.ffts_service`` cycles (docs/timing.md, "Cross-core sync"): a fluid model advances every running core at
``min(1, l2_bandwidth / Σ L2 demand, hbm_bandwidth / Σ HBM demand, 1 / (ffts_service · Σ messages per
cycle))`` of its full speed, the demands of the cores still running, until the last core ends
(:func:`fluid_end`).  The HBM bytes of a
launch are the Q of every block and the K/V tiles of every (batch, K/V head) once: only a line's first
reader misses.  A split-S1 run adds the launch gap and the combine launch, whose blocks are probed whole
(one per rows and chunk count).  Everything else — latencies under contention, the diagonal tiles of a
mask, a block's tail — is left to the finalists' full simulations, which decide.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfa_sim.engine.chip import SimResult
from tfa_sim.sim.fold import sample_blocks
from tfa_sim.spec.blocks import Block, config_mask
from tfa_sim.spec.config import CaseConfig, Config
from tfa_sim.spec.errors import ScheduleError
from tfa_sim.spec.geometry import Dispatch, Geometry
from tfa_sim.spec.hardware import Hardware, load_hardware
from tfa_sim.spec.masks import Mask
from tfa_sim.spec.units import pipe_kind
from tfa_sim.stages.combine import CombineKernel
from tfa_sim.stages.plan import kernel_plan
from tfa_sim.stages.run_tfa import TfaKernel

#: Steady tiles of the short and the long probe cut after the ``qk_preload`` tiles of the prologue.
PROBE_TILES = (2, 6)
#: Schedule keys that change only the block list, not any block's program.
LAYOUT_KEYS = ("block_order", "s1_split", "gqa_pack")


@dataclass(frozen=True)
class Probe:
    """One block class measured alone on one core: cycles, L2 and HBM bytes at zero tiles (``fill``, dispatch
    included) and per tile, each pipe kind's busy cycles per tile; or the schedule error it hit."""

    fill: float = 0.0
    per_tile: float = 0.0
    fill_bytes: float = 0.0
    tile_bytes: float = 0.0
    fill_hbm: float = 0.0
    tile_hbm: float = 0.0
    fill_sync: float = 0.0  # cross-core flag messages (buffers/ffts.py)
    tile_sync: float = 0.0
    busy: tuple[tuple[str, float], ...] = ()
    error: str | None = None

    def cycles(self, tiles: float) -> float:
        return self.fill + tiles * self.per_tile

    @property
    def bound(self) -> str:
        """The pipe kind busiest per tile (the block's own bound, without contention)."""
        return max(self.busy, key=lambda kv: kv[1])[0] if self.busy else ""


def probe_cuts(tiles: int, qk_preload: int, period: int = 1) -> tuple[int, ...]:
    """The tile counts a probe simulates a block of ``tiles`` tiles at (one count: the block is one tile); the
    longer lies whole consumer sync periods past the shorter (the credit rule repeats every ``period`` tiles)."""
    step = PROBE_TILES[1] - PROBE_TILES[0]
    longest = min(tiles, qk_preload + PROBE_TILES[0] + period * -(-step // period))
    if longest < 2:
        return (longest,)
    return min(qk_preload + PROBE_TILES[0], longest - 1), longest


def program_knobs(config: Config) -> tuple:
    """What a block's program depends on besides the block: the tiling, the schedule's program knobs and the
    kernel's design choices."""
    t, s = config.tiling, config.schedule
    return (t.cube_s0, t.cube_s1, t.tile_s1, *(v for k, v in sorted(vars(s).items()) if k not in LAYOUT_KEYS),
            *(v for k, v in sorted(vars(config.kernel).items()) if k != "build"))


def block_class(block: Block) -> tuple:
    """Blocks of one class share a probe (the longest of them stands for all): rows, chunk or not, mask."""
    return block.n_rows, block.partial, block.mask.kind


def probe_key(config: Config, block: Block) -> Hashable:
    """The cache key of a probe of ``block`` (a class's representative) under ``config``."""
    cuts = probe_cuts(block.tiles, config.schedule.qk_preload, config.schedule.cv_fifo_cons_sync_period)
    seen: tuple = ()
    if block.mask.kind != "none":  # which tiles and sub-tiles the cut block sees, and which rows it has
        seen = (block.rows.pos.tobytes(), block.tile_ids[:cuts[-1]], block.active[:cuts[-1]])
    return program_knobs(config), block_class(block), cuts, seen


def probe_config(config: Config) -> Config:
    """``config`` on a one-tile problem: the kernel object whose programs a probe runs (its own block list
    is never used; a program reads only the tiling, the schedule, the design choices and the case's head,
    softcap and dtype, and with ``kernel.prefetch = "s0_head"`` which inputs the host prefetched: the probe's
    one-row case prefetches none, so the screen reads every K/V tile from HBM once per K/V head and leaves the
    prefetch to the simulations)."""
    c = config.case
    case = CaseConfig(name="probe", head=c.head, softcap=c.softcap, dtype=c.dtype, s0=1, s1=config.tiling.tile_s1)
    return dataclasses.replace(config, case=case, schedule=dataclasses.replace(config.schedule, s1_split=1,
                                                                               gqa_pack=False))


def _figures(result: SimResult) -> tuple[list[float], dict[str, float]]:
    """(cycles, L2 bytes, HBM bytes, sync messages) and each pipe kind's busy cycles of a probe run."""
    busy: dict[str, float] = {}
    for name, cycles in result.stats.busy.items():
        kind = pipe_kind(name)
        busy[kind] = max(busy.get(kind, 0.0), cycles)
    return [result.total_cycles, float(result.gm_bytes), float(result.hbm_bytes), float(result.sync_messages)], busy


def run_probe(config: Config, hw: Hardware, block: Block) -> Probe:
    """Probe ``block`` (see the module docstring)."""
    kernel = TfaKernel(kernel_plan(probe_config(config), hw))
    cuts = probe_cuts(block.tiles, config.schedule.qk_preload, config.schedule.cv_fifo_cons_sync_period)
    try:
        runs = [_figures(sample_blocks(kernel, hw, [block], k)) for k in cuts]
    except ScheduleError as exc:
        return Probe(error=str(exc))
    if len(cuts) == 1:
        (cycles, gm, hbm, sync), busy = runs[0]
        return Probe(fill=cycles, fill_bytes=gm, fill_hbm=hbm, fill_sync=sync, busy=tuple(sorted(busy.items())))
    (a, b), ((lo, lo_busy), (hi, hi_busy)) = cuts, runs
    slope = [(y - x) / (b - a) for x, y in zip(lo, hi)]
    fill = [y - b * s for y, s in zip(hi, slope)]
    busy = {k: (hi_busy.get(k, 0.0) - lo_busy.get(k, 0.0)) / (b - a) for k in hi_busy}
    return Probe(fill=fill[0], per_tile=slope[0], fill_bytes=fill[1], tile_bytes=slope[1], fill_hbm=fill[2],
                 tile_hbm=slope[2], fill_sync=fill[3], tile_sync=slope[3], busy=tuple(sorted(busy.items())))


def combine_probe(combine: Dispatch, config: Config, hw: Hardware, rows: int, chunks: int) -> Probe:
    """One combine block of ``rows`` rows over ``chunks`` chunks, whole (dispatch included): the combine program
    of ``combine``'s blocks with the probe plan's costs."""
    kernel = CombineKernel(kernel_plan(probe_config(config), hw), None, combine)
    block = next(b for b in combine.order if (b.n_rows, len(b.chunks)) == (rows, chunks))
    try:
        (cycles, gm, hbm, sync), busy = _figures(sample_blocks(kernel, hw, [block]))
    except ScheduleError as exc:
        return Probe(error=str(exc))
    return Probe(fill=cycles, fill_bytes=gm, fill_hbm=hbm, fill_sync=sync, busy=tuple(sorted(busy.items())))


@dataclass
class Layout:
    """A candidate's blocks as the chip runs them: per core and block class the blocks and their tiles, each
    class's representative, the K/V tiles read (once per K/V head: HBM), and the combine's blocks."""

    cores: int
    classes: list[tuple]
    representative: list[Block]
    counts: np.ndarray  # [cores, classes]
    tiles: np.ndarray  # [cores, classes]
    kv_tiles: int  # distinct (batch, K/V head, tile) the launch reads
    combine: list[list[tuple[int, int]]]  # per core of the combine launch its blocks' (rows, chunks), in order
    geometry: Geometry
    fingerprint: Hashable


def make_layout(config: Config, hw: Hardware, mask: Mask) -> Layout:
    """The :class:`Layout` of ``config`` on ``hw`` (the cores it uses: ``hardware.cores`` applied)."""
    geometry = kernel_plan(config, hw, mask).geometry
    blocks, main = geometry.blocks, geometry.main
    n = main.cores
    classes: list[tuple] = []
    rep: list[Block] = []
    counts, tiles = np.zeros((n, 0)), np.zeros((n, 0))
    for i, b in enumerate(blocks):
        cls = block_class(b)
        if cls not in classes:
            classes.append(cls)
            rep.append(b)
            counts, tiles = np.pad(counts, ((0, 0), (0, 1))), np.pad(tiles, ((0, 0), (0, 1)))
        k = classes.index(cls)
        if b.tiles > rep[k].tiles:
            rep[k] = b
        counts[main.core_of(i), k] += 1
        tiles[main.core_of(i), k] += b.tiles
    kv = len({(b.line_base, t) for b in blocks for t in b.tile_ids})
    combine = geometry.combine
    split = [[(b.n_rows, len(b.chunks)) for b in queue] for queue in combine.queues()] if combine else []
    fingerprint = (n, combine.cores if combine else 0, main.persistent, tuple(
        (b.index, b.tile_ids, b.active, b.chunks, b.rows.heads.tobytes(), b.rows.pos.tobytes()) for b in blocks))
    return Layout(n, classes, rep, counts, tiles, kv, split, geometry, hash(fingerprint))


def fluid_end(start: np.ndarray, work: np.ndarray, demand: list[tuple[np.ndarray, float]]) -> np.ndarray:
    """When the last core ends, for many candidates at once: ``start`` [cores], ``work`` [candidates, cores]
    cycles at full speed, ``demand`` per shared resource (bytes per cycle at full speed [candidates, cores],
    the resource's bandwidth).  Running cores go at the fraction min(1, bandwidth / their total demand) of full
    speed, recomputed whenever a core starts or ends."""
    rem = work.astype(float)
    t = np.zeros(len(rem))
    for _ in range(2 * rem.shape[1] + 1):
        active = (start[None, :] <= t[:, None] + 1e-9) & (rem > 1e-9)
        scale = np.ones(len(rem))
        for rate, bandwidth in demand:
            asked = np.where(active, rate, 0.0).sum(axis=1)
            scale = np.minimum(scale, np.divide(bandwidth, asked, out=np.ones_like(asked), where=asked > bandwidth))
        finish = np.where(active, rem / scale[:, None], np.inf).min(axis=1)
        begin = np.where((start[None, :] > t[:, None] + 1e-9) & (rem > 1e-9), start[None, :] - t[:, None],
                         np.inf).min(axis=1)
        step = np.minimum(finish, begin)
        if not np.isfinite(step).any():
            break
        step = np.where(np.isfinite(step), step, 0.0)
        rem = np.where(active, rem - step[:, None] * scale[:, None], rem)
        rem[np.abs(rem) < 1e-6 * np.maximum(work, 1.0)] = 0.0
        t = t + step
    return t


def estimate_launch(layout: Layout, probes: Sequence[Sequence[Probe]], hw: Hardware) -> np.ndarray:
    """Cycles of the first launch for each candidate: ``probes[i][k]`` is candidate i's probe of class k."""
    per = np.array([[p.per_tile for p in ps] for ps in probes])  # [candidates, classes]
    fill = np.array([[p.fill for p in ps] for ps in probes])
    work = layout.counts @ fill.T + layout.tiles @ per.T  # [cores, candidates]
    l2 = layout.counts @ np.array([[p.fill_bytes for p in ps] for ps in probes]).T + \
        layout.tiles @ np.array([[p.tile_bytes for p in ps] for ps in probes]).T
    kv = np.array([max(ps, key=lambda p: p.tile_hbm).tile_hbm for ps in probes])
    hbm_total = layout.counts.sum(axis=0) @ np.array([[p.fill_hbm for p in ps] for ps in probes]).T + \
        layout.kv_tiles * kv
    sync = layout.counts @ np.array([[p.fill_sync for p in ps] for ps in probes]).T + \
        layout.tiles @ np.array([[p.tile_sync for p in ps] for ps in probes]).T
    share = l2 / np.maximum(l2.sum(axis=0), 1.0)  # each core's part of the launch's HBM bytes
    work, l2, hbm, sync = work.T, l2.T, (share * hbm_total).T, sync.T
    safe = np.maximum(work, 1.0)
    start = np.arange(layout.cores) * hw.overhead.core_stagger
    demand = [(l2 / safe, hw.gm.l2_bandwidth), (hbm / safe, hw.gm.hbm_bandwidth)]
    if hw.sync.ffts_service > 0:  # the sync unit serves one message per ffts_service cycles
        demand.append((sync / safe, 1.0 / hw.sync.ffts_service))
    return fluid_end(start, work, demand)


def estimate_combine(layout: Layout, probes: dict[tuple[int, int], Probe], hw: Hardware) -> float:
    """Cycles of the combine launch (0 without one): each core's blocks one after another, each its probed
    time."""
    if not layout.combine:
        return 0.0
    return max(c * hw.overhead.core_stagger + sum(probes[key].fill for key in queue)
               for c, queue in enumerate(layout.combine))


class Screen:
    """Probes and layouts of one tune, cached (see the module docstring)."""

    def __init__(self, shape: Config) -> None:
        self.mask = config_mask(shape)
        self.hardware: dict[int, Hardware] = {}
        self.layouts: dict[Hashable, Layout] = {}
        self.probes: dict[Hashable, Probe] = {}
        self.combines: dict[Hashable, Probe] = {}

    def hw(self, config: Config) -> Hardware:
        cores = config.hardware.cores
        if cores not in self.hardware:
            self.hardware[cores] = load_hardware(config.hardware)
        return self.hardware[cores]

    def layout(self, config: Config) -> Layout:
        t, s = config.tiling, config.schedule
        key = (t.cube_s0, t.cube_s1, t.tile_s1, s.s1_split, s.gqa_pack, s.block_order, config.hardware.cores,
               config.kernel.launch_grid)
        if key not in self.layouts:
            self.layouts[key] = make_layout(config, self.hw(config), self.mask)
        return self.layouts[key]

    def probe(self, config: Config, block: Block) -> Probe:
        key = probe_key(config, block)
        if key not in self.probes:
            self.probes[key] = run_probe(config, self.hw(config), block)
        return self.probes[key]

    def combine(self, config: Config, layout: Layout) -> dict[tuple[int, int], Probe]:
        out = {}
        for rows, chunks in {key for queue in layout.combine for key in queue}:
            key = (config.case.head, config.case.dtype, rows, chunks)
            if key not in self.combines:
                assert layout.geometry.combine is not None, "a layout with combine blocks has a combine launch"
                self.combines[key] = combine_probe(layout.geometry.combine, config, self.hw(config), rows, chunks)
            out[rows, chunks] = self.combines[key]
        return out

    def estimate(self, configs: Sequence[Config], tick: Callable[[int], Any] | None = None) -> list[dict[str, Any]]:
        """For each candidate: ``estimate_cycles``, ``screen_bound`` (the probe's busiest pipe of its largest
        class) and ``fingerprint`` (equal for candidates that run the same blocks and programs), or ``error``
        (a probe's schedule error); ``tick(n)`` after every n candidates estimated."""
        out: list[dict[str, Any]] = [{} for _ in configs]
        groups: dict[int, list[int]] = {}
        for i, config in enumerate(configs):
            groups.setdefault(id(self.layout(config)), []).append(i)
        for members in groups.values():
            layout = self.layout(configs[members[0]])
            probes = {i: [self.probe(configs[i], b) for b in layout.representative] for i in members}
            bad = {i: next(p.error for p in ps if p.error) for i, ps in probes.items() if any(p.error for p in ps)}
            good = [i for i in members if i not in bad]
            cycles = estimate_launch(layout, [probes[i] for i in good], self.hw(configs[members[0]])) if good \
                else np.zeros(0)
            for i, c in zip(good, cycles):
                config, hw = configs[i], self.hw(configs[i])
                comb = self.combine(config, layout)
                extra = estimate_combine(layout, comb, hw) + (hw.launch.gap(config.hardware.host) if comb else 0.0)
                biggest = int(np.argmax(layout.tiles.sum(axis=0)))
                out[i] = {"estimate_cycles": float(c) + extra, "screen_bound": probes[i][biggest].bound,
                          "fingerprint": (layout.fingerprint, program_knobs(config))}
            for i, message in bad.items():
                out[i] = {"error": message}
            if tick is not None:
                tick(len(members))
        return out
