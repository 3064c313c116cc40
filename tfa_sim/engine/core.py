"""One AI core: an AIC (``coreN.cubecore0``) with pipes MTE2, MTE1, M, FIX and two AIVs
(``coreN.veccore0/1``) with MTE2, V, MTE3, each pipe an in-order :class:`~tfa_sim.engine.pipes.Pipe`."""
from __future__ import annotations

from typing import Any, NamedTuple

import simpy

from tfa_sim.buffers.ffts import Ffts
from tfa_sim.engine.pipes import Pipe, Stats
from tfa_sim.spec.units import LANES, cube_unit, vec_unit


class CubePipes(NamedTuple):
    MTE2: Pipe  # GM → L1
    MTE1: Pipe  # L1 → L0A/L0B
    M: Pipe  # matmul into L0C
    FIX: Pipe  # L0C → GM (fixpipe)


class VecPipes(NamedTuple):
    MTE2: Pipe  # GM → UB
    V: Pipe  # vector ALU
    MTE3: Pipe  # UB → GM


class Core:
    """The pipes of AI core ``index``; they persist across the blocks the core runs."""

    def __init__(self, env: simpy.Environment, index: int, stats: Stats, gm: Any, ffts: Ffts | None = None) -> None:
        self.index = index
        self.ffts = ffts  # the chip's cross-core sync unit, shared by all cores (None: sets never queue)
        cube = cube_unit(index).name
        self.cube = CubePipes(*(Pipe(env, cube, p, stats, gm) for p in CubePipes._fields))
        self.vec = [VecPipes(*(Pipe(env, vec_unit(index, a).name, p, stats, gm) for p in VecPipes._fields))
                    for a in range(LANES)]
        self.streams: list[Any] = []  # the issue streams of the block the core runs (deadlock report)

    def pipes(self) -> list[Pipe]:
        return [*self.cube, *(p for v in self.vec for p in v)]
