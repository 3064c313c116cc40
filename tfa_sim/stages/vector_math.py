"""What a call's vector lines compute: the backend's stage kernel when the lines write the shipped listing's math
(today's bits on both backends), else the lines one by one in numpy with the kernel's rounding
(:mod:`tfa_sim.listings.interpret`) — on either backend: the native kernels run the shipped math only, so a listing
that changes the math runs its vector steps in numpy (the run's report says so)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tfa_sim.listings.interpret import run
from tfa_sim.listings.isa import Semantics
from tfa_sim.listings.program import Step
from tfa_sim.listings.resolve import Line
from tfa_sim.numerics import rounding as nx


def semantics(backend: Any, out_dtype: Any, mask: np.ndarray | None = None) -> Semantics:
    """The vector instructions' rounding of the run's numerics (its exp model and reference)."""
    cpu_sim = backend.reference == "cpu_sim"
    return Semantics(nx.EXP_MODELS["cpu_sim" if cpu_sim else backend.exp_model],
                     nx.row_max_first if cpu_sim else nx.row_max, nx.maximum_first if cpu_sim else nx.maximum,
                     out_dtype, mask)


def last_vector(steps: Sequence[Step]) -> Step | None:
    """The call's last group on PIPE_V (a ``mark`` too): the one whose completion runs the call's math (all its
    inputs are loaded, none of its outputs read yet)."""
    return next((s for s in reversed(steps) if s.pipe == "V"), None)


def vector_lines(steps: Sequence[Step]) -> tuple[Line, ...]:
    """Every vector instruction of the call, in order."""
    return tuple(ln for s in steps if s.pipe == "V" for ln in s.instructions)


def interpreted(lines: Sequence[Line], meaning: Semantics, scalars: Mapping[str, Any], consts: Mapping[str, Any],
                inputs: Sequence[str], outputs: Sequence[str], start: Mapping[str, Callable[[], Any]]
                ) -> Callable[..., tuple[Any, ...]]:
    """A function of the ``inputs``' arrays (in order; None: absent) that runs ``lines`` and returns the
    ``outputs``' (an output the lines leave alone comes from ``start``, as does a tile read before it is
    written: what the call's tiles held)."""
    values = {name: decl.value for name, decl in consts.items()}

    def fn(*arrays: Any) -> tuple[Any, ...]:
        tiles = {name: start[name]() for name in start}
        tiles.update({name: np.array(a, copy=True) for name, a in zip(inputs, arrays) if a is not None})
        run(lines, tiles, meaning, scalars, values)
        return tuple(tiles[name] for name in outputs)
    return fn
