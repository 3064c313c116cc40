"""Names of the chip's units and pipes, the one place that builds and parses them.

A unit is named like the vendor tools: ``core3.cubecore0`` (the AIC of AI core
3) and ``core3.veccore0`` / ``core3.veccore1`` (its two AIVs); a pipe is
``core3.veccore1.V``.  Every table, trace and report goes through these
helpers instead of splitting strings itself.
"""
from __future__ import annotations

import re
from typing import NamedTuple

CUBE_PIPES = ("MTE2", "MTE1", "M", "FIX")
VEC_PIPES = ("MTE2", "V", "MTE3")
PIPES = {"cube": CUBE_PIPES, "vec": VEC_PIPES}
#: The tracks a timeline shows per unit: the pipes, and on the AIC the dispatch of each block before them.
TRACKS = {"cube": ("dispatch", *CUBE_PIPES), "vec": VEC_PIPES}
#: Vector cores (AIVs) per AI core.
LANES = 2


class Unit(NamedTuple):
    """One unit of one AI core: ``kind`` is ``cube`` or ``vec``; ``number`` is 0 for the AIC, the lane for an AIV."""

    core: int
    kind: str
    number: int

    @property
    def name(self) -> str:
        """``core3.cubecore0`` / ``core3.veccore1``."""
        return f"core{self.core}.{self.kind}core{self.number}"

    @property
    def core_name(self) -> str:
        return f"core{self.core}"

    @property
    def sort_key(self) -> tuple[int, int]:
        """Core number, then the cube before vec0 before vec1."""
        return self.core, 0 if self.kind == "cube" else 1 + self.number


def cube_unit(core: int) -> Unit:
    return Unit(core, "cube", 0)


def vec_unit(core: int, lane: int) -> Unit:
    return Unit(core, "vec", lane)


def parse_unit(name: str) -> Unit:
    """``core3.veccore1`` → Unit(3, "vec", 1); also accepts a pipe's full name (``core3.veccore1.V``)."""
    core, unit = name.split(".")[:2]
    kind = "cube" if unit.startswith("cubecore") else "vec"
    return Unit(int(core[4:]), kind, int(unit[len(kind) + 4:]))


def pipe_kind(full_name: str) -> str:
    """``core3.veccore1.V`` → ``vec.V``; ``core0.cubecore0.FIX`` → ``cube.FIX``."""
    unit, _, pipe = full_name.rpartition(".")
    return f"{parse_unit(unit).kind}.{pipe}"


def buffer_owner(name: str) -> tuple[str, str]:
    """A buffer's unit and its name there: ``core0.veccore1.UB.src`` → (``core0.veccore1``, ``UB.src``);
    ``core0.L1.k`` → (``core0.cubecore0``, ``L1.k``) — buffers not named under an AIV belong to the AIC."""
    core, rest = name.split(".", 1)
    if rest.startswith("veccore"):
        unit, track = rest.split(".", 1)
        return f"{core}.{unit}", track
    return f"{core}.cubecore0", rest


def without_lane(short_name: str) -> str:
    """A buffer or flag name with its AIV marked out, to add both lanes up: ``veccore1.UB.src`` → ``UB.src``,
    ``qk_tile_fifo.ready[aiv0]`` → ``qk_tile_fifo.ready``."""
    return re.sub(r"\[aiv\d\]|^veccore\d\.", "", short_name)
