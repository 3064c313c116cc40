"""Chip description: a preset TOML (``configs/hw/NAME.toml``) as typed, frozen dataclasses.

A preset has a ``[chip]`` and a ``[buffers]`` table and one table per timing
section (``cube``, ``vector``, ``move``, ``gm``, ``sync``, ``overhead``); every
key of every section is required, every value must be a finite number of the
right sign.  The timing model reads the sections as attributes
(``hw.move.gm_to_l1``); calibration and tests change them with
:meth:`Hardware.with_values` (``{"gm.bandwidth": 600.0}``).
"""
from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tfa_sim.spec.builds import SHIPPED, build_choices
from tfa_sim.spec.config import CONFIG_DIR, HardwareConfig
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_name, check_path, decode_text, read_bytes, show


@dataclass(frozen=True)
class CubeParams:
    """TMATMUL: ``ceil(M/f)·ceil(K/f)·ceil(N/f) + matmul_overhead`` cycles per CubeK panel."""

    fractal: int
    matmul_overhead: float


@dataclass(frozen=True)
class VectorParams:
    """Vector instructions as passes of intrinsics (docs/timing.md, "Vector instructions"): per intrinsic class
    the startup and completion paid where a stream starts (after a barrier) and the cycles per 256-byte
    repeat; ``count_mode`` is added to a pass over a partial repeat."""

    repeat_bytes: int
    count_mode: float
    binary_startup: float
    binary_per_repeat: float
    binary_completion: float
    div_startup: float
    div_per_repeat: float
    div_completion: float
    scalar_startup: float
    scalar_per_repeat: float
    scalar_completion: float
    exp_startup: float
    exp_per_repeat: float
    exp_completion: float
    convert_startup: float
    convert_per_repeat: float
    convert_completion: float
    reduce_startup: float
    reduce_per_repeat: float
    reduce_completion: float
    broadcast_completion: float


@dataclass(frozen=True)
class MoveParams:
    """Per-core path rates in bytes per cycle."""

    gm_to_l1: float
    gm_to_ub: float
    l1_to_l0a: float
    l1_to_l0b: float
    ub_to_gm: float
    l0c_to_gm: float


@dataclass(frozen=True)
class GmParams:
    """The chip's L2 and HBM, shared by all cores: bandwidths in bytes per cycle, latencies in cycles."""

    l2_bandwidth: float
    l2_latency: float  # an L2 hit
    hbm_bandwidth: float
    miss_latency: float  # added when a read misses L2


@dataclass(frozen=True)
class SyncParams:
    """Cross-core flags: cycles from the chip's sync unit (FFTS) serving a ``set_flag`` to the waiter seeing it,
    and the cycles of the unit each message takes (all cores' messages queue for it: buffers/ffts.py)."""

    flag_latency: float
    ffts_service: float


@dataclass(frozen=True)
class OverheadParams:
    """Per block, in cycles: the set-up of each block on its core before its first instruction (drawn before
    the block), and the gap between the starts of consecutive cores."""

    block_dispatch: float
    core_stagger: float


@dataclass(frozen=True)
class LaunchParams:
    """Cycles from one launch's end to the next one's first block on a stream kept full (the runtime's launch
    path and the device's start of the kernel), per class of host CPU driving the stream: what a measured
    launch period holds beyond the kernel time (docs/calibration.md, "What a measurement includes")."""

    gap_aarch64: float
    gap_x86_64: float
    host_sync: float  # what a host-synchronised launch adds: the host's launch call to the synchronise's return

    def gap(self, host: str) -> float:
        """The gap of ``host`` (``aarch64``, ``x86_64``); an unknown host (``""``) takes their mean."""
        return getattr(self, f"gap_{host}") if host else (self.gap_aarch64 + self.gap_x86_64) / 2


#: Host CPU classes a preset has a launch gap for (``hardware.host``).
HOSTS = ("aarch64", "x86_64")


@dataclass(frozen=True)
class CalibrationInfo:
    """What the preset's fitted values were fitted to, and the error a prediction inside that domain has
    (tfa_sim.sim.prediction): the kernel's builds measured and each design choice's values among them
    (``choices``, as ``key=value``), whether this board had measured points (``measured`` false: another board's
    values), the points, the 90 % half-width of the cross-validated relative errors, and the measured range of
    blocks, waves (blocks per core) and S1 and values of each schedule and tiling knob."""

    builds: list[str]
    choices: list[str]
    measured: bool
    points: int
    half_width: float
    blocks_max: int
    waves_max: int
    s1: list[int]
    head: list[int]
    cube_s0: list[int]
    cube_s1: list[int]
    tile_s1: list[int]
    qk_preload: list[int]
    cv_fifo_size: list[int]
    cv_fifo_cons_sync_period: list[int]
    s1_split: list[int]
    local_slot_num: list[int]


#: The timing sections of a preset, by table name.
SECTIONS: dict[str, type] = {"cube": CubeParams, "vector": VectorParams, "move": MoveParams, "gm": GmParams,
                             "sync": SyncParams, "overhead": OverheadParams, "launch": LaunchParams}


@dataclass(frozen=True)
class Hardware:
    """Core counts, clock, per-core buffer bytes and the timing sections of one chip."""

    name: str
    cube_cores: int
    vector_cores: int
    clock_mhz: float
    gm_scale: float  # this board's GM bandwidth relative to the boards a borrowed fit was made on
    l1: int
    l0a: int
    l0b: int
    l0c: int
    ub: int
    ub_align: int
    cube: CubeParams
    vector: VectorParams
    move: MoveParams
    gm: GmParams
    sync: SyncParams
    overhead: OverheadParams
    launch: LaunchParams
    calibration: CalibrationInfo
    source: str = ""

    def value(self, dotted: str) -> float:
        """``hw.value("gm.bandwidth")``."""
        section, key = dotted.split(".")
        return getattr(getattr(self, section), key)

    def with_values(self, values: Mapping[str, float]) -> Hardware:
        """A copy with timing parameters replaced, e.g. ``{"gm.bandwidth": 600.0, "sync.flag_latency": 0}``."""
        by_section: dict[str, dict[str, float]] = {}
        for dotted, value in values.items():
            section, key = dotted.split(".")
            by_section.setdefault(section, {})[key] = value
        return dataclasses.replace(self, **{s: dataclasses.replace(getattr(self, s), **kv)
                                            for s, kv in by_section.items()})

    def with_cores(self, cores: int) -> Hardware:
        """The same chip with ``cores`` AI cores (each an AIC and two AIVs) in use."""
        return dataclasses.replace(self, cube_cores=cores, vector_cores=2 * cores)


@dataclass(frozen=True)
class _ChipTable:
    name: str
    cube_cores: int
    vector_cores: int
    clock_mhz: float
    gm_scale: float


@dataclass(frozen=True)
class _BufferTable:
    l1: int
    l0a: int
    l0b: int
    l0c: int
    ub: int
    ub_align: int


#: Fields that must be strictly positive (counts, sizes, rates, divisors); the other numbers may be 0.
POSITIVE = {"chip.cube_cores", "chip.vector_cores", "chip.clock_mhz", "chip.gm_scale", "cube.fractal",
            "vector.repeat_bytes",
            "gm.l2_bandwidth", "gm.hbm_bandwidth",
            *(f"buffers.{f.name}" for f in dataclasses.fields(_BufferTable)),
            *(f"move.{f.name}" for f in dataclasses.fields(MoveParams))}



#: Every number of a preset lies within these bounds (positive ones at least MIN_POSITIVE): no chip is
#: described by larger ones, and sums and quotients of them stay finite.
MAX_VALUE = 1e9
MIN_POSITIVE = 1e-6
#: No preset file is this large.
MAX_PRESET_BYTES = 1 << 20


@lru_cache(maxsize=32)
def _parse_preset(text: str) -> dict[str, Any]:
    """Parsed preset TOML, cached by content (legality, runs and sweep points all read presets)."""
    return tomllib.loads(text)


def preset_names() -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / "hw").glob("*.toml"))


def _value(where: str, value: Any, kind: str, positive: bool) -> Any:
    """``value`` checked against its field's type: a non-empty string, an integer or a finite number."""
    if kind == "str":
        if isinstance(value, str) and value:
            return value
        raise InputError(f"{where} = {value!r} must be a non-empty string")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise InputError(f"{where} = {show(value)} must be true or false")
    if kind in ("list[int]", "list[str]"):
        item = kind[5:-1]
        if isinstance(value, list) and value and len(value) <= 64:
            return [_value(where, v, item, True) for v in value]
        what = "positive integers" if item == "int" else "non-empty strings"
        raise InputError(f"{where} = {show(value)} must be a list of 1 to 64 {what}")
    ok = isinstance(value, int) if kind == "int" else isinstance(value, (int, float))
    low = MIN_POSITIVE if positive else 0
    if isinstance(value, bool) or not ok or not low <= value <= MAX_VALUE:  # NaN fails the comparison too
        what = "an integer" if kind == "int" else "a finite number"
        raise InputError(f"{where} = {show(value)} must be {what} {'> 0' if positive else '≥ 0'} and at most "
                         f"{MAX_VALUE:g}" + (f" (a positive one at least {MIN_POSITIVE:g})" if positive else ""))
    return value


def _section(data: dict[str, Any], name: str, cls: type, path: Path) -> Any:
    table = data.get(name)
    if not isinstance(table, dict):
        problem = "table missing" if table is None else "must be one table"
        raise InputError(f"hardware file {path}: [{name}] {problem}; copy configs/hw/910b2.toml as a template")
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    missing, unknown = sorted(set(fields) - set(table)), sorted(set(table) - set(fields))
    if missing or unknown:
        raise InputError(f"hardware file {path}: [{name}] " + (f"misses {', '.join(missing)}" if missing else
                         f"has unknown key(s) {', '.join(unknown)}") + "; copy configs/hw/910b2.toml as a template")
    return cls(**{k: _value(f"hardware file {path}: {name}.{k}", table[k], kind, f"{name}.{k}" in POSITIVE)
                  for k, kind in fields.items()})


def parse_preset(data: dict[str, Any], path: Path) -> Hardware:
    """A :class:`Hardware` from a parsed preset TOML, every key checked."""
    chip = _section(data, "chip", _ChipTable, path)
    buffers = _section(data, "buffers", _BufferTable, path)
    timing = {name: _section(data, name, cls, path) for name, cls in SECTIONS.items()}
    if isinstance(data.get("calibration"), dict):
        data = {**data, "calibration": _older_calibration(data["calibration"])}
    calibration = _section(data, "calibration", CalibrationInfo, path)
    unknown = sorted(set(data) - {"chip", "buffers", "calibration", *SECTIONS})
    if unknown:
        raise InputError(f"hardware file {path}: unknown table(s) {', '.join(unknown)}")
    return Hardware(name=chip.name, cube_cores=chip.cube_cores, vector_cores=chip.vector_cores,
                    clock_mhz=chip.clock_mhz, gm_scale=chip.gm_scale, **dataclasses.asdict(buffers), **timing,
                    calibration=calibration, source=str(path))


def _older_calibration(table: dict[str, Any]) -> dict[str, Any]:
    """A [calibration] table written before some of its keys: points without ``s1_split`` were all unsplit and
    had ``local_slot_num`` 2; without ``choices``, the measured builds' choices are the shipped bundles'."""
    out = {"s1_split": [1], "local_slot_num": [2], **table}
    builds = out.get("builds")
    if "choices" not in out and isinstance(builds, list) and all(isinstance(b, str) for b in builds):
        out["choices"] = sorted({word for b in builds if b in SHIPPED for word in build_choices(b)}) or ["-"]
    return out


def _preset_path(cfg: HardwareConfig) -> Path:
    if cfg.file:
        return check_path(cfg.file, "hardware.file")
    check_name(cfg.preset, "hardware.preset", f"use one of {', '.join(preset_names())}")
    if cfg.preset not in preset_names():
        raise InputError(f"hardware.preset {cfg.preset!r} unknown; use one of {', '.join(preset_names())}")
    return CONFIG_DIR / "hw" / f"{cfg.preset}.toml"


def load_hardware(cfg: HardwareConfig) -> Hardware:
    """Read the preset or file named by ``cfg`` and apply ``cfg.cores``."""
    path = _preset_path(cfg)
    hint = "give a preset TOML path or use hardware.preset"
    text = decode_text(read_bytes(path, "hardware file", hint, MAX_PRESET_BYTES), path, "hardware file")
    try:
        data = _parse_preset(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of thousands of digits
        raise InputError(f"hardware file {path} does not parse ({str(exc).splitlines()[0]}); copy "
                         f"configs/hw/910b2.toml as a template") from None
    hw = parse_preset(data, path)
    if cfg.cores < 0 or cfg.cores > hw.cube_cores:
        raise InputError(f"config error: hardware.cores={cfg.cores} outside 0..{hw.cube_cores} for {hw.name} (0 = all)")
    return hw.with_cores(cfg.cores) if cfg.cores else hw
