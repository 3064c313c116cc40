"""The kernel's arithmetic without time: every block, tile by tile, through the four stages.

The SimPy engine runs the same stage functions in the kernel's schedule; the
output bits do not depend on the schedule, so this is also its reference.
"""
from __future__ import annotations

import numpy as np

from tfa_sim.backends import Backend
from tfa_sim.blocks import Block, make_blocks
from tfa_sim.config import Config
from tfa_sim.inputs import Inputs
from tfa_sim.intermediates import INTERMEDIATES, empty_full
from tfa_sim.numerics import softmax_scale
from tfa_sim.stages.compute_gu import update
from tfa_sim.stages.compute_p import softmax
from tfa_sim.stages.compute_pv import pv_tile

F32 = np.float32


#: Every intermediate of a run in the full layout (tfa_sim.intermediates), by dump name.  Tiles a causal
#: block does not issue hold what the kernel would carry: QK and x_exp +0, l1_exp_max 1, running max/sum/O
#: unchanged, PV +0.
Intermediates = dict[str, np.ndarray]


def empty_intermediates(config: Config) -> Intermediates:
    return {item.name: empty_full(item, config) for item in INTERMEDIATES}


def run_block(backend: Backend, config: Config, block: Block, inputs: Inputs,
              record: Intermediates | None = None) -> np.ndarray:
    """One block's fp32 output rows (CUBE_S0 × HEAD), stages in program order."""
    t_cfg, head = config.tiling, config.case.head
    cube_s0, cube_s1, tile_s1, vec_s0 = t_cfg.cube_s0, t_cfg.cube_s1, t_cfg.tile_s1, t_cfg.vec_s0
    half = cube_s0 // 2
    scale = softmax_scale(head)
    rows = slice(block.row0, block.row0 + cube_s0)
    q_block = inputs.q[block.batch, block.head, rows]
    k = inputs.k[block.batch, block.kv_head]
    v = inputs.v[block.batch, block.kv_head]
    m = np.empty(cube_s0, F32)
    l = np.empty(cube_s0, F32)
    running_o = np.empty((cube_s0, head), F32)
    last = block.tiles - 1
    for t in range(block.tiles):
        cols = slice(t * tile_s1, (t + 1) * tile_s1)
        qk_tile = np.zeros((cube_s0, tile_s1), F32)  # sub-tiles above the causal diagonal stay +0
        for s in range(t_cfg.k_tile_factor):
            if block.sub_tile_active(t, s):
                c0 = block.col0(t, s)
                qk_tile[:, s * cube_s1:(s + 1) * cube_s1] = backend.compute_qk(q_block, k[c0:c0 + cube_s1])
        x_exp = np.empty((cube_s0, tile_s1), np.float16)
        exp_max = np.empty(cube_s0, F32)
        for r0 in range(0, cube_s0, vec_s0):  # AIV 0 owns rows [0, half), AIV 1 [half, cube_s0)
            sl = slice(r0, r0 + vec_s0)
            x_exp[sl], exp_max[sl], m[sl], l[sl] = softmax(backend, block, t, block.row0 + r0, scale, qk_tile[sl],
                                                           None if t == 0 else m[sl], None if t == 0 else l[sl])
        pv = pv_tile(backend, block, t, x_exp, v[cols])
        for aiv in range(2):
            hs = slice(aiv * half, (aiv + 1) * half)
            running_o[hs] = update(backend, t == 0, t == last, running_o[hs], pv[hs], exp_max[hs], l[hs])
        if record is not None:
            idx = (block.batch, block.head)
            record["qk_fifo"][idx][rows, cols] = qk_tile
            record["p_fifo"][idx][rows, cols] = x_exp
            record["exp_max"][idx][t, rows] = exp_max
            record["pv_fifo"][idx][t, rows] = pv
            record["global_max"][idx][t:, rows] = m  # carried to the tiles a causal block does not issue
            record["global_sum"][idx][t:, rows] = l
            record["o_part"][idx][t:, rows] = running_o
    return running_o


def run_functional(backend: Backend, config: Config, inputs: Inputs,
                   record: bool = False) -> tuple[np.ndarray, Intermediates | None]:
    """O [batch, heads, S0, HEAD] fp32 and, with ``record``, every intermediate."""
    c = config.case
    out = np.empty((c.batch, c.heads, c.s0, c.head), F32)
    rec = empty_intermediates(config) if record else None
    for block in make_blocks(config):
        out[block.batch, block.head, block.row0:block.row0 + config.tiling.cube_s0] = \
            run_block(backend, config, block, inputs, rec)
    return out, rec
