"""The board beside the model on the roofline (``tfa-sim profile``: profile.json's ``roofline``, roofline.svg).

A board's profile gives times, not work: the launch's task duration and each pipe's busy time per core.  The work
is the kernel's, the same on the board as in the model of its config (the same instructions move the same bytes
and do the same operations), so the board's points are the model's work over the board's times: each resource's
fraction of its limit over the task duration, and — where the profile has the pipe's time — the fraction while
the pipe is busy (work ÷ (busy time × the limit)), the board's beside the model's.  A ratio of the two is the
same as the pipe times' ratio; the roofline puts it against the limit: a pipe at 0.9 of its limit while busy on
the model and 0.6 on the board runs its instructions slower on the board than the model prices them.
"""
from __future__ import annotations

from typing import Any

from tfa_sim.views.figures import finite
from tfa_sim.views.roofline import RANKED

#: Instruction groups up to which ``tfa-sim profile``'s run of the model keeps its event log, whose work the
#: roofline counts (a larger run is compared without it: its per-pipe work is then absent, and said so).
LOGGED_UP_TO = 2_000_000


def _ratio(a: Any, b: Any) -> float | None:
    x, y = finite(a), finite(b)
    return None if x is None or not y else round(x / y, 6)


def beside_board(table: dict[str, Any] | None, task_us: float, pipes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """profile.json's ``roofline``: per ranked resource the model's fraction of its limit and the board's over its
    task duration, and per pipe both while busy (``pipes``: profile.json's, with ``board_us`` and ``model_us``)."""
    if not table:
        return {"resources": {}, "missing": "the model's run has no roofline table"}
    model_us = table["cycles"] / table["clock_mhz"]
    rows = {}
    for name in RANKED:
        row = table["resources"].get(name) or {}
        fraction, pipe = row.get("fraction_of_limit"), pipes.get(name) or {}
        rows[name] = {"model_fraction": fraction,
                      "board_fraction": _ratio(None if fraction is None else fraction * model_us, task_us),
                      "model_while_busy": _ratio(fraction, row.get("busy_fraction")),
                      "board_while_busy": _ratio(None if fraction is None else fraction * model_us,
                                                 pipe.get("board_us"))}
    return {"board_cycles": round(task_us * table["clock_mhz"], 3), "model_cycles": table["cycles"],
            "resources": rows, "missing": table.get("missing"), "table": table}


def format_board(roofline: dict[str, Any]) -> list[str]:
    """The profile report's line: the resources nearest their limits, model and board."""
    table = roofline.get("table")
    if not table:
        return []
    cells = []
    for name in table["nearest"]:
        row = roofline["resources"][name]
        board = f", board {row['board_fraction']:.0%}" if row["board_fraction"] is not None else ""
        cells.append(f"{name} model {row['model_fraction']:.0%}{board}")
    line = "  roofline (fraction of the limit over the kernel time): " + ("; ".join(cells) or "none measured")
    return [line + (" (per pipe: the model's run has no event log)" if roofline.get("missing") else "")]
