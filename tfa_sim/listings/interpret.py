"""A listing's vector instructions run one by one on numpy tiles, each with the kernel's rounding
(:mod:`tfa_sim.listings.isa`): the numerics of a listing whose math is not the shipped one."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tfa_sim.listings.isa import Semantics
from tfa_sim.listings.resolve import Line


def run(lines: Iterable[Line], tiles: dict[str, Any], semantics: Semantics, scalars: Mapping[str, Any],
        consts: Mapping[str, float]) -> dict[str, Any]:
    """``tiles`` (name → array, updated in place and returned) after ``lines``: vector instructions compute, TLOAD
    and TSTORE copy, the rest (flags, barriers, waits) order the hardware only."""
    def read(name: str) -> Any:
        if name not in tiles and name in consts:
            return np.float32(consts[name])
        return tiles[name]

    for line in lines:
        op = line.op
        if op.name in ("TLOAD", "TSTORE"):
            sources = [tiles[t] for t in line.tiles("r") if t in tiles]
            for i, dst in enumerate(line.tiles("w")):
                if sources:
                    tiles[dst] = np.array(sources[min(i, len(sources) - 1)], copy=True)
            continue
        if not op.vector:
            continue
        values: list[Any] = []
        for role, a in zip(line.roles, line.args):
            if role == "r":
                values.append(read(a))
            elif role == "s":
                values.append(np.float32(scalars[a]) if isinstance(a, str) else np.float32(a))
            elif role == "m":
                values.append(a)
        assert op.fn is not None
        out = op.fn(semantics, *values)
        for dst in line.tiles("w"):
            tiles[dst] = out
    return tiles
