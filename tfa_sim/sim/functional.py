"""The kernel's arithmetic without time: every block, tile by tile, through the four stages.

The SimPy engine runs the same stage functions in the kernel's schedule; the
output bits do not depend on the schedule, so this is also its reference.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tfa_sim.backends.interface import Backend
from tfa_sim.listings.library import StageListing, listings_of
from tfa_sim.numerics.blas import blas_threads
from tfa_sim.numerics.inputs import Inputs
from tfa_sim.numerics.intermediates import INTERMEDIATES, block_index, empty_full
from tfa_sim.numerics.rounding import input_dtype, softmax_scale
from tfa_sim.spec.blocks import Block, combine_blocks, make_blocks
from tfa_sim.spec.config import Config
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.stages.block_kernel import Partials
from tfa_sim.stages.combine import merge_of
from tfa_sim.stages.compute_gu import update_of
from tfa_sim.stages.compute_p import softmax_of
from tfa_sim.stages.compute_pv import pv_tile
from tfa_sim.stages.compute_qk import qk_product
from tfa_sim.stages.plan import matmul_panels, shape_of

F32 = np.float32


#: Every intermediate of a run in the full layout (tfa_sim.numerics.intermediates), by dump name.  Tiles a causal
#: block does not issue hold what the kernel would carry: QK and x_exp +0, l1_exp_max 1, running max/sum/O
#: unchanged, PV +0.
Intermediates = dict[str, np.ndarray]


def empty_intermediates(config: Config) -> Intermediates:
    return {item.name: empty_full(item, config) for item in INTERMEDIATES}


class BlockResult(NamedTuple):
    """A block's rows at its end: O (normalised, or a chunk's unnormalised O), running max and sum."""

    o: np.ndarray
    m: np.ndarray
    l: np.ndarray


def run_block(backend: Backend, config: Config, block: Block, inputs: Inputs,
              record: Intermediates | None = None, listings: dict[str, StageListing] | None = None) -> BlockResult:
    """One block, stages in program order: its rows' fp32 O (rows × HEAD), max and sum, the vector stages as
    their ``listings`` compute (the config's unless given)."""
    c, t_cfg = config.case, config.tiling
    n, cube_s1, tile_s1, vec_s0 = block.n_rows, t_cfg.cube_s1, t_cfg.tile_s1, t_cfg.vec_s0
    dtype = input_dtype(c.dtype)
    listings = listings or listings_of(config)
    shape = shape_of(config, load_hardware(config.hardware))
    qk_panel, pv_panel = matmul_panels(config)
    rows = block.rows
    q_block = inputs.q[rows.batch, rows.heads, rows.pos]
    k = inputs.k[block.batch, block.kv_head]
    v = inputs.v[block.batch, block.kv_head]
    m, l = np.empty(n, F32), np.empty(n, F32)
    running_o = np.empty((n, c.head), F32)
    last = block.tiles - 1
    slices = [(r0 + s, min(vec_s0, count - s), s // vec_s0) for r0, count in map(block.lane_rows, range(2))
              for s in range(0, count, vec_s0)]  # each AIV's rows in Vec_S0 slices, with their index
    for t in range(block.tiles):
        tile = block.tile_id(t)
        cols = slice(tile * tile_s1, (tile + 1) * tile_s1)
        qk_tile = np.zeros((n, tile_s1), F32)  # sub-tiles no row sees stay +0
        for s in block.active_subs(t):
            c0 = block.col0(t, s)
            qk_tile[:, s * cube_s1:(s + 1) * cube_s1] = qk_product(backend, qk_panel, q_block, k[c0:c0 + cube_s1])
        x_exp = np.empty((n, tile_s1), dtype)
        exp_max = np.empty(n, F32)
        for r0, nr, r in slices:
            sl = slice(r0, r0 + nr)
            names = {"first": t == 0, "first_slice": r == 0, "last_slice": r == t_cfg.k_tile_factor - 1,
                     "mask": block.coverage(t, r0, nr), "softcap": c.softcap > 0}
            step = softmax_of(listings["compute_p"], backend, names, block.masked(t, r0, nr), shape, nr)
            x_exp[sl], exp_max[sl], m[sl], l[sl] = step(qk_tile[sl], None if t == 0 else m[sl],
                                                        None if t == 0 else l[sl])
        pv = pv_tile(backend, pv_panel, block, t, x_exp, v[cols])
        divide = t == last and not block.partial
        names = {"first": t == 0, "last": t == last, "divide": divide, "partial_chunk": block.partial,
                 "first_part": True, "last_part": True}
        gu = update_of(listings["compute_gu"], backend, names, shape)
        for r0, count in map(block.lane_rows, range(2)):
            hs = slice(r0, r0 + count)
            running_o[hs] = gu(pv[hs] if t == 0 else running_o[hs], pv[hs], exp_max[hs], l[hs])
        if record is not None:
            _record(record, config, block, tile, qk_tile, x_exp, exp_max, m, l, pv, running_o)
    return BlockResult(running_o, m, l)


def _record(record: Intermediates, config: Config, block: Block, tile: int, *values: np.ndarray) -> None:
    """Store one tile's intermediates; the running max, sum and O are carried to the tiles after it (up to
    the end of the block's S1 chunk)."""
    for item, value in zip(INTERMEDIATES, values):
        if item.skipped is None:  # carried: until the block's next issued tile overwrites them
            for later in range(tile, block.tile_end):
                record[item.name][block_index(item, block, later, config)] = value
        else:
            record[item.name][block_index(item, block, tile, config)] = value


def run_functional(backend: Backend, config: Config, inputs: Inputs, record: bool = False,
                   cores: int = 1) -> tuple[np.ndarray, Intermediates | None]:
    """O [batch, heads, S0, HEAD] fp32 and, with ``record``, every intermediate; ``cores`` decides
    ``s1_split = "auto"`` as the run did."""
    with blas_threads(config.numerics.blas_threads):
        c = config.case
        out = np.empty((c.batch, c.heads, c.s0, c.head), F32)
        rec = empty_intermediates(config) if record else None
        blocks = make_blocks(config, cores=cores)
        listings = listings_of(config)
        chunks = max(b.chunks for b in blocks)
        parts = Partials.empty(chunks, c.batch, c.heads, c.s0, c.head) if chunks > 1 else None
        for block in blocks:
            rows = block.rows
            result = run_block(backend, config, block, inputs, rec, listings)
            if parts is None:
                out[rows.batch, rows.heads, rows.pos] = result.o
            else:
                for a, value in zip((parts.o, parts.m, parts.l), result):
                    a[block.chunk, rows.batch, rows.heads, rows.pos] = value
        if parts is not None:
            scale = F32(1.0) if c.softcap else softmax_scale(c.head)
            for cb in combine_blocks(blocks):
                index = (np.array(cb.chunks)[:, None], cb.rows.batch, cb.rows.heads[None, :], cb.rows.pos[None, :])
                dest = (cb.rows.batch, cb.rows.heads, cb.rows.pos)
                combine = merge_of(listings["combine"], backend, len(cb.chunks), scale)
                out[dest] = combine(parts.o[index], parts.m[index], parts.l[index])
                if rec is not None:
                    rec["combine_o"][dest] = out[dest]
        return out, rec
