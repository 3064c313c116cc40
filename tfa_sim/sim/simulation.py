"""One simulated run of the TFA kernel: the stage programs (``tfa_sim.stages``) on the chip engine.

A split-S1 run is two launches: the TFA kernel, whose blocks leave partial
results, then the combine (:mod:`tfa_sim.stages.combine`).
"""
from __future__ import annotations

from collections.abc import Sequence

from tfa_sim.engine.chip import Kernel, SimResult, run_chip
from tfa_sim.sim.fold import foldable, simulate_folded
from tfa_sim.sim.parallel import spare_cpus
from tfa_sim.spec.blocks import Block, row_groups
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.stages.block_kernel import Numerics, Partials
from tfa_sim.stages.combine import CombineKernel
from tfa_sim.stages.plan import KernelPlan
from tfa_sim.stages.run_tfa import TfaKernel


def launches(plan: KernelPlan, numerics: Numerics | None = None) -> list[Kernel]:
    """The kernels of one run, in launch order (allocating the partials a split run passes between them)."""
    tfa = TfaKernel(plan, numerics)
    if plan.geometry.combine is None:
        return [tfa]
    c = plan.config.case
    if numerics is not None:
        numerics.partials = Partials.empty(plan.geometry.chunks, c.batch, c.heads, c.s0, c.head)
    return [tfa, CombineKernel(plan, numerics)]


def work(config: Config, blocks: Sequence[Block]) -> dict[str, int]:
    """What the blocks issue: logical tiles issued and skipped (a mask hides them from every row of the
    block), cube sub-tiles skipped within issued tiles, the K and V bytes the blocks load, and the S1
    chunks per row block run (``s1_split`` as resolved)."""
    c, t = config.case, config.tiling
    issued = sum(b.tiles for b in blocks)
    computed = sum(b.work for b in blocks)
    return {"tiles_issued": issued, "tiles_skipped": len(row_groups(config)) * config.tiles - issued,
            "sub_tiles_skipped": issued * t.k_tile_factor - computed,
            "kv_bytes": 2 * computed * t.cube_s1 * c.head * 2,
            "s1_split": max((b.chunks for b in blocks), default=1)}


def op_workers(config: Config, goldens_forked: bool = False) -> int:
    """Worker threads for the blocks' stage kernels, 0 for none (each step runs in the simulation's thread).
    ``numerics.threads`` = n > 1 asks for n and 1 for none; 0 (the default) takes every CPU to spare, less one
    for the goldens' forked child (``goldens_forked``), and none on one CPU.  On 2 CPUs that is one worker
    beside the simulation and the child: S0 = 512, S1 = 8192 native 0.71 s inline, 0.58 s with one worker,
    0.75–0.82 s with two; numpy 2.01 s with one, 2.06 s with two (benchmarks/README.md)."""
    if config.numerics.threads:
        return config.numerics.threads if config.numerics.threads > 1 else 0
    cpus = spare_cpus()
    if cpus == 1:
        return 0
    return cpus - 1 if goldens_forked else cpus


def simulate(plan: KernelPlan, numerics: Numerics | None = None, log_events: bool = True, fold: bool = False,
             kernels: list[Kernel] | None = None, goldens_forked: bool = False) -> SimResult:
    """Run the whole kernel of ``plan`` once; fills ``numerics.out`` when numerics are on.  ``fold``: a
    timing-only run without event log is estimated from short samples where that is sound
    (:mod:`tfa_sim.sim.fold`).  ``kernels``: the run's launches if built already (``launches(plan,
    numerics)``); ``goldens_forked``: a forked child computes the goldens meanwhile (:func:`op_workers`)."""
    config, hw = plan.config, plan.hw
    kernels = kernels or launches(plan, numerics)
    if fold and (numerics is not None or log_events):
        raise InputError("--fold estimates the time of a timing-only run without event log: add --no-numerics, "
                         "or drop --fold")
    refused = foldable(kernels) if fold else None
    gap = hw.launch.gap(config.hardware.host)
    if fold and refused is None:
        s = config.schedule
        result = simulate_folded(kernels, hw, s.qk_preload, gap, period=s.cv_fifo_cons_sync_period)
    else:
        workers = op_workers(config, goldens_forked) if numerics is not None else 0
        result = run_chip(kernels, hw, log_events, workers, gap)
        result.folded = refused and f"not folded: {refused}"
    result.work = work(config, kernels[0].dispatch.order)
    return result
