"""The chip's limits: the peak rate of every resource the kernel uses, derived from the preset's own figures.

No number here is new: each limit is one of the preset's (``configs/hw/*.toml``) or follows from the cost model
that prices the resource's instructions (docs/timing.md, "Costs"), so the simulation can never beat it — an
instruction costs at least its work at the peak (the ceiling test, ``tests/test_roofline.py``):

* ``cube.M``: a TMATMUL costs ``ceil(M/f)·ceil(K/f)·ceil(N/f)`` cycles per panel plus overhead, one f×f×f step a
  cycle: ``cube.fractal``³ MACs per cycle per AIC (4096 = 8192 FLOP at f = 16);
* ``vec.V.<class>``: a pass of an intrinsic class costs ``vector.<class>_per_repeat`` cycles per repeat of
  ``vector.repeat_bytes`` (startup and completion on top): ``repeat_bytes / 4 / per_repeat`` 32-bit elements per
  cycle per AIV (binary and exp 32, scalar, convert and reduce 64, div 16 on the shipped presets); a class of 0
  cycles per repeat has no limit;
* ``cube.MTE2`` (GM→L1), ``cube.MTE1.l1_to_l0a`` and ``cube.MTE1.l1_to_l0b`` (TEXTRACT's two paths), ``cube.FIX``
  (L0C→GM), ``vec.MTE2`` (GM→UB), ``vec.MTE3`` (UB→GM): the core's path rates of ``[move]``, bytes per cycle per
  unit (a GM transfer is never faster than its path; ``engine/gm.py``);
* ``gm.L2`` and ``gm.HBM``: the chip-wide ``gm.l2_bandwidth`` (every GM read and write goes through the L2) and
  ``gm.hbm_bandwidth`` (the reads that miss it), bytes per cycle for the whole chip.  The model has no separate
  read and write limit: reads (the MTE2s) and writes (FIX, MTE3) share the L2, and only reads reach HBM.
"""
from __future__ import annotations

from dataclasses import dataclass

from tfa_sim.spec.hardware import Hardware

#: The vector intrinsic classes that do counted work (``broadcast``, vbrcb, has no repeats: spec/work.py).
VECTOR_CLASSES = ("binary", "div", "scalar", "exp", "convert", "reduce")
#: Bytes of the element a vector limit counts (spec/work.py counts every repeat as 32-bit elements).
ELEMENT_BYTES = 4
#: The resource of each single-rate pipe that moves bytes, and its path in the preset's ``[move]``.
MOVE_PIPES = {"cube.MTE2": "gm_to_l1", "cube.FIX": "l0c_to_gm", "vec.MTE2": "gm_to_ub", "vec.MTE3": "ub_to_gm"}
#: The pipes that move to or from GM (their bytes are the L2's traffic).
GM_PIPES = tuple(MOVE_PIPES)


@dataclass(frozen=True)
class Limit:
    """One resource's peak: ``per_cycle`` ``unit``\\ s per cycle per AIC (``scope`` ``cube``), per AIV (``vec``)
    or for the whole chip (``chip``); ``pipe`` is the pipe kind whose instructions use it (None: shared by
    several); ``source`` the preset keys it comes from."""

    name: str
    pipe: str | None
    unit: str
    per_cycle: float
    scope: str
    source: str


def chip_limits(hw: Hardware) -> dict[str, Limit]:
    """Every resource's :class:`Limit` on ``hw``, by name (the module docstring)."""
    f, v, move = hw.cube.fractal, hw.vector, hw.move
    out = [Limit("cube.M", "cube.M", "MAC", float(f ** 3), "cube", "cube.fractal³")]
    for cls in VECTOR_CLASSES:
        per_repeat = getattr(v, f"{cls}_per_repeat")
        if per_repeat > 0:
            out.append(Limit(f"vec.V.{cls}", "vec.V", "element", v.repeat_bytes / ELEMENT_BYTES / per_repeat, "vec",
                             f"vector.repeat_bytes / 4 / vector.{cls}_per_repeat"))
    for pipe, path in MOVE_PIPES.items():
        out.append(Limit(pipe, pipe, "byte", getattr(move, path), pipe.split(".")[0], f"move.{path}"))
    for path in ("l1_to_l0a", "l1_to_l0b"):
        out.append(Limit(f"cube.MTE1.{path}", "cube.MTE1", "byte", getattr(move, path), "cube", f"move.{path}"))
    out.append(Limit("gm.L2", None, "byte", hw.gm.l2_bandwidth, "chip", "gm.l2_bandwidth"))
    out.append(Limit("gm.HBM", None, "byte", hw.gm.hbm_bandwidth, "chip", "gm.hbm_bandwidth"))
    return {limit.name: limit for limit in out}
