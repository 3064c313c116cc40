"""How tfa-sim ranks schedules against the PTO-ISA library's own cost model (scripts/fa_cost_model.py).

    python benchmarks/bench_ranking.py --facm PATH/TO/fa_cost_model.py [--mode npu] [--jobs 2] [--out FILE]
                                       [--facm-set logical_tile_sync_cycles=0 ...]

The library's model is not bundled: give the path of its ``fa_cost_model.py`` (pto-isa,
kernels/manual/common/flash_atten/scripts/).  Its "npu" mode adds correction terms fitted to onboard 910B3 and
910B4 ranking data, so it is evidence of how the board orders schedules, not of absolute times.

Groups: HEAD 128, S0 ∈ {128, 256, 512, 1024} × S1 ∈ {1k, 2k, 4k, 8k, 16k}, on one core of a 910B3 and as a
20-core wave (S0 × 20 rows on all 20 cores), 40 groups.  Candidates: the library's default search grid —
CUBE_S0 {64, 128, 256} × CUBE_S1 {64, 128} × TILE_S1 {128 … 2048} × preload {2, 4, 6} — where both models
accept the schedule (tfa-sim also checks the L0C accumulator, so CUBE_S0 256 at HEAD 128 is out).  Per group:
Kendall τ-b between the two models' times, the rank of tfa-sim's best in the library's order, and the regret
(the library's time of tfa-sim's best over the library's best).  Prints one line per group and the summary
figures docs/calibration.md quotes ("Ranking against the library's cost model").  ``--facm-set NAME=CYCLES``
overrides one of the library's correction terms (its own ``--NAME`` options), to measure how much of the
disagreement one term carries.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import itertools
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

S0S = (128, 256, 512, 1024)
S1S = (1024, 2048, 4096, 8192, 16384)
CORES = (1, 20)
GRID = {"cube_s0": (64, 128, 256), "cube_s1": (64, 128), "tile_s1": (128, 256, 512, 1024, 2048),
        "qk_preload": (2, 4, 6)}


def load_facm(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("fa_cost_model", path)
    if spec is None or spec.loader is None:
        sys.exit(f"bench_ranking: {path} is not a Python file; give the path of fa_cost_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


TERMS = ("logical_tile_sync_cycles", "subtile_sync_cycles", "block_dispatch_cycles",
         "short_sequence_large_tile_cycles", "short_sequence_preload2_bonus_cycles", "gm_large_tile_cycles",
         "gm_short_high_preload_cycles", "extra_cube_s1_subtile_cycles", "long_extra_cube_s1_subtile_cycles",
         "narrow_vec_s0_cycles", "h64_mid_tile_cycles", "h64_short_large_tile_bonus_cycles",
         "cube_s0_256_mid_bonus_cycles", "cube_s0_256_long_cycles")


def facm_time(facm: Any, mode: str, s0: int, s1: int, cores: int, knobs: dict[str, int],
              terms: dict[str, float]) -> float | None:
    """The library model's time (µs) of one schedule, or None where it refuses the schedule."""
    soc = dataclasses.replace(facm.SOC_SPECS["Ascend910B3"], cube_cores=cores)
    fit = facm.make_fit(mode, argparse.Namespace(**{k: terms.get(k) for k in TERMS}))
    cfg = facm.FaConfig(head=128, s0=s0, s1=s1, **knobs)
    try:
        return facm.estimate_cycles(cfg, soc=soc, fit=fit)["time_us"]
    except ValueError:
        return None


def ours(args: tuple[int, int, int, dict[str, int]]) -> float | None:
    """tfa-sim's kernel time (µs) of one schedule on 910b3, or None where it refuses the schedule."""
    from tfa_sim.sim.simulation import simulate
    from tfa_sim.spec.errors import InputError
    from tfa_sim.spec.load import build_config
    from tfa_sim.stages.plan import kernel_plan

    s0, s1, cores, knobs = args
    try:
        cfg = build_config({"case": {"head": 128, "s0": s0, "s1": s1},
                            "tiling": {k: knobs[k] for k in ("cube_s0", "cube_s1", "tile_s1")},
                            "schedule": {"qk_preload": knobs["qk_preload"]},
                            "hardware": {"preset": "910b3", "cores": cores}, "numerics": {"enabled": False}})
    except InputError:
        return None
    return simulate(kernel_plan(cfg), None, log_events=False, fold=True).time_us


def kendall(a: list[float], b: list[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def group(facm: Any, mode: str, terms: dict[str, float], s0: int, s1: int, cores: int,
          pool: ProcessPoolExecutor) -> dict[str, Any]:
    rows = s0 * (20 if cores == 20 else 1)
    schedules = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    theirs = [facm_time(facm, mode, rows, s1, cores, k, terms) for k in schedules]
    candidates = [(k, t) for k, t in zip(schedules, theirs) if t is not None]
    mine = list(pool.map(ours, [(rows, s1, cores, k) for k, _ in candidates]))
    both = [(k, t, m) for (k, t), m in zip(candidates, mine) if m is not None]
    their_order = sorted(both, key=lambda r: r[1])
    best = min(both, key=lambda r: r[2])
    rank = 1 + next(i for i, r in enumerate(their_order) if r[0] == best[0])
    return {"s0": s0, "s1": s1, "cores": cores, "schedules": len(both),
            "tau": kendall([r[1] for r in both], [r[2] for r in both]), "our_best": best[0],
            "their_best": their_order[0][0], "our_best_rank": rank, "regret": best[1] / their_order[0][1],
            "times": [{**k, "theirs_us": t, "ours_us": m} for k, t, m in both]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--facm", required=True, help="path of the library's fa_cost_model.py")
    p.add_argument("--mode", default="npu", choices=("npu", "sim"))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", help="also write the groups and every schedule's two times as JSON here")
    p.add_argument("--facm-set", action="append", default=[], metavar="NAME=CYCLES",
                   help=f"override one of the library's correction terms ({', '.join(TERMS)})")
    args = p.parse_args()
    terms = {}
    for item in args.facm_set:
        name, _, value = item.partition("=")
        if name not in TERMS or not value:
            sys.exit(f"bench_ranking: --facm-set {item!r}: give NAME=CYCLES with NAME one of {', '.join(TERMS)}")
        terms[name] = float(value)
    facm = load_facm(args.facm)
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for cores, s0, s1 in itertools.product(CORES, S0S, S1S):
            g = group(facm, args.mode, terms, s0, s1, cores, pool)
            results.append(g)
            print(f"{cores:2d} core(s) S0={s0:5d} S1={s1:6d}: {g['schedules']:3d} schedules, tau {g['tau']:+.2f}, "
                  f"our best {g['our_best']} is #{g['our_best_rank']} in its order, regret {g['regret']:.3f}x "
                  f"(its best {g['their_best']})", flush=True)
    taus = [g["tau"] for g in results]
    long = [g for g in results if g["s1"] >= 4096]
    top3 = sum(g["our_best_rank"] <= 3 for g in results)
    worst = max(g["regret"] for g in long)
    over = sum(g["regret"] > 1.15 for g in long)
    print(f"Kendall tau median {statistics.median(taus):+.2f} over {len(results)} groups "
          f"({statistics.median(g['tau'] for g in long):+.2f} over the {len(long)} at S1 >= 4096); "
          f"our best in its top 3 in {top3} of {len(results)}; "
          f"regret at S1 >= 4096: max {worst:.3f}x, over 1.15x in {over} groups")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
