"""The tuner against an exhaustive sweep, and its default space on two full-chip cases (issue 30).

Run: ``python benchmarks/bench_tune.py [--jobs 2] [--rounds 1] [--only NAME …] [--no-spaces] [--no-defaults]``.

1. For each space of ``benchmarks/spaces/`` (an 8k² prefill, a causal 16k², a GQA decode step, a windowed
   16k²), side by side with the same ``--jobs``: ``tfa-sim sweep FILE --no-plots`` (every point simulated in
   full) and ``tfa-sim tune --space FILE`` (its plots and report included), each a fresh subprocess timed
   from start to exit; the order alternates every round.  Printed: the tuner's pick against the sweep's best
   point (the gap, %), the wall-time ratio tune/sweep, the simulations each ran, and the screen's agreement
   with the full simulations over every legal point of the space (Kendall τ and Spearman ρ of the
   estimates against the sweep's times, the rank the screen gave the sweep's best point, the range of
   simulated/estimated ratios).  Where optuna is installed (it is no dependency of tfa-sim), also how many
   full simulations optuna's default sampler (TPE) needs to come within 1 % of the best, over 10 seeds.
2. With the default space (no ``--space``): a 910b2 full-chip 32k² prefill (S0 = S1 = 32768) and a decode
   step (S0 = 1, S1 = 131072, heads 32, kv_heads 8): wall time, simulations, the best against the kernel's
   defaults.

Before each run it waits (up to 20 s) for the machine to be 80 % idle, and prints each run's CPU share:
a ``--jobs 2`` run far below 200 % shared its cores with another job.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench_sweep import _cpu, wait_for_idle
from scipy.stats import kendalltau, spearmanr

from tfa_sim.explore.sweep import read_results

SPACES = Path(__file__).parent / "spaces"
DEFAULT_CASES = {
    "prefill 32k² (default space)": ["--set", "case.s0=32768", "--set", "case.s1=32768"],
    "decode S1=128k GQA 32/8 (default space)": ["--set", "case.s0=1", "--set", "case.s1=131072", "--set",
                                                "case.heads=32", "--set", "case.kv_heads=8"],
}


def timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``tfa-sim ARGS`` in a fresh interpreter."""
    if not wait_for_idle(limit=20):
        print("  (the machine stayed busy: this run shares its cores)", flush=True)
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "tfa_sim", *args], check=True, capture_output=True)
    return time.perf_counter() - start, _cpu() - cpu


def _by_point(overrides: dict) -> str:
    return json.dumps(overrides, sort_keys=True)


def agreement(tune: dict, sweep_rows: list[dict]) -> dict:
    """The screen's estimates against the sweep's full simulations, over the points both have."""
    metric = tune["metric"]
    simulated = {_by_point(r["overrides"]): r[metric] for r in sweep_rows if r["status"] == "ok"}
    pairs = [(c["estimate"], simulated[_by_point(c["overrides"])]) for c in tune["candidates"]
             if c["estimate"] is not None and _by_point(c["overrides"]) in simulated]
    est, sim = [e for e, _ in pairs], [s for _, s in pairs]
    best = min(range(len(sim)), key=sim.__getitem__)
    ratios = [s / e for e, s in pairs]
    return {"points": len(pairs), "tau": kendalltau(est, sim).statistic, "rho": spearmanr(est, sim).statistic,
            "best_rank": 1 + sum(e < est[best] for e in est), "ratio": (min(ratios), max(ratios))}


def optuna_trials(tune: dict, sweep_rows: list[dict], seeds: int = 10, limit: int = 400) -> list[int] | None:
    """Per seed, the distinct legal points optuna's TPE sampler (its default) evaluates until one is within 1 %
    of the space's best, the objective being the sweep's full simulations looked up (None without optuna)."""
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    metric, axes = tune["metric"], tune["axes"]
    simulated = {_by_point(r["overrides"]): r[metric] for r in sweep_rows if r["status"] == "ok"}
    target = min(simulated.values()) * 1.01
    counts = []
    for seed in range(seeds):
        seen: set[str] = set()
        optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed)).optimize(
            partial(_objective, axes=axes, simulated=simulated, seen=seen, target=target, limit=limit),
            n_trials=10 * limit)
        counts.append(len(seen))
    return counts


def _objective(trial: Any, axes: dict, simulated: dict, seen: set, target: float, limit: int) -> float:
    import optuna

    point = {a: trial.suggest_categorical(a, values) for a, values in axes.items()}
    key = _by_point(point)
    if key not in simulated:
        raise optuna.TrialPruned()  # illegal: no simulation spent
    seen.add(key)
    if simulated[key] <= target or len(seen) >= limit:
        trial.study.stop()
    return simulated[key]


def space_round(spec: Path, jobs: int, tmp: Path, r: int) -> dict:
    """One side-by-side round on ``spec``: the sweep and the tune, in alternating order."""
    out = {}
    for what in (("sweep", "tune") if r % 2 == 0 else ("tune", "sweep")):
        d = tmp / f"{spec.stem}-{what}-{r}"
        args = ["sweep", str(spec), "--no-plots"] if what == "sweep" else ["tune", "--space", str(spec)]
        out[what] = (*timed([*args, "--out", str(d), "--jobs", str(jobs), "--no-progress"]), d)
    rows = read_results(out["sweep"][2] / "results.jsonl")
    tune = json.loads((out["tune"][2] / "tune.json").read_text())
    metric = tune["metric"]
    best = min(r[metric] for r in rows if r["status"] == "ok")
    sims = len(read_results(out["tune"][2] / "results.jsonl"))
    swept = len(rows) + len(read_results(out["sweep"][2] / "references.jsonl"))
    return {"gap": tune["best"]["metric"] / best - 1, "ratio": out["tune"][0] / out["sweep"][0],
            "sweep_s": out["sweep"][0], "tune_s": out["tune"][0], "sweep_cpu": out["sweep"][1] / out["sweep"][0],
            "tune_cpu": out["tune"][1] / out["tune"][0], "sims": sims, "swept": swept, "best": best,
            "pick": tune["best"]["metric"], "agreement": agreement(tune, rows), "optuna": optuna_trials(tune, rows)}


def bench_spaces(names: list[str], jobs: int, rounds: int, tmp: Path) -> None:
    for name in names:
        spec = SPACES / f"{name}.toml"
        for r in range(rounds):
            f = space_round(spec, jobs, tmp, r)
            a = f["agreement"]
            print(f"{name}: tuner's pick {f['pick']:.6g} vs the sweep's best {f['best']:.6g} (gap {f['gap']:+.2%}); "
                  f"wall {f['tune_s']:.1f} s vs {f['sweep_s']:.1f} s = {f['ratio']:.1%} "
                  f"(CPU {f['tune_cpu']:.0%} / {f['sweep_cpu']:.0%}); simulations {f['sims']} vs {f['swept']}; "
                  f"screen over {a['points']} points: Kendall τ {a['tau']:+.2f}, Spearman ρ {a['rho']:+.2f}, "
                  f"the sweep's best ranked {a['best_rank']} by the screen, simulated/estimated "
                  f"{a['ratio'][0]:.3f}–{a['ratio'][1]:.3f}", flush=True)
            if f["optuna"] is not None:
                n = sorted(f["optuna"])
                print(f"  optuna TPE over the same space (the sweep's simulations looked up): {n[len(n) // 2]} "
                      f"simulations (median of {len(n)} seeds, {n[0]}–{n[-1]}) to come within 1 % of the best; "
                      f"the tuner simulated {f['sims']}", flush=True)


def bench_defaults(jobs: int, tmp: Path) -> None:
    for n, (label, args) in enumerate(DEFAULT_CASES.items()):
        d = tmp / f"default-{n}"
        wall, cpu = timed(["tune", *args, "--out", str(d), "--jobs", str(jobs), "--no-progress"])
        s = json.loads((d / "tune.json").read_text())
        best, defaults = s["best"], s["defaults"]
        print(f"{label}: {wall:.1f} s wall ({cpu / wall:.0%} CPU) with --jobs {jobs}: {s['points']} points, "
              f"{s['status']}; screen {s['screen']['seconds']:.1f} s ({s['screen']['probes']} probes), "
              f"{s['search']['simulations']} simulated; best {best['time_us']:.6g} µs {best['changes']} against the "
              f"defaults' {defaults.get('time_us', float('nan')):.6g} µs (gain {best.get('gain', float('nan')):.3f}×)",
              flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--only", nargs="*", help="spaces by name (default: every file of benchmarks/spaces)")
    p.add_argument("--no-spaces", action="store_true")
    p.add_argument("--no-defaults", action="store_true")
    args = p.parse_args()
    names = args.only or sorted(f.stem for f in SPACES.glob("*.toml"))
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_spaces:
            bench_spaces(names, args.jobs, args.rounds, Path(tmp))
        if not args.no_defaults:
            bench_defaults(args.jobs, Path(tmp))


if __name__ == "__main__":
    main()
