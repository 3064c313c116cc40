"""The listings a run uses: a shipped one by name (configs/listings/STAGE/NAME.lst) or a file by path, read,
checked (:mod:`~tfa_sim.listings.check`, :mod:`~tfa_sim.listings.races`) and resolved per call once; what each
stage's calls issue (:class:`StageListing`)."""
from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfa_sim.listings import check, races
from tfa_sim.listings.math import expressions
from tfa_sim.listings.program import Step, compile_steps, where
from tfa_sim.listings.resolve import Line, flatten
from tfa_sim.listings.syntax import Listing, read
from tfa_sim.listings.vocabulary import VOCABULARIES, Vocabulary
from tfa_sim.spec.choices import resolve
from tfa_sim.spec.config import CONFIG_DIR
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_path

LISTINGS_DIR = CONFIG_DIR / "listings"
#: The modules that declare each stage's names (imported before a listing is checked against them).
PROVIDERS = ("tfa_sim.stages.compute_qk", "tfa_sim.stages.compute_p", "tfa_sim.stages.compute_pv",
             "tfa_sim.stages.compute_gu", "tfa_sim.stages.epilogue", "tfa_sim.stages.combine")
#: The stages a listing may be given for, in the order a run's report names them.
STAGES = ("compute_qk", "compute_p", "compute_pv", "compute_gu", "epilogue", "combine")
#: The stages whose vector lines compute the numerics (the others move data and multiply).
MATH_STAGES = ("compute_p", "compute_gu", "combine")
#: Each stage's default listing: the manual kernel's.
DEFAULT = "manual"
SUFFIX = ".lst"

_read: dict[tuple[str, str, str], Listing] = {}  # (stage, text digest, choices) → the listing, checked
#: A listing's text as read (by its text and the name diagnoses give it): a sweep or a tune reads the same few.
_parse = functools.lru_cache(maxsize=64)(read)
#: Each stage's listing of a run, by stage, value, text and choices: a tune's plans share their compiled steps.
_stage_listings: dict[tuple[str, str, str, str], StageListing] = {}


@functools.cache
def _shipped_source(stage: str, value: str) -> tuple[str, str] | None:
    """(the text, how diagnoses name it) of ``stage``'s shipped listing ``value``, None when none is shipped (the
    package's files do not change while it runs: a tune's thousands of plans look each up once)."""
    path = LISTINGS_DIR / stage / f"{value}{SUFFIX}"
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8"), f"configs/listings/{stage}/{value}{SUFFIX}"


def shipped(stage: str) -> list[str]:
    """The names of ``stage``'s shipped listings."""
    return sorted(p.stem for p in (LISTINGS_DIR / stage).glob(f"*{SUFFIX}"))


def is_name(value: str) -> bool:
    """A shipped listing's name (a word), not a path."""
    return value.replace("_", "").isalnum()


def source(stage: str, value: str) -> tuple[str, str]:
    """(the text, how diagnoses name it) of ``stage``'s listing ``value``: a shipped name or a file path."""
    if is_name(value):
        found = _shipped_source(stage, value)
        if found is None:
            raise InputError(f"listings.{stage} = {value!r} is not a shipped listing; use one of "
                             f"{', '.join(shipped(stage))} or the path of a listing file")
        return found
    path = Path(check_path(value, f"listings.{stage} ="))
    if not path.is_file():
        raise InputError(f"listings.{stage} = {value!r}: no such file; give the path of a listing file (or a "
                         f"shipped name: {', '.join(shipped(stage))})")
    try:
        return path.read_text(encoding="utf-8"), _shown(path)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"listings.{stage} = {value!r}: cannot read it ({e}); give a UTF-8 text file") from None


def _shown(path: Path) -> str:
    """``path`` as diagnoses name it: relative to the working directory when it lies under it (a config's
    paths are made absolute when it is read)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load(stage: str, value: str, choices: Mapping[str, Any]) -> Listing:
    """``stage``'s listing ``value`` read and checked, its races included (for the run's ``choices``); the same
    text is read and checked once (a copy of a shipped listing is the shipped listing)."""
    text, name = source(stage, value)
    listing = _parse(text, name)
    if listing.stage != stage:
        raise InputError(f"{name}:1: this is a {listing.stage} listing; give it as listings.{listing.stage}, "
                         f"or a {stage} listing here")
    key = (stage, listing.digest, repr(sorted(choices.items())))
    if key not in _read:
        vocabulary = VOCABULARIES[stage]
        check.check(listing, vocabulary, choices)
        races.check_races(listing, vocabulary, choices)
        _read[key] = listing
    return _read[key]


@dataclass
class StageListing:
    """One stage's listing in a run: what it is (``value`` as the config gives it), the lines and steps each
    call issues (memoised by the call's names), and whether its math is the shipped listing's."""

    stage: str
    value: str
    listing: Listing
    reference: Listing
    choices: dict[str, Any]
    vocabulary: Vocabulary = field(init=False)
    _steps: dict[tuple[Any, ...], tuple[Step, ...]] = field(default_factory=dict, init=False, repr=False)
    _shipped: dict[tuple[Any, ...], bool] = field(default_factory=dict, init=False, repr=False)
    _scratch: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.vocabulary = VOCABULARIES[self.stage]

    def names(self, call: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.choices, **call}

    def lines(self, call: Mapping[str, Any], listing: Listing | None = None) -> tuple[Line, ...]:
        return flatten(listing or self.listing, self.names(call), self.vocabulary.label)

    def steps(self, *values: Any) -> tuple[Step, ...]:
        """The steps of the call whose names take ``values`` (in the vocabulary's context order, then any
        further names: the combine's ``chunks``)."""
        steps = self._steps.get(values)
        if steps is None:
            call = dict(zip(self.vocabulary.context, values))
            v, lst = self.vocabulary, self.listing
            rings = frozenset(name for name, tile in v.tiles.items() if tile.ring)
            carried = frozenset(name for name, tile in v.tiles.items() if tile.carried)
            steps = self._steps[values] = compile_steps(self.lines(call), lambda t: where(v, lst.tiles, lst.consts, t),
                                                        rings, carried)
        return steps

    def scratch(self, dims: Mapping[str, int], make: Any) -> dict[str, Any]:
        """The listing's own tiles and constants as ``make(decl, dims)`` binds them, per set of ``dims`` (the call's
        shapes: the same few many times)."""
        key = tuple(dims.items())
        made = self._scratch.get(key)
        if made is None:
            decls = {**self.listing.tiles, **self.listing.consts}
            made = self._scratch[key] = {name: make(decl, dims) for name, decl in decls.items()}
        return made

    def changes_math(self) -> bool:
        """Whether some call of this listing writes into its stage's tiles what the shipped listing's does not
        (the math of every combination of the stage's names, the scalars by name)."""
        if "_changes" not in self.__dict__ and self.listing.digest == self.reference.digest:
            self.__dict__["_changes"] = False  # the shipped listing's own text
        if "_changes" not in self.__dict__:
            outputs = tuple(self.vocabulary.tiles)
            self.__dict__["_changes"] = any(
                expressions(self._vector(names, self.listing), (), outputs, {})
                != expressions(self._vector(names, self.reference), (), outputs, {})
                for names in races.contexts(self.vocabulary, {}))
        return bool(self.__dict__["_changes"])

    def _vector(self, names: Mapping[str, Any], listing: Listing) -> list[Line]:
        return [ln for ln in flatten(listing, {**self.choices, **names}, self.vocabulary.label)
                if ln.op.vector or ln.op.name in ("TLOAD", "TSTORE")]

    def shipped_math(self, call: Mapping[str, Any], lines: tuple[Line, ...], inputs: tuple[str, ...],
                     outputs: tuple[str, ...], scalars: Mapping[str, Any]) -> bool:
        """Whether ``lines`` (a call's vector lines) write into ``outputs`` what the shipped listing does."""
        key = (tuple(call.items()), tuple(id(ln) for ln in lines))
        if key not in self._shipped:
            mine = expressions(lines, inputs, outputs, scalars)
            theirs = expressions((ln for ln in self.lines(call, self.reference) if ln.op.vector), inputs, outputs,
                                 scalars)
            self._shipped[key] = mine == theirs
        return self._shipped[key]


def listings_of(config: Any) -> dict[str, StageListing]:
    """Each stage's listing of ``config`` (its ``[listings]``, its kernel's choices as the conditions see them)."""
    return stage_listings(dataclasses.asdict(config.listings), {k: v.name for k, v in resolve(config.kernel).items()})


def stage_listings(values: Mapping[str, str], choices: Mapping[str, Any]) -> dict[str, StageListing]:
    """Each stage's listing as ``values`` names it (``[listings]``), read and checked against ``choices`` (the
    kernel's choices by name, which the listings' conditions may test)."""
    for module in PROVIDERS:
        importlib.import_module(module)
    out = {}
    for stage in STAGES:
        value = values.get(stage, DEFAULT)
        listing = load(stage, value, choices)
        key = (stage, value, listing.digest, repr(sorted(choices.items())))
        if key not in _stage_listings:
            _stage_listings[key] = StageListing(stage, value, listing, load(stage, DEFAULT, choices), dict(choices))
        out[stage] = _stage_listings[key]
    return out
