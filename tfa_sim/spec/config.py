"""Run configuration, the schema: frozen dataclasses, the checks of every key's type and range, ``--set`` overrides.

A config has six sections (``case``, ``tiling``, ``schedule``, ``numerics``,
``hardware``, ``kernel``); every key has the manual kernel's default.  :func:`parse_sections` rejects
unknown keys and wrong types with a one-line :class:`~tfa_sim.spec.errors.InputError`; a build's own defaults
(:mod:`tfa_sim.spec.builds`), reading a file and the legality rules of docs/kernel.md ("Legality") are added by
:mod:`tfa_sim.spec.load`.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfa_sim.spec import choices
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_name, check_path, show


def _config_dir() -> Path:
    """The shipped configs: ``tfa_sim/configs`` in an installed wheel, the top-level ``configs/``
    of a source checkout or editable install (pyproject.toml maps one onto the other)."""
    here = Path(__file__).resolve().parent.parent  # the tfa_sim package
    installed = here / "configs"
    return installed if (installed / "hw").is_dir() else here.parent / "configs"


CONFIG_DIR = _config_dir()


@dataclass(frozen=True)
class CaseConfig:
    """The attention problem: O = softmax(Q·Kᵀ/sqrt(head))·V per (batch, head)."""

    name: str = ""  # empty: derived as case_float_H_{head}_S0_{s0}_S1_{s1}
    head: int = 128
    s0: int = 128
    s1: int = 1024
    causal: bool = False
    batch: int = 1
    heads: int = 1
    kv_heads: int = 1  # GQA: query head h reads K/V head h // (heads // kv_heads)
    window: int | None = None  # W ≥ 1: the causal local window, key j visible to query i when i − W < j ≤ i
    # (needs causal); absent (None): no window
    softcap: float = 0.0  # > 0: scores become c·tanh(s·x/c) before the row max (docs/numerics.md)
    mask: str = ""  # a .npy boolean mask file (True = masked), S0×S1 or [batch, heads, S0, S1] (--mask)
    dtype: str = "fp16"  # Q, K, V and P: fp16 or bf16


@dataclass(frozen=True)
class TilingConfig:
    """CUBE_S0 query rows per block, logical tiles of TILE_S1 = kTileFactor·CUBE_S1 columns."""

    cube_s0: int = 128
    cube_s1: int = 128
    tile_s1: int = 256

    @property
    def k_tile_factor(self) -> int:
        return self.tile_s1 // self.cube_s1

    @property
    def vec_s0(self) -> int:
        """Rows of one compute_p row slice: CUBE_S0/2 per AIV cut into kTileFactor slices."""
        return self.cube_s0 // 2 // self.k_tile_factor


@dataclass(frozen=True)
class ScheduleConfig:
    """Preload depth, GM FIFO depth and credit period, ping-pong buffer counts."""

    qk_preload: int = 4  # qkPreloadNum
    cv_fifo_size: int = 8  # CV_FIFO_SIZE, depth of the QK, P and PV FIFOs
    cv_fifo_cons_sync_period: int = 4  # CV_FIFO_CONS_SYNC_PERIOD
    local_slot_num: int = 2  # TPipe's LocalSlotNum: the consumer-local slots of each FIFO (ub_src, l1_p)
    l1_q: int = 1
    l1_k: int = 2
    l1_p: int | None = None  # the P consumer's L1 tiles; absent: local_slot_num
    l1_v: int = 2
    l0a: int = 2
    l0b: int = 2
    l0c: int = 2
    ub_src: int | None = None  # the QK (and PV) consumer's UB source tiles; absent: local_slot_num
    ub_x_exp: int = 2  # indexed by the same counter as ub_src (l1_exp_max: kernel.exp_ring's entries)
    block_order: str = "row"  # dispatch order of the blocks: row | zigzag | longest_first (tfa_sim.spec.blocks)
    s1_split: int | str = 1  # S1 chunks per row block, each its own block, merged by a combine launch; or "auto"
    gqa_pack: bool = False  # pack the query heads of a K/V head into one block's rows


@dataclass(frozen=True)
class NumericsConfig:
    """Which backend executes the stage kernels and with which exp model."""

    enabled: bool = True  # false: timing only, no arithmetic (fast exploration of large shapes)
    intermediate_check: bool = False  # dump every stage's output per block and tile to RUN/dumps/
    dump_blocks: str = ""  # "a:b" — dump only blocks a ≤ b < b (empty: all)
    dump_tiles: str = ""  # "a:b" — dump only logical tiles a ≤ t < b (empty: all)
    dump_limit_gib: float = 2.0  # refuse to write more dump data than this
    mem_limit_gib: float = 0.0  # refuse a run estimated to hold more memory than this (0: 80% of what is free)
    backend: str = "native"  # numpy | native
    exp_model: str = "tfa"  # tfa (bit-identical across backends) | libm: the npu reference's exp
    reference: str = "npu"  # npu (the NPU contract) | cpu_sim (the kernel's g++ CPU simulation, bit for bit)
    seed: int = 7  # the reference generator's numpy.random.seed
    blas_threads: int = 1  # BLAS threads for the numerics' matmuls (numerics/blas.py: small matmuls run best on one)
    threads: int = 0  # threads running finished blocks' stage kernels (engine/ops.py); 0: sim.simulation.op_workers

    @property
    def full_dump(self) -> bool:
        """Every block and tile is dumped (no ``dump_blocks``/``dump_tiles`` span), so the reference
        generator's full-S0 files are written too."""
        return not self.dump_blocks and not self.dump_tiles


@dataclass(frozen=True)
class HardwareConfig:
    """Chip preset name (configs/hw/NAME.toml) or a preset file; cores=0 uses all; ``host``: the class of CPU
    driving the launches (``aarch64`` or ``x86_64``; empty: not known), which sets the launch gap."""

    preset: str = "910b2"
    file: str = ""
    cores: int = 0
    host: str = ""


@dataclass(frozen=True)
class KernelConfig:
    """Which build of the kernel runs, and the design choices that make it (docs/kernel.md, "Builds").

    ``build`` names a shipped build bundle (``manual``, ``jit``, ``dsl``: configs/builds/NAME.toml) or the path of a
    bundle file; the bundle sets choices below and defaults of other sections, and a key the config gives
    itself wins (:mod:`tfa_sim.spec.builds`).  ``plugins``: modules (files or dotted names) loaded before the
    config is resolved, which may add values to the choices' registries (:mod:`tfa_sim.spec.plugins`).  Each
    choice's values are its registry's (:mod:`tfa_sim.spec.choices`, docs/kernel.md's table); the defaults here
    are the manual kernel's, today's behaviour."""

    build: str = "manual"
    plugins: tuple[str, ...] = ()
    launch_grid: str = "blocks"  # blocks: dispatched by the hardware | persistent: min(units, cores) cores loop
    prefetch: str = "s0_head"  # S0·HEAD elements of each of Q, K, V in the L2 before the launch | none
    stage_order: str = "qk_pv"  # qk_pv: QK(t + preload) then PV(t), P(t + preload) then GU(t) | pv_qk: the reverse
    pv_loads: str = "v_first"  # compute_pv: V loaded before the wait for P | p_first: P, then V
    talloc: str = "before_store"  # a producer's FIFO allocate(): before its first store | before_load: its first load
    cube_handoff: str = "flags"  # M → FIX: set/wait flags on the whole matmul | unit_flag: per final fractal
    accumulators: str = "running"  # L0C: a running index over the halves | fixed: one QK and one PV accumulator
    exp_ring: str | int = "fifo"  # l1_exp_max ring entries: fifo (cv_fifo_size) | preload (qk_preload) | N
    gu_rows: str = "whole"  # compute_gu on an AIV's rows at once | slices: kTileFactor row slices
    ub_union: bool = True  # the softmax source and GU input tiles share UB addresses (one ping-pong)
    masks: bool = True  # the causal mask path is compiled (causal, window and mask-file cases run)


@dataclass(frozen=True)
class ListingsConfig:
    """The listing each stage runs (docs/kernel.md, "Listings"): a shipped one's name (configs/listings/STAGE/
    NAME.lst; ``manual`` is the manual kernel's, ``port`` the PTO-DSL port's compute_p) or a listing file's path
    (relative to the working directory, or to a bundle's own file)."""

    compute_qk: str = "manual"
    compute_p: str = "manual"
    compute_pv: str = "manual"
    compute_gu: str = "manual"
    epilogue: str = "manual"
    combine: str = "manual"


def is_listing_path(value: Any) -> bool:
    """A ``[listings]`` value that is a file's path rather than a shipped listing's name (a word)."""
    return isinstance(value, str) and not value.replace("_", "").isalnum()


def resolve_listings(data: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """``data`` with each ``[listings]`` path made absolute (relative to ``base``, else the working directory):
    the config may be read again in another directory (a sweep's worker)."""
    table = data.get("listings") if isinstance(data, dict) else None
    if not isinstance(table, dict) or not any(is_listing_path(v) for v in table.values()):
        return data
    resolved = {k: str(((base or Path.cwd()) / Path(v)).resolve()) if is_listing_path(v) and not Path(v).is_absolute()
                else v for k, v in table.items()}
    return {**data, "listings": resolved}


@dataclass(frozen=True)
class Config:
    case: CaseConfig = field(default_factory=CaseConfig)
    tiling: TilingConfig = field(default_factory=TilingConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    numerics: NumericsConfig = field(default_factory=NumericsConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    kernel: KernelConfig = field(default_factory=KernelConfig)
    listings: ListingsConfig = field(default_factory=ListingsConfig)

    @property
    def name(self) -> str:
        c = self.case
        return c.name or f"case_float_H_{c.head}_S0_{c.s0}_S1_{c.s1}"

    @property
    def tiles(self) -> int:
        """Logical tiles per block (non-causal)."""
        return self.case.s1 // self.tiling.tile_s1

    @property
    def blocks_per_head(self) -> int:
        """Row blocks per query head (the last may be short)."""
        return -(-self.case.s0 // self.tiling.cube_s0)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every section as a table of plain values, as JSON and TOML hold them (the plugins a list)."""
        out = dataclasses.asdict(self)
        out["kernel"]["plugins"] = list(self.kernel.plugins)
        return out


SECTION_TYPES = {"case": CaseConfig, "tiling": TilingConfig, "schedule": ScheduleConfig,
                 "numerics": NumericsConfig, "hardware": HardwareConfig, "kernel": KernelConfig,
                 "listings": ListingsConfig}
#: The design choices: every [kernel] key but the build and the plugins, each with a registry of its values
#: (:mod:`tfa_sim.spec.choices`; tests/test_registries.py keeps the two lists equal).
CHOICE_KEYS = tuple(f.name for f in dataclasses.fields(KernelConfig) if f.name not in ("build", "plugins"))


def kernel_choices() -> dict[str, list[str]]:
    """The values each design choice takes, as a config spells them, from the registries (a plugin's included)."""
    return {choice.key: choice.names for choice in choices.choices()}


CHOICES = {("numerics", "backend"): ("numpy", "native"), ("numerics", "exp_model"): ("tfa", "libm"),
           ("numerics", "reference"): ("npu", "cpu_sim"),
           ("case", "dtype"): ("fp16", "bf16"), ("schedule", "block_order"): ("row", "zigzag", "longest_first"),
           ("hardware", "host"): ("aarch64", "x86_64", "")}  # "": the host is not known
#: Integer keys that also take the word "auto" (the model picks the value for the shape).
AUTO = {("schedule", "s1_split")}


#: Keys earlier versions accepted, with what replaced them.
#: Integer keys of [tiling] and [schedule] where 0 is legal: qk_preload 0 is tfa-sim's no-preload schedule.
ZERO_OK = ("qk_preload",)
RETIRED = {("schedule", "ub_exp_max"): "the l1_exp_max ring's entries are kernel.exp_ring's; drop the key"}
#: Keys earlier versions spelled otherwise, read as their new key: old (section, key) → (new section, new key, old
#: value → new).
RENAMED = {("kernel", "vec_barriers"): ("listings", "compute_p", {"macro": "manual", "insert_sync": "port"}),
           ("kernel", "softmax"): ("listings", "compute_p", {"macro": "manual", "port": "port"})}


def suggest(word: str, options: list[str]) -> str:
    """"did you mean …?" for a misspelt ``word``, else the ``options``."""
    close = difflib.get_close_matches(word, options, n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(options)}"


#: Numeric settings with a range: (lowest, highest, inclusive lowest); None = unbounded.
RANGES: dict[tuple[str, str], tuple[float | None, float | None, bool]] = {
    ("numerics", "seed"): (0, 2 ** 32 - 1, True),  # numpy.random.seed's range
    ("numerics", "dump_limit_gib"): (0, None, False),
    ("numerics", "mem_limit_gib"): (0, None, True),  # 0: the default, a share of the memory available
    ("case", "window"): (1, None, True),  # leave the key out for no window
    ("numerics", "blas_threads"): (1, 1024, True),
    ("numerics", "threads"): (0, 1024, True),  # 0: the CPUs this process may use (tfa_sim.sim.parallel)
}
#: Settings whose default None means "absent" (a given value must be set), with an example value of their type.
OPTIONAL = {("case", "window"): 1024, ("schedule", "ub_src"): 2, ("schedule", "l1_p"): 2}
#: No integer setting is larger (shapes this large are refused by the work limit anyway); keeps every
#: message and numpy conversion of a value exact.
MAX_INT = 2 ** 62
#: String settings that are names (tfa_sim.spec.safety), spans a:b, or paths.
NAMES = {("case", "name"), ("hardware", "preset")}
SPANS = {("numerics", "dump_blocks"), ("numerics", "dump_tiles")}
PATHS = {("hardware", "file")}


def _check_number(where: str, value: int | float, key: tuple[str, str]) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"config error: {where} = {value!r} must be a finite number")
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise InputError(f"config error: {where} = {show(value)} is too large (at most {MAX_INT})")
    lo, hi, inclusive = RANGES.get(key, (None, None, True))
    if (lo is not None and (value < lo or (value == lo and not inclusive))) or (hi is not None and value > hi):
        rule = f"{'≥' if inclusive else '>'} {lo:g}" if hi is None else f"in {lo:g}…{hi}"
        raise InputError(f"config error: {where} = {show(value)} must be {rule}")


def _check_string(where: str, value: str, key: tuple[str, str]) -> None:
    choices = CHOICES.get(key)
    if choices and value not in choices:
        raise InputError(f"config error: {where} = {show(value)} is not one of "
                         f"{', '.join(c or repr(c) for c in choices)}")
    if key in NAMES and (value or key != ("case", "name")):  # an empty case.name is derived from the shape
        check_name(value, f"config error: {where} =")
    if key in SPANS:
        parse_span(value, where)
    if key in PATHS and value:
        check_path(value, f"config error: {where} =")


def _check_type(section: str, key: str, value: Any, default: Any) -> Any:
    where = f"{section}.{key}"
    if (section, key) in OPTIONAL:
        if value is None:  # absent (a summary.json or YAML null)
            return value
        default = OPTIONAL[section, key]
    if section == "kernel" and key in CHOICE_KEYS:
        if not isinstance(value, (str, bool, int)):
            raise InputError(f"config error: {where} = {show(value)} must be one of its values "
                             f"({', '.join(kernel_choices()[key])})")
        choices.check_value(key, value)
    elif (section, key) == ("kernel", "plugins"):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise InputError(f"config error: {where} = {show(value)} must be a list of module files or dotted names, "
                             f"e.g. plugins = [\"my_order.py\"]")
        return tuple(value)
    elif section == "listings":
        if not isinstance(value, str) or not value:
            raise InputError(f"config error: {where} = {show(value)} must be a shipped listing's name (e.g. "
                             f"\"manual\") or a listing file's path")
        if is_listing_path(value):
            check_path(value, f"config error: {where} =")
    elif (section, key) in AUTO:
        if value != "auto" and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"config error: {where} = {value!r} must be an integer or \"auto\"")
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise InputError(f"config error: {where} = {show(value)} must be true or false")
    elif isinstance(default, (int, float)):
        kind = "an integer" if isinstance(default, int) else "a number"
        allowed = (int,) if isinstance(default, int) else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise InputError(f"config error: {where} = {show(value)} must be {kind} (e.g. {key} = {default})")
        _check_number(where, value, (section, key))
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise InputError(f"config error: {where} = {show(value)} must be a string (e.g. {key} = \"{default}\")")
        _check_string(where, value, (section, key))
    return value


def upgrade(data: Any) -> Any:
    """``data`` (a config's or a bundle's tables) with the keys of :data:`RENAMED` under their new names and
    values; one line when a table holds both spellings or an old value that has no new one."""
    if not isinstance(data, dict):
        return data
    for (section, old), (new_section, new, values) in RENAMED.items():
        table = data.get(section)
        if not isinstance(table, dict) or old not in table:
            continue
        target = data.get(new_section, {})
        if isinstance(target, dict) and new in target:
            raise InputError(f"config error: {section}.{old} is the old name of {new_section}.{new}: give only "
                             f"{new_section}.{new}")
        if not isinstance(table[old], str) or table[old] not in values:
            raise InputError(f"config error: {section}.{old} = {show(table[old])} is not one of "
                             f"{', '.join(values)} (its new name is {new_section}.{new})")
        value = values[table[old]]
        data = {**data, section: {k: v for k, v in table.items() if k != old}}
        data[new_section] = {**(target if isinstance(target, dict) else {}), new: value}
    return data


def section_of(section: str, cls: type, given: Any) -> Any:
    """One section's dataclass from its table, every key known and of the right type."""
    if not isinstance(given, dict):
        raise InputError(f"config error: [{section}] must be a table of keys, got {show(given)}")
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    for key in given:
        if not isinstance(key, str):
            raise InputError(f"config error: key {show(key)} in [{section}] is not a name; known: "
                             f"{', '.join(defaults)}")
        if (section, key) in RETIRED:
            raise InputError(f"config error: {section}.{key} is no longer a setting: {RETIRED[section, key]}")
        if key not in defaults:
            raise InputError(f"config error: unknown key {section}.{show(key)[1:-1]}; {suggest(key, list(defaults))}")
    return cls(**{key: _check_type(section, key, value, defaults[key]) for key, value in given.items()})


def parse_sections(data: dict[str, Any]) -> Config:
    """A :class:`Config` from a nested mapping, every section and key known and of the right type, missing keys at
    the schema's defaults (:func:`tfa_sim.spec.load.parse_config` fills in the build's first, and
    :func:`tfa_sim.spec.load.build_config` checks legality on top)."""
    if not isinstance(data, dict):
        raise InputError("config error: the config must be a table of sections (case, tiling, …)")
    for section in data:
        if section not in SECTION_TYPES:
            name = show(section)[1:-1] if isinstance(section, str) else show(section)
            hint = suggest(section, list(SECTION_TYPES)) if isinstance(section, str) else \
                f"known: {', '.join(SECTION_TYPES)}"
            raise InputError(f"config error: unknown section [{name}]; {hint}")
    return Config(**{s: section_of(s, cls, data.get(s, {})) for s, cls in SECTION_TYPES.items()})


def parse_span(text: str, option: str) -> tuple[int, int] | None:
    """``a:b`` → (a, b), the half-open range a ≤ i < b (either side may be empty); "" → None."""
    if not text:
        return None
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(lo or 0), int(hi) if hi else 1 << 30
    except ValueError:
        raise InputError(f"{option} {text!r}: expected a:b, e.g. 0:8") from None


def parse_override(text: str) -> tuple[str, str, Any]:
    """``section.key=value`` → (section, key, value); value is a TOML literal or a bare string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise InputError(f"--set {text!r}: expected section.key=value, e.g. --set schedule.qk_preload=2")
    dotted, raw = text.split("=", 1)
    section, key = dotted.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except ValueError:  # not a TOML literal (TOMLDecodeError is a ValueError, as is a 5000-digit integer)
        value = raw.strip()
    return section, key, value


def merge(data: dict[str, Any], section: str, key: str, value: Any) -> dict[str, Any]:
    """Return ``data`` with ``section.key`` set (no mutation of the input)."""
    out = {s: dict(v) if isinstance(v, dict) else v for s, v in data.items()}
    out.setdefault(section, {})
    if not isinstance(out[section], dict):
        raise InputError(f"config error: [{section}] must be a table of keys")
    out[section][key] = value
    return out
