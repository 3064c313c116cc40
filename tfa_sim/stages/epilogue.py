"""The epilogue: what a unit does after its last stage call, as its listing says (``listings.epilogue``:
configs/listings/epilogue/, docs/kernel.md "Listings") — wait for the credits of the FIFOs nobody waited for
(``TDRAIN``), the block-end hand-shake of the hardware's grid, and the Q tile given back."""
from __future__ import annotations

from typing import Any

from tfa_sim.buffers.pools import Slot
from tfa_sim.engine.issue import Program
from tfa_sim.listings.vocabulary import Tile, Vocabulary, declare
from tfa_sim.spec.units import LANES
from tfa_sim.stages import EPILOGUE
from tfa_sim.stages.block_kernel import BlockKernel
from tfa_sim.stages.driver import Bind, Binds, issue


def steady(plan: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """The AIC's epilogue after a unit (``tfa-sim listing``'s call)."""
    return {"unit": "aic", "at": "unit"}, {"rows": plan.shape.cube_s0, "head": plan.shape.head}


VOCABULARY = declare(Vocabulary(
    EPILOGUE, "AIC or AIV",
    tiles={"l1_q": Tile("L1", ("rows", "head"), "f16", pool=True, carried=True, held=True)},
    fifos=frozenset({"qk_fifo", "p_fifo", "pv_fifo"}), flags=frozenset({"block_end"}),
    dims=frozenset({"rows", "head"}), context={"unit": ("aic", "aiv"), "at": ("unit", "core")},
    steady=steady))


def epilogue(k: BlockKernel, unit: str, at: str, tiles: int, lane: int = 0, q_l1: Slot | None = None) -> Program:
    """The epilogue of AIV ``lane`` (``unit = "aiv"``) or of the AIC, after a unit (``at = "unit"``) or after a
    persistent core's last unit (``"core"``); ``tiles``: the FIFO tiles the units issued, ``q_l1``: the unit's Q."""
    listing = k.plan.listings[EPILOGUE]
    steps = listing.steps(unit, at)
    fifos = k.buf.fifos
    lanes = range(LANES) if unit == "aic" else (lane,)

    def make(name: str) -> Bind | None:
        if name == "l1_q":
            return Bind("L1", slot=q_l1)
        if name == "block_end":
            return Bind("GM", flags=[k.buf.block_end[a] for a in lanes])
        fifo = {"qk_fifo": fifos.qk, "pv_fifo": fifos.pv, "p_fifo": fifos.p}.get(name)
        if fifo is None:
            return None
        count = fifo.undrained_credits(tiles)
        return Bind("GM", drain=[fifo.consumed[a] for a in lanes for _ in range(count)])

    binds = Binds(make, listing, {})
    yield from issue(k.site(EPILOGUE, -1 if unit == "aic" else lane), steps, binds, tiles, 0, ())
