"""The numbers a figure draws, made drawable: the one path between derived numbers and matplotlib, plotly or an SVG
for every figure tfa-sim draws (``tfa-sim profile``'s bar chart, the timelines, the sweep's plots, the tune's
landscape).

Figures are fed derived numbers — a mean over cores, a min and max, an estimate, a ratio — and a derived number can
come out NaN, infinite, None, or a hair on the wrong side of another (a mean of 20 equal values a rounding above
their min).  None of that may stop a command after its work is done, so nothing here raises on its data: a value
that is not a finite number is absent (no bar, no point, a grey cell, a gap in a line), a whisker is clipped at zero,
axis limits are always finite and ordered.  Only the values themselves are checked; what they mean is the caller's.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

#: What a label says where its value is absent.
ABSENT = "—"


def finite(value: Any) -> float | None:
    """``value`` as a finite float; None for anything else (None, NaN, ±inf, a bool, text, an object)."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # not a number, or an int beyond a float's range
        return None
    return number if math.isfinite(number) else None


def whisker(mean: Any, low: Any, high: Any) -> tuple[float, float]:
    """The lengths below and above ``mean`` of a whisker from ``low`` to ``high``: each ≥ 0 (a min a rounding above
    its mean draws none, never a negative one); 0 on a side whose value, or the mean, is absent."""
    centre, lo, hi = finite(mean), finite(low), finite(high)
    if centre is None:
        return 0.0, 0.0
    below = max(0.0, centre - lo) if lo is not None else 0.0
    above = max(0.0, hi - centre) if hi is not None else 0.0
    return (below if math.isfinite(below) else 0.0), (above if math.isfinite(above) else 0.0)


def bars(items: Iterable[tuple[Any, Any, Any, Any]]) -> tuple[list[float], list[float], list[list[float]]]:
    """Horizontal bars with whiskers from ``(position, length, low, high)``: the positions, lengths and
    ``[below, above]`` whisker lengths (matplotlib's ``xerr``) of the items whose position and length are finite;
    the others are left out."""
    positions: list[float] = []
    lengths: list[float] = []
    errors: list[list[float]] = [[], []]
    for position, length, low, high in items:
        where, size = finite(position), finite(length)
        if where is None or size is None:
            continue
        below, above = whisker(size, low, high)
        positions.append(where)
        lengths.append(size)
        errors[0].append(below)
        errors[1].append(above)
    return positions, lengths, errors


def points(pairs: Iterable[tuple[Any, Any]]) -> tuple[list[Any], list[float]]:
    """The x and y of the pairs whose y is a finite number (x is a position or a category, kept as given)."""
    xs: list[Any] = []
    ys: list[float] = []
    for x, y in pairs:
        value = finite(y)
        if value is not None and (x is not None and (not isinstance(x, float) or math.isfinite(x))):
            xs.append(x)
            ys.append(value)
    return xs, ys


def span(start: Any, end: Any) -> tuple[float, float] | None:
    """``(start, length)`` of a bar from ``start`` to ``end``, or None where either is absent or it has no length."""
    lo, hi = finite(start), finite(end)
    if lo is None or hi is None or not hi > lo or not math.isfinite(hi - lo):
        return None
    return lo, hi - lo


def grid(rows: Sequence[Sequence[Any]]) -> Any:
    """A 2-D float array of ``rows`` with every absent value NaN (drawn in a colour map's 'bad' colour); ragged rows
    are padded with NaN."""
    import numpy as np

    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            number = finite(value)
            if number is not None:
                out[i, j] = number
    return out


def limits(low: Any, high: Any, fallback: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """Axis limits from ``low`` to ``high``, finite and increasing: ``fallback`` where both are absent, some width
    around the one value present or around equal values."""
    present = [v for v in (finite(low), finite(high)) if v is not None]
    if not present:
        return fallback
    lo, hi = min(present), max(present)
    if hi > lo and math.isfinite(hi - lo):
        return lo, hi
    pad = max(abs(lo) * 1e-6, 0.5)
    return lo - pad, hi + pad


def label(value: Any, spec: str = ".2f", absent: str = ABSENT) -> str:
    """``value`` formatted by ``spec``, ``absent`` where it is not a finite number."""
    number = finite(value)
    return absent if number is None else format(number, spec)
