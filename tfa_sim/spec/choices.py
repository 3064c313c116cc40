"""The kernel's design choices as registries: each choice a table of its values, each value beside its code.

A :class:`Choice` is one key of ``[kernel]`` (``kernel.stage_order``, …).  Its values are :class:`Value` entries
that the module consuming the choice registers when it is imported (``STAGE_ORDER.add("qk_pv", …)`` in
``stages/order_qk_pv.py``): what the value does (``does``: the module, function or object its consumer calls), the
legality rules it brings, a line for docs/kernel.md and its source.  Everything that lists values is derived from
the tables: the config schema's checks (:func:`check_value`), the legality rules (:func:`problems`),
:func:`~tfa_sim.spec.config.kernel_choices` and docs/kernel.md's table (:func:`~tfa_sim.spec.builds.choices_table`).

Ordering guarantee: the shipped values are registered before any table is read — the first read imports the
consuming modules listed in :data:`PROVIDERS`, by name, the way a user's plugin is imported
(:mod:`tfa_sim.spec.plugins`); values are listed in registration order, the shipped ones first.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tfa_sim.spec.errors import InputError

#: A legality rule of a value: the problem (one line, without "illegal config: ") with the config, or None.
Rule = Callable[[Any], "str | None"]
#: A registry's contract on what a value does: the problem with ``does``, or None.
Contract = Callable[[Any], "str | None"]

#: The modules that register the shipped values (imported, in this order, the first time a registry is read).
PROVIDERS = ("tfa_sim.spec.geometry", "tfa_sim.spec.blocks", "tfa_sim.spec.masks", "tfa_sim.spec.costs",
             "tfa_sim.buffers.capacity", "tfa_sim.stages.order_qk_pv", "tfa_sim.stages.order_pv_qk",
             "tfa_sim.stages.compute_pv", "tfa_sim.stages.handoffs", "tfa_sim.stages.accumulators",
             "tfa_sim.stages.compute_gu")


class RegistryError(InputError):
    """A value that cannot join a registry: a clash with a registered name, a broken contract, a bad entry."""


@dataclass(frozen=True)
class Value:
    """One value of a choice: its ``name`` (a word, a number, true or false), what it ``does`` (what the
    consumer calls), its legality ``rules``, the ``doc`` line docs/kernel.md shows, its ``source`` (the kernel
    code or the public change it models) and the ``module`` that registered it."""

    name: str | int | bool
    does: Any
    doc: str
    source: str
    rules: tuple[Rule, ...]
    module: str

    @property
    def word(self) -> str:
        """The value as a config spells it (``true``, ``3``, ``qk_pv``)."""
        return spell(self.name)


def spell(value: Any) -> str:
    """A config value as TOML spells it."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Numbers:
    """The integer values a choice also takes (``exp_ring = 3``): ``low`` … ``high``, what the value ``n``
    does (``does(n)``), its doc, source and rules."""

    low: int
    high: int
    does: Callable[[int], Any]
    doc: str
    source: str
    rules: tuple[Rule, ...]
    module: str


class Choice:
    """One design choice: the ``[kernel]`` key ``key``, what it decides (``doc``), its ``default`` (today's
    behaviour, the manual kernel's) and its table of values; what a value's ``does`` must offer (``offers``, in
    words), checked by ``contract`` when the value is registered (a stage order needs its loops, say)."""

    def __init__(self, key: str, doc: str, default: str | bool, offers: str, contract: Contract) -> None:
        self.key, self.doc, self.default, self.offers, self.contract = key, doc, default, offers, contract
        self.values: dict[str | int | bool, Value] = {}
        self.numbers: Numbers | None = None

    def add(self, name: str | bool, does: Any, doc: str, source: str, rules: tuple[Rule, ...],
            module: str) -> Value:
        """Register value ``name`` (refused in one line when it is taken, or ``does`` breaks the contract)."""
        if not isinstance(name, (str, bool)) or (isinstance(name, str) and not name.isidentifier()):
            raise RegistryError(f"{module}: kernel.{self.key} value {name!r} must be a word (letters, digits, _) or "
                                f"true/false; integers are registered with add_numbers")
        if (isinstance(name, str) and name.lower() in ("true", "false")) or \
                (isinstance(name, bool) and not isinstance(self.default, bool)):
            raise RegistryError(f"{module}: kernel.{self.key} value {name!r}: true and false are the values of a "
                                f"yes/no choice only, spelled as TOML's booleans; choose a word")
        self._check_entry(module, name, does, doc, source, rules)
        value = Value(name, does, doc, source, tuple(rules), module)
        self.values[name] = value
        return value

    def add_numbers(self, low: int, high: int, does: Callable[[int], Any], doc: str, source: str,
                    rules: tuple[Rule, ...], module: str) -> Numbers:
        """Let the choice take the integers ``low`` … ``high``; value n does ``does(n)``."""
        if self.numbers is not None:
            raise RegistryError(f"{module}: kernel.{self.key} takes integers already (registered by "
                                f"{self.numbers.module}): one registration per choice")
        if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
            raise RegistryError(f"{module}: kernel.{self.key} integers {low!r} … {high!r} must be 1 ≤ low ≤ high")
        self._check_entry(module, f"{low}…{high}", does(low), doc, source, rules)
        self.numbers = Numbers(low, high, does, doc, source, tuple(rules), module)
        return self.numbers

    def _check_entry(self, module: str, name: Any, does: Any, doc: str, source: str, rules: Any) -> None:
        held = self.values.get(name)
        if held is not None:
            raise RegistryError(f"{module}: kernel.{self.key} = {spell(name)} is registered already (by "
                                f"{held.module}): choose another name")
        if not (isinstance(doc, str) and doc.strip() and isinstance(source, str) and source.strip()):
            raise RegistryError(f"{module}: kernel.{self.key} = {spell(name)} needs a doc line and a source")
        if not isinstance(rules, tuple) or not all(callable(r) for r in rules):
            raise RegistryError(f"{module}: kernel.{self.key} = {spell(name)}: rules must be a tuple of functions "
                                f"(config → problem or None); give () for none")
        problem = self.contract(does)
        if problem:
            raise RegistryError(f"{module}: kernel.{self.key} = {spell(name)} breaks the registry's contract: "
                                f"{problem}")

    @property
    def names(self) -> list[str]:
        """The values as a config spells them, in registration order (a number range as ``low…high``)."""
        return [v.word for v in self.values.values()] + (
            [f"{self.numbers.low}…{self.numbers.high}"] if self.numbers else [])

    def value(self, given: Any) -> Value:
        """The registered value a config's ``given`` names (one-line :class:`InputError` otherwise)."""
        found = None
        if isinstance(given, bool):  # true/false only where the choice is one (True == 1 as a dict key)
            found = self.values.get(given) if isinstance(self.default, bool) else None
        elif isinstance(given, str):
            found = self.values.get(given)
        if found is not None:
            return found
        n = self.numbers
        if n is not None and isinstance(given, int) and not isinstance(given, bool) and n.low <= given <= n.high:
            return Value(given, n.does(given), n.doc, n.source, n.rules, n.module)
        raise InputError(f"config error: kernel.{self.key} = {_shown(given)} is not one of {', '.join(self.names)}")


def _shown(value: Any) -> str:
    return spell(value) if isinstance(value, bool) else repr(value)


#: Every registry, in the order docs/kernel.md lists the choices.
REGISTRIES: dict[str, Choice] = {}


def registry(key: str, doc: str, default: str | bool, offers: str, contract: Contract) -> Choice:
    """Declare the registry of ``kernel.<key>`` (once, here, so the schema knows every key)."""
    choice = Choice(key, doc, default, offers, contract)
    REGISTRIES[key] = choice
    return choice


def _has(*names: str) -> Contract:
    """Contract: ``does`` has each attribute in ``names``."""
    def check(does: Any) -> str | None:
        missing = [n for n in names if not hasattr(does, n)]
        return f"it lacks {', '.join(missing)}" if missing else None
    return check


def _callable(does: Any) -> str | None:
    return None if callable(does) else f"{does!r} is not a function"


LAUNCH_GRID = registry("launch_grid", "how the work units reach the cores", "blocks",
                       "`LaunchGrid(persistent, order)`, `order(blocks, cores, block_order)` → dispatch order "
                       "(tfa_sim.spec.geometry)", _has("persistent", "order"))
PREFETCH = registry("prefetch", "what the host puts into the L2 before the launch", "s0_head",
                    "a function config → rows of each input in the L2 at the launch (tfa_sim.spec.blocks)",
                    _callable)
STAGE_ORDER = registry("stage_order", "the steady loop's order of stage calls", "qk_pv",
                       "a module with `aic_steady(k, q_l1, acc)` and `aiv_steady(k, lane, src)` "
                       "(tfa_sim.stages.order_qk_pv)", _has("aic_steady", "aiv_steady"))
PV_LOADS = registry("pv_loads", "compute_pv's order of its V and P loads", "v_first",
                    "`Selects(stages)`: the stages whose listings test the value (tfa_sim.listings.vocabulary)",
                    _has("stages"))
TALLOC = registry("talloc", "where a producer allocates its FIFO slot", "before_store",
                  "`Selects(stages)`: the stages whose listings test the value (tfa_sim.listings.vocabulary)",
                  _has("stages"))
CUBE_HANDOFF = registry("cube_handoff", "how the cube's M pipe hands an accumulator to FIX", "flags",
                        "`Selects(stages)`: the stages whose listings test the value (tfa_sim.listings.vocabulary)",
                        _has("stages"))
ACCUMULATORS = registry("accumulators", "which L0C accumulator each QK and PV tile takes", "running",
                        "a class of `l0c` with `qk()`, `pv()`, `step(has_next)` (tfa_sim.stages.accumulators)",
                        _has("qk", "pv", "step"))
EXP_RING = registry("exp_ring", "the entries of the l1_exp_max ring", "fifo",
                    "a function schedule → entries (tfa_sim.buffers.capacity)", _callable)
GU_ROWS = registry("gu_rows", "how compute_gu cuts an AIV's rows", "whole",
                   "a function kTileFactor → compute_gu calls per tile (tfa_sim.stages.compute_gu)", _callable)
UB_UNION = registry("ub_union", "whether the softmax source and GU input tiles share UB addresses", True,
                    "`UbLayout(union)` (tfa_sim.buffers.capacity)", _has("union"))
MASKS = registry("masks", "whether the causal mask path is compiled", True,
                 "`MaskPath(compiled)` (tfa_sim.spec.masks)", _has("compiled"))

_loaded = False


def load_providers() -> None:
    """Import the modules that register the shipped values (:data:`PROVIDERS`), once."""
    global _loaded
    if not _loaded:
        _loaded = True
        for name in PROVIDERS:
            importlib.import_module(name)


def choices() -> Iterator[Choice]:
    """Every registry with its shipped values registered."""
    load_providers()
    return iter(REGISTRIES.values())


def check_value(key: str, given: Any) -> None:
    """A config's ``kernel.<key> = given`` names a registered value (one-line :class:`InputError` otherwise)."""
    load_providers()
    REGISTRIES[key].value(given)


def answer(key: str, given: Any, *args: Any, wants: str, check: Callable[[Any], bool]) -> Any:
    """What value ``given`` of choice ``key`` answers for ``args`` (its ``does`` called): an exception, or an
    answer that is not what ``check`` takes (``wants``, in words), is one line naming the value and the module
    that registered it (a plugin's broken contract)."""
    value = REGISTRIES[key].value(given)
    try:
        got = value.does(*args)
    except Exception as exc:
        raise InputError(f"kernel.{key} = {value.word} ({value.module}) raised {type(exc).__name__}: {exc}; it "
                         f"must answer {wants}") from None
    if not check(got):
        raise InputError(f"kernel.{key} = {value.word} ({value.module}) answered {got!r}; it must answer {wants}")
    return got


def whole(low: int) -> Callable[[Any], bool]:
    """A check of :func:`answer`: an integer (not a bool) ≥ ``low``."""
    return lambda got: isinstance(got, int) and not isinstance(got, bool) and got >= low


def resolve(kernel: Any) -> dict[str, Value]:
    """The registered value of each choice that ``kernel`` (a :class:`~tfa_sim.spec.config.KernelConfig`) sets."""
    load_providers()
    return {key: choice.value(getattr(kernel, key)) for key, choice in REGISTRIES.items()}


def problems(config: Any) -> Iterator[str]:
    """The legality problems the config's chosen values' rules find, in registry order; a rule that raises, or
    answers other than a line or None, is one line naming its value and module (a plugin's broken contract)."""
    for key, value in resolve(config.kernel).items():
        for rule in value.rules:
            try:
                problem = rule(config)
            except Exception as exc:  # a plugin's rule: never a traceback
                raise InputError(f"kernel.{key} = {value.word} ({value.module}): its rule "
                                 f"{getattr(rule, '__name__', 'rule')} raised {type(exc).__name__}: {exc}; fix the "
                                 f"rule (config → a one-line problem or None)") from None
            if problem is not None and not isinstance(problem, str):
                raise InputError(f"kernel.{key} = {value.word} ({value.module}): its rule "
                                 f"{getattr(rule, '__name__', 'rule')} answered {problem!r}; a rule answers a "
                                 f"one-line problem or None")
            if problem:
                yield problem
