"""The work of an instruction whose pipe has more than one peak rate, as the label the event log keeps for it.

Most instructions do one kind of work at one peak: a TLOAD moves ``nbytes`` on its path, a TMATMUL does ``flops``
(two per MAC) on the cube; :class:`~tfa_sim.engine.pipes.Instr` carries those.  Two do not, and the roofline
(:mod:`tfa_sim.views.roofline`) needs their split:

* a vector op sequence (pipe V) runs passes of several intrinsic classes, each with its own cycles per 256-byte
  repeat (docs/timing.md, "Vector instructions").  Its work is counted per class in **element operations**: the
  repeats of every pass of that class times the 32-bit elements a repeat holds (``vector.repeat_bytes / 4``: 64).
  A pass over a partial repeat counts the whole repeat, as the pipe runs it; the one fp16 pass of the model (a
  fully masked slice's TMULS, 128 elements a repeat) counts its repeats × 64 too, so a class's peak of
  elements per repeat ÷ cycles per repeat (:mod:`tfa_sim.spec.limits`) holds for every pass.  ``vbrcb`` (class
  ``broadcast``) has no repeats: it costs its completion only and does no counted work.
* a TEXTRACT (pipe MTE1) moves a panel L1→L0A and one L1→L0B, at two path rates: its work is the bytes of each.

A label is ``name=amount`` pairs, by name, space-separated (``binary=8256 exp=8256 reduce=9344``); a handful of
distinct labels per run, so the log keeps each once (``rundir.events``, the ``works`` table).  The labels of a
shape are memoised: a run issues the same few shapes many times.
"""
from __future__ import annotations

from functools import lru_cache

from tfa_sim.spec.costs import FP32, Costs, Group

#: The two paths of a TEXTRACT (the preset's ``move`` keys).
EXTRACT_PATHS = ("l1_to_l0a", "l1_to_l0b")
#: Memoised shapes (a few per run; the bound keeps a long sweep's worker from holding every run's Costs).
MEMO = 4096


def label(amounts: dict[str, int]) -> str:
    """``name=amount`` pairs of the non-zero amounts, sorted by name."""
    return " ".join(f"{name}={amount}" for name, amount in sorted(amounts.items()) if amount)


def parse(text: str) -> dict[str, int]:
    """A label's amounts by name; ValueError for anything that is not a label."""
    out: dict[str, int] = {}
    for pair in text.split():
        name, sep, amount = pair.partition("=")
        if not sep or not name or not amount.isdigit():
            raise ValueError(f"work label {text[:60]!r} is not name=amount pairs")
        out[name] = out.get(name, 0) + int(amount)
    return out


@lru_cache(maxsize=MEMO)
def vector_label(costs: Costs, groups: tuple[Group, ...]) -> str:
    """Element operations per intrinsic class of vector op ``groups`` (the module docstring; memoised)."""
    per_repeat = costs.vec.repeat_bytes // FP32
    amounts: dict[str, int] = {}
    for group in groups:
        for op in group:
            for cls, repeats, _partial, _barrier in costs._passes(op):
                amounts[cls] = amounts.get(cls, 0) + repeats * per_repeat
    return label(amounts)


@lru_cache(maxsize=MEMO)
def extract(nbytes_l0a: int, nbytes_l0b: int) -> str:
    """The label of a TEXTRACT moving ``nbytes_l0a`` to L0A and ``nbytes_l0b`` to L0B (:meth:`Costs.extract`)."""
    return label(dict(zip(EXTRACT_PATHS, (nbytes_l0a, nbytes_l0b))))
