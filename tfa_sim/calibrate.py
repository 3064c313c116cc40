"""``tfa-sim calibrate``: fit the timing model's free parameters and report the error.

Two fits, each against an independent reference (docs/calibration.md):

1. stage costs — ``vector.repeat_scale`` is solved so that compute_p costs the
   library cost model's 2489 cycles per logical tile at the reference shape
   (HEAD 128, CUBE_S0 128, TILE_S1 256, CUBE_S1 128), then ``move.l0c_to_gm``
   (the FIX store rate) so that compute_qk, the stage the store dominates,
   costs its 2487; both are re-solved for every candidate of the second fit,
   whose GM latency they depend on.  compute_pv (library 1617) and compute_gu
   (834) are then predictions, reported with their error;
2. kernel times — ``gm.bandwidth``, ``gm.latency``, ``sync.flag_latency``,
   ``overhead.block_dispatch`` (shared by all presets) and ``overhead.launch``
   (one per measured preset: board and driver differ) so that simulated kernel
   times match the measured points (minimise the mean absolute percentage
   error, within the physical bounds ``SYSTEM_BOUNDS``).  Presets without measurements take the fitted values of 910b2
   (910b4 with half its GM bandwidth, docs/timing.md "Hardware figures").

A stage's cost is the cycles its instruction groups occupy pipes per logical
tile, all its pipes summed (per AIV for the vector stages), in a one-core run
without contention.  scipy does the searching (brentq for the two stage
parameters, Nelder–Mead for the kernel-time fit).
"""
from __future__ import annotations

import csv
import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.config import CONFIG_DIR, Config, build_config
from tfa_sim.errors import InputError
from tfa_sim.hardware import Hardware, load_hardware
from tfa_sim.simulation import simulate
from tfa_sim.units import parse_unit

POINTS_FILE = CONFIG_DIR / "calibration" / "points.csv"
LIBRARY_STAGE_COSTS = {"compute_qk": 2487, "compute_p": 2489, "compute_pv": 1617, "compute_gu": 834}
SYSTEM_PARAMS = ("gm.bandwidth", "gm.latency", "sync.flag_latency", "overhead.block_dispatch")
#: Physical ranges the fit may not leave: chip GM/L2 bandwidth 0.5–20 KB/cycle (HBM alone is ≈ 0.9 KB/cycle at
#: 1.8 GHz), GM access 20–1000 cycles (L2 hit 50, miss +150), a cross-core flag 10–2000 cycles, and a block
#: dispatch of at most about a microsecond (the launch overhead, fitted per board, absorbs the rest).
SYSTEM_BOUNDS = ((500.0, 20000.0), (20.0, 1000.0), (10.0, 2000.0), (1.0, 2000.0))
STAGE_TILES = 16


@dataclass(frozen=True)
class Point:
    preset: str
    cores: int
    head: int
    s0: int
    s1: int
    cube_s0: int
    cube_s1: int
    tile_s1: int
    qk_preload: int
    time_us: float

    def config(self) -> Config:
        return build_config({"case": {"head": self.head, "s0": self.s0, "s1": self.s1},
                             "tiling": {"cube_s0": self.cube_s0, "cube_s1": self.cube_s1, "tile_s1": self.tile_s1},
                             "schedule": {"qk_preload": self.qk_preload},
                             "hardware": {"preset": self.preset, "cores": self.cores},
                             "numerics": {"enabled": False}})


def load_points(path: str | Path = POINTS_FILE) -> list[Point]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"calibration points {path} not found")
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    types = {f.name: str(f.type) for f in dataclasses.fields(Point)}
    convert = {"float": float, "int": int, "str": str}
    try:
        return [Point(*[convert[kind](row[name]) for name, kind in types.items()]) for row in csv.DictReader(lines)]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"calibration points {path}: bad row ({exc}); columns must be "
                         f"{','.join(types)}") from None


def stage_costs(hw: Hardware) -> dict[str, float]:
    """Cycles per logical tile of each stage at the reference shape, one core, no contention."""
    config = build_config({"case": {"s1": 256 * STAGE_TILES}, "numerics": {"enabled": False},
                           "hardware": {"preset": hw.name}})
    one_core = hw.with_cores(1)
    result = simulate(config, one_core, None, log_events=True)
    total: dict[str, float] = defaultdict(float)
    assert result.stats.events is not None
    for e in result.stats.events:
        total[e.stage] += (e.end - e.start) * (0.5 if parse_unit(e.unit).kind == "vec" else 1.0)
    return {stage: total[stage] / STAGE_TILES for stage in LIBRARY_STAGE_COSTS}


def predict(points: list[Point], presets: dict[str, Hardware]) -> list[float]:
    """Simulated kernel time (µs) of each point."""
    out = []
    for p in points:
        cfg = p.config()
        hw = presets[p.preset]
        out.append(simulate(cfg, hw.with_cores(p.cores), None, log_events=False).time_us)
    return out


def _fit_launch(measured: np.ndarray, predicted_us: np.ndarray, clock_mhz: float) -> float:
    """The launch overhead (cycles ≥ 0) minimising the absolute percentage error of a preset's points."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda d: np.mean(np.abs(predicted_us + d - measured) / measured),
                          bounds=(0.0, float(measured.max())), method="bounded")
    return max(0.0, res.x) * clock_mhz


def fit(points: list[Point], progress: Any = None) -> dict[str, Any]:
    """Run both fits; returns fitted presets, the table and the error figures."""
    from scipy.optimize import brentq, minimize

    names = sorted({p.preset for p in points})
    base = {n: load_hardware(build_config({"hardware": {"preset": n}}).hardware) for n in names}
    ref = base[names[0]]

    def solve(stage: str, param: str, values: dict, lo: float, hi: float) -> float:
        """The value of ``param`` at which ``stage`` costs what the library model says."""
        def gap(x: float) -> float:
            return stage_costs(ref.with_values({**values, param: float(x)}))[stage] - LIBRARY_STAGE_COSTS[stage]
        return brentq(gap, lo, hi, xtol=1e-3)

    def stage_fit(system_values: dict[str, float]) -> dict[str, float]:
        """repeat_scale from compute_p, then l0c_to_gm from compute_qk, given the system parameters."""
        values = dict(system_values)
        values["vector.repeat_scale"] = solve("compute_p", "vector.repeat_scale", values, 0.01, 4.0)
        values["move.l0c_to_gm"] = solve("compute_qk", "move.l0c_to_gm", values, 16.0, 8192.0)
        return values

    measured = np.array([p.time_us for p in points])

    def system(x: np.ndarray) -> tuple[float, dict[str, Hardware], np.ndarray]:
        values = stage_fit({k: float(v) for k, v in zip(SYSTEM_PARAMS, np.exp(x))})
        zero_launch = {n: base[n].with_values({**values, "overhead.launch": 0.0}) for n in names}
        raw = np.array(predict(points, zero_launch))
        presets, pred = {}, raw.copy()
        for n in names:
            idx = np.array([p.preset == n for p in points])
            launch = _fit_launch(measured[idx], raw[idx], zero_launch[n].clock_mhz)
            presets[n] = zero_launch[n].with_values({"overhead.launch": launch})
            pred[idx] = raw[idx] + launch / zero_launch[n].clock_mhz
        mape = float(np.mean(np.abs(pred - measured) / measured))
        if progress:
            progress(mape)
        return mape, presets, pred

    x1 = np.log([ref.value(k) for k in SYSTEM_PARAMS])
    bounds = [(np.log(lo), np.log(hi)) for lo, hi in SYSTEM_BOUNDS]
    sys_fit = minimize(lambda x: system(x)[0], np.clip(x1, *np.array(bounds).T), method="Nelder-Mead",
                       bounds=bounds, options={"xatol": 1e-2, "fatol": 1e-4, "maxiter": 60})
    mape, presets, pred = system(sys_fit.x)
    err = (pred - measured) / measured
    return {
        "presets": presets,
        "stage_costs": stage_costs(presets[names[0]]),
        "table": [{**dataclasses.asdict(p), "predicted_us": round(float(q), 3), "error": round(float(e), 4)}
                  for p, q, e in zip(points, pred, err)],
        "mape": mape,
        "max_abs_error": float(np.max(np.abs(err))),
    }


FITTED = ["vector.repeat_scale", "move.l0c_to_gm", "gm.bandwidth", "gm.latency", "sync.flag_latency",
          "overhead.launch", "overhead.block_dispatch"]


def _rewrite_preset(hw: Hardware, path: Path, note: str) -> None:
    """Write ``hw``'s fitted values into its preset TOML text, keeping every comment and other number."""
    section = None
    out = []
    for line in Path(hw.source).read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and "]" in stripped:
            section = stripped[1:stripped.index("]")]
        key = stripped.split("=", 1)[0].strip() if "=" in stripped else None
        if key and f"{section}.{key}" in FITTED:
            comment = line[line.index("#"):] if "#" in line else ""
            line = f"{key} = {hw.value(f'{section}.{key}'):.6g}".ljust(22) + " " + comment
        out.append(line)
    out = [ln for ln in out if not ln.startswith("# Calibrated")]
    out.insert(2, f"# Calibrated: {note}")
    path.write_text("\n".join(out) + "\n")


def write_presets(result: dict[str, Any], directory: Path | None) -> list[Path]:
    """Fitted presets for every shipped chip into ``directory`` (None: the shipped configs/hw).

    Presets without measured points take 910b2's fitted values; 910b4 gets half
    of its GM bandwidth (docs/timing.md, "Hardware figures").
    """
    from tfa_sim.hardware import preset_names

    fitted = result["presets"]
    donor = fitted.get("910b2") or next(iter(fitted.values()))
    note = f"tfa-sim calibrate, MAPE {result['mape']:.1%}, max |error| {result['max_abs_error']:.1%}"
    written = []
    for name in preset_names():
        hw = load_hardware(build_config({"hardware": {"preset": name}}).hardware)
        source = fitted.get(name, donor)
        values = {key: source.value(key) for key in FITTED}
        if name == "910b4" and name not in fitted:
            values["gm.bandwidth"] /= 2
        hw = hw.with_values(values)
        path = (directory or CONFIG_DIR / "hw") / f"{name}.toml"
        _rewrite_preset(hw, path, note + ("" if name in fitted else f" (no measured points: values of {donor.name})"))
        written.append(path)
    return written


def format_report(result: dict[str, Any]) -> str:
    lines = ["stage costs at the reference shape (cycles per logical tile) vs the library cost model:"]
    for stage, lib in LIBRARY_STAGE_COSTS.items():
        got = result["stage_costs"][stage]
        lines.append(f"  {stage:11s} {got:8.0f}  library {lib:5d}  error {got / lib - 1:+.1%}")
    lines.append("measured vs predicted kernel times:")
    lines.append("  preset cores    s0     s1  measured µs  predicted µs   error")
    for row in result["table"]:
        lines.append(f"  {row['preset']:6s} {row['cores']:5d} {row['s0']:5d} {row['s1']:6d} {row['time_us']:12.3f} "
                     f"{row['predicted_us']:13.3f} {row['error']:+7.1%}")
    lines.append(f"MAPE {result['mape']:.1%}, max |error| {result['max_abs_error']:.1%}")
    return "\n".join(lines)
