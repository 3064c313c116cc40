"""One plan for every reader: a config resolved once into what the kernel runs (:class:`KernelPlan`).

:func:`kernel_plan` resolves a legal config on a chip into the design choices' registered values (and what each
does), the launch geometry, the tile shapes, the buffer plan and the costs.  The simulation (:mod:`tfa_sim.sim`),
the fold, the tuner's screen, the prediction, calibration and the profile checks all take a plan, so none of them
decodes a choice or derives the geometry again.  The plan is immutable; its :class:`~tfa_sim.spec.costs.Costs`
only memoises.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfa_sim.buffers.capacity import BufferPlan, buffer_plan, cube_k
from tfa_sim.listings.library import StageListing, listings_of
from tfa_sim.numerics.rounding import input_dtype, kernel_cube_k, softmax_scale
from tfa_sim.spec.blocks import config_mask, prefetched_rows
from tfa_sim.spec.choices import Value, resolve
from tfa_sim.spec.config import Config
from tfa_sim.spec.costs import Costs
from tfa_sim.spec.geometry import Geometry, LaunchGrid, launch_geometry
from tfa_sim.spec.hardware import Hardware, load_hardware
from tfa_sim.spec.masks import Mask


@dataclass(frozen=True)
class Shape:
    """The per-block sizes every stage uses."""

    head: int
    cube_s0: int
    cube_s1: int
    tile_s1: int
    k_tile_factor: int
    vec_s0: int  # rows of one compute_p row slice
    half: int  # rows per AIV (CUBE_S0 / 2)
    qk_preload: int
    qk_cube_k: int  # CubeK of compute_qk's matmul
    pv_cube_k: int
    scale: np.float32  # the softmax scale s, the kernel's constexpr_inv_sqrt(HEAD) (rounding.softmax_scale)
    softcap: float  # c > 0: scores capped to c·tanh(s·x/c); 0: off
    dtype: Any  # Q, K, V and P (x_exp): float16 or bfloat16
    qk_panel: int  # the numerics' K panel of compute_qk's matmul (rounding.kernel_cube_k: the kernel's, no knob)
    pv_panel: int  # the same of compute_pv's, within one CUBE_S1 sub-tile


def matmul_panels(config: Config) -> tuple[int, int]:
    """The K panels of the numerics' matmuls, (QK, PV), as the kernel's calls ``pto_macro_matmul<CUBE_S0, HEAD,
    CUBE_S1>`` (QK) and ``<CUBE_S0, CUBE_S1, HEAD>`` (PV, one call per sub-tile) cut them."""
    c, t = config.case, config.tiling
    return kernel_cube_k(t.cube_s0, t.cube_s1, c.head), kernel_cube_k(t.cube_s0, c.head, t.cube_s1)


def shape_of(config: Config, hw: Hardware) -> Shape:
    """The tile shapes of ``config`` on ``hw`` (its L0A/L0B halves decide CubeK)."""
    c, t, s = config.case, config.tiling, config.schedule
    l0a_half, l0b_half = hw.l0a // s.l0a, hw.l0b // s.l0b
    qk_k = cube_k(t.cube_s0, t.cube_s1, c.head, l0a_half, l0b_half)
    pv_k = cube_k(t.cube_s0, c.head, t.cube_s1, l0a_half, l0b_half)
    assert qk_k is not None and pv_k is not None, "legality admits only configs with a CubeK"
    return Shape(c.head, t.cube_s0, t.cube_s1, t.tile_s1, t.k_tile_factor, t.vec_s0, t.cube_s0 // 2, s.qk_preload,
                 qk_k, pv_k, softmax_scale(c.head), c.softcap, input_dtype(c.dtype), *matmul_panels(config))


@dataclass(frozen=True)
class KernelPlan:
    """A config resolved on a chip: ``values`` (each design choice's registered value, by key) and, for the stage
    programs, what the values they read do; the launch ``geometry``, the tile ``shape``, the ``buffers``, the
    ``costs`` and the rows the host ``prefetched``.  ``hw`` is the chip as the run uses it (``hardware.cores``
    applied)."""

    config: Config
    hw: Hardware
    values: dict[str, Value]
    geometry: Geometry
    shape: Shape
    buffers: BufferPlan
    costs: Costs
    prefetched: int
    launch_grid: LaunchGrid
    stage_order: Any  # a module or object with aic_steady, aiv_steady and lead (tfa_sim.stages.order_qk_pv)
    accumulators: Any  # a class of tfa_sim.stages.accumulators
    gu_rows: Any  # tfa_sim.stages.compute_gu: parts per kTileFactor
    listings: dict[str, StageListing]  # each stage's listing (its calls' steps)

    @property
    def choices(self) -> dict[str, Any]:
        """Each design choice's value as the config spells it (reports, fingerprints, calibration)."""
        return {key: value.name for key, value in self.values.items()}


def chip(config: Config, hw: Hardware | None = None) -> Hardware:
    """The chip a run of ``config`` uses: ``hw`` (a preset with fitted values, say) or the config's preset, with
    the config's ``hardware.cores`` applied — the one place that applies it."""
    if hw is None:
        return load_hardware(config.hardware)
    cores = config.hardware.cores
    return hw.with_cores(cores) if cores and cores != hw.cube_cores else hw


def kernel_plan(config: Config, hw: Hardware | None = None, mask: Mask | None = None) -> KernelPlan:
    """Resolve a legal ``config`` on ``hw`` (default: its preset; see :func:`chip`); ``mask``: the config's, if
    loaded already."""
    hw = chip(config, hw)
    values = resolve(config.kernel)
    listings = listings_of(config)
    geometry = launch_geometry(config, hw.cube_cores, mask or config_mask(config))
    return KernelPlan(config, hw, values, geometry, shape_of(config, hw), buffer_plan(config), Costs(hw),
                      prefetched_rows(config), values["launch_grid"].does, values["stage_order"].does,
                      values["accumulators"].does, values["gu_rows"].does, listings)
