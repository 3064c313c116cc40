"""Chip description: a preset TOML (configs/hw/NAME.toml) as a frozen dataclass."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tfa_sim.config import CONFIG_DIR, HardwareConfig
from tfa_sim.errors import InputError


@dataclass(frozen=True)
class Hardware:
    """Core counts, clock and per-core buffer sizes; ``params`` keeps the timing sections."""

    name: str
    cube_cores: int
    vector_cores: int
    clock_mhz: float
    l1: int
    l0a: int
    l0b: int
    l0c: int
    ub: int
    ub_align: int
    params: dict[str, Any] = field(default_factory=dict, compare=False)
    source: str = ""


@lru_cache(maxsize=32)
def _read_preset(path: str, _mtime_ns: int) -> dict[str, Any]:
    """Parsed preset TOML; cached per file version (legality, runs and sweep points all read presets)."""
    return tomllib.loads(Path(path).read_text())


def preset_names() -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / "hw").glob("*.toml"))


def load_hardware(cfg: HardwareConfig) -> Hardware:
    """Read the preset or file named by ``cfg`` and apply ``cfg.cores``."""
    if cfg.file:
        path = Path(cfg.file)
        if not path.is_file():
            raise InputError(f"hardware.file {cfg.file} not found; give a preset TOML path or use hardware.preset")
    else:
        path = CONFIG_DIR / "hw" / f"{cfg.preset}.toml"
        if not path.is_file():
            raise InputError(f"hardware.preset {cfg.preset!r} unknown; use one of {', '.join(preset_names())}")
    try:
        data = _read_preset(str(path), path.stat().st_mtime_ns)
        chip, buffers = data["chip"], data["buffers"]
        hw = Hardware(name=chip["name"], cube_cores=chip["cube_cores"], vector_cores=chip["vector_cores"],
                      clock_mhz=chip["clock_mhz"], l1=buffers["l1"], l0a=buffers["l0a"], l0b=buffers["l0b"],
                      l0c=buffers["l0c"], ub=buffers["ub"], ub_align=buffers["ub_align"],
                      params={k: dict(v) for k, v in data.items() if k not in ("chip", "buffers")},
                      source=str(path))
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise InputError(f"hardware file {path} is malformed ({exc}); copy configs/hw/910b2.toml as a template") from None
    if cfg.cores < 0 or cfg.cores > hw.cube_cores:
        raise InputError(f"config error: hardware.cores={cfg.cores} outside 0..{hw.cube_cores} for {hw.name} (0 = all)")
    if cfg.cores:
        hw = Hardware(**{**hw.__dict__, "cube_cores": cfg.cores, "vector_cores": 2 * cfg.cores})
    return hw
