"""The port's consumer sync period 8 against 4 in the model, and what would move the ratio (issue 35).

Run: ``python benchmarks/sync_period.py [--no-what-if]``.

Prints, for the dsl build at S0 = S1 (its default tiling: TILE_S1 256 below 32768, 512 from there; runs from
32768² on folded), the kernel time and the host-synchronised time at periods 4 and 8 and their ratio; periods
1 and 2 at 32768²; then the 32768² ratio with one hardware value changed at a time (``Hardware.with_values``),
to show which physical value the ratio depends on.  Figures: benchmarks/README.md, docs/calibration.md
"Sync period".
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from tfa_sim.sim.prediction import prediction
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.hardware import Hardware, load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import kernel_plan

SIZES = (1024, 4096, 16384, 32768, 65536, 131072)
FOLD_FROM = 32768


def _fixed(values: Mapping[str, float]) -> Callable[[Hardware], Mapping[str, float]]:
    return lambda hw: values


#: The preset as it is.
AS_IS = _fixed({})


def _vector_slower(factor: float) -> Callable[[Hardware], Mapping[str, float]]:
    """Every vector per-repeat cost times ``factor`` (×1.1 brings the port's 32768² period 4 to the board's)."""
    return lambda hw: {f"vector.{k}": getattr(hw.vector, k) * factor for k in vars(hw.vector)
                       if k.endswith("_per_repeat")}


#: The cube's per-core paths in CANN's platform table for the Ascend910B2 (``[AICoreMemoryRates]``, bytes per
#: cycle: ``l2_read_rate`` 110, ``l2_write_rate`` 86, ``l1_to_l0_a_rate`` 512, ``l1_to_l0_b_rate`` 256) in
#: place of the library's flat table (docs/calibration.md, "Sync period").
CANN_CUBE = {"move.gm_to_l1": 110.0, "move.l0c_to_gm": 86.0, "move.l1_to_l0a": 512.0, "move.l1_to_l0b": 256.0}

#: One change at a time: the per-core GM→L1 rate between the library's flat table (80.53 B/cycle) and its
#: tile-move table (256), and lower; the chip's L2 four times the fit; a sync unit that never queues; the
#: port's single K tile in L1 (its steady loop uses one of its two); slower vector instructions; then the
#: cube's paths together: CANN's table, and the two rates that would give the board's ratio.
WHAT_IF: tuple[tuple[str, Callable[[Hardware], Mapping[str, float]], Mapping[str, int]], ...] = (
    ("move.gm_to_l1 = 128", _fixed({"move.gm_to_l1": 128.0}), {}),
    ("move.gm_to_l1 = 256", _fixed({"move.gm_to_l1": 256.0}), {}),
    ("move.gm_to_l1 = 58", _fixed({"move.gm_to_l1": 58.0}), {}),
    ("gm.l2_bandwidth = 20000", _fixed({"gm.l2_bandwidth": 20000.0}), {}),
    ("sync.ffts_service = 1", _fixed({"sync.ffts_service": 1.0}), {}),
    ("schedule.l1_k = 1", AS_IS, {"l1_k": 1}),
    ("vector per-repeat ×1.1", _vector_slower(1.1), {}),
    ("vector per-repeat ×1.2", _vector_slower(1.2), {}),
    ("cube paths from CANN's 910B2 table", _fixed(CANN_CUBE), {}),
    ("gm_to_l1 256, l0c_to_gm 167", _fixed({"move.gm_to_l1": 256.0, "move.l0c_to_gm": 167.0}), {}),
)


def times(s: int, period: int, change: Callable[[Hardware], Mapping[str, float]] = AS_IS,
          schedule: Mapping[str, int] = {}) -> tuple[float, float]:
    """(kernel µs, host-synchronised µs) of the dsl build's S² prefill at consumer sync period ``period``, on
    the preset with ``change(preset)`` applied."""
    cfg = build_config({"kernel": {"build": "dsl"}, "case": {"s0": s, "s1": s}, "numerics": {"enabled": False},
                        "schedule": {"cv_fifo_cons_sync_period": period, **schedule}})
    preset = load_hardware(cfg.hardware)
    hw = preset.with_values(change(preset))
    plan = kernel_plan(cfg, hw)
    r = simulate(plan, None, log_events=False, fold=s >= FOLD_FROM)
    return r.time_us, prediction(plan, r.total_cycles)["host_sync_us"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-what-if", action="store_true", help="only the presets' figures")
    args = parser.parse_args()
    print(f"{'S0 = S1':>8} {'p4 µs':>10} {'p8 µs':>10} {'p8/p4':>7} {'host-sync p8/p4':>16}")
    for s in SIZES:
        (k4, h4), (k8, h8) = times(s, 4), times(s, 8)
        print(f"{s:>8} {k4:>10.1f} {k8:>10.1f} {k8 / k4:>7.3f} {h8 / h4:>16.3f}", flush=True)
    base = times(32768, 4)[0]
    print("32768², periods 1 and 2 over 4: " +
          ", ".join(f"{p}: {times(32768, p)[0] / base:.3f}" for p in (1, 2)), flush=True)
    if args.no_what_if:
        return
    print("32768², p8/p4 with one value changed:")
    for label, change, schedule in WHAT_IF:
        k4, k8 = (times(32768, p, change, schedule)[0] for p in (4, 8))
        print(f"  {label:<26} p4 {k4:8.1f} µs  p8 {k8:8.1f} µs  {k8 / k4:.3f}", flush=True)


if __name__ == "__main__":
    main()
