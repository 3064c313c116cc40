"""What a stage offers its listing: the tiles it binds, its FIFOs and flags, its scalars and the names its
conditions test (the values each takes, for the race check), declared by each stage module beside its code."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Where a tile lives: GM (a tensor or a FIFO tile), the cube's L1, L0A, L0B, L0C, a vector core's UB.
PLACES = ("GM", "L1", "L0A", "L0B", "L0C", "UB")


@dataclass(frozen=True)
class Tile:
    """A tile the stage binds for its listing.

    ``shape`` in the stage's dimension names; ``role``: ``input`` (holds data when the call starts), ``output``
    (the call's result; may be read before it is written: it holds what the last call left), ``state`` (kept
    across calls, read and written: the running max); ``pool``: a ping-pong slot the listing takes with
    ``wait_flag(…, NAME)`` and gives back with ``set_flag(…, NAME)``; ``carried``: written by an earlier call of
    the unit and read by later ones (the block's Q); ``held``: a ping-pong tile taken in one call and given back in
    another (a PV accumulator, Q); ``indexed``: one per loop index (``m[n]``); ``within``: a part of another tile,
    written when that one is (each chunk's max of the combine's ``ml``); ``ring``: an entry of a ring whose
    writes and reads the stage marks (``l1_exp_max``: a write over an unread entry is a hazard); ``dmas``: the
    dimension that says how many DMAs a transfer of it takes (each pays the L2's latency)."""

    where: str
    shape: tuple[str, str]
    dtype: str = "f32"
    role: str = "input"
    pool: bool = False
    carried: bool = False
    held: bool = False
    indexed: bool = False
    within: str = ""
    ring: bool = False
    dmas: str = ""  # the dimension naming how many DMAs a transfer of this GM tile takes (one per sub-tile)


@dataclass(frozen=True)
class Vocabulary:
    """A stage's names: ``tiles``, ``fifos`` (TPOP/TALLOC/TFREE/TPUSH; each also a GM tile), ``flags``
    (cross-core flags), ``scalars`` (``scale``…), ``dims`` (shape names) and ``context`` (each name a condition may
    test → the values it takes in a run; the kernel's choices are added to it), ``label``: the default name of
    its vector groups, ``steady(plan)``: the names and dimensions of the stage's steady call in a run (a full
    slice of a later tile: what ``tfa-sim listing`` prices)."""

    stage: str
    unit: str
    tiles: dict[str, Tile]
    fifos: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    scalars: frozenset[str] = frozenset()
    dims: frozenset[str] = frozenset()
    context: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    label: str = ""
    steady: Callable[[Any], tuple[dict[str, Any], dict[str, int]]] | None = None

    def tile(self, name: str) -> Tile | None:
        return self.tiles.get(name)


#: Every stage's vocabulary, by stage name (each stage module registers its own).
VOCABULARIES: dict[str, Vocabulary] = {}


def declare(vocabulary: Vocabulary) -> Vocabulary:
    """Register ``vocabulary`` (a stage module, at import)."""
    VOCABULARIES[vocabulary.stage] = vocabulary
    return vocabulary


@dataclass(frozen=True)
class Selects:
    """What a design choice's value does when its work is in the listings: the ``stages`` whose listings test
    it by name (``if talloc == "before_load"``) to choose their lines."""

    stages: tuple[str, ...]
