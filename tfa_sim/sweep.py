"""Schedule exploration: ``tfa-sim sweep`` and ``tfa-sim sweep-report``.

A sweep file is a ``[base]`` config, an ``[axes]`` table of dotted keys to
values (a list, ``{start, stop, step}`` or ``{start, stop, factor}``, both
inclusive) and an optional ``[sweep]`` table: ``metric`` (``time_us``,
``total_cycles``, ``tflops``, ``normalized_tflops``), ``mode`` (``grid`` or
``random`` with ``budget`` and ``seed``), ``numerics`` (default false: timing
only) and ``constraints`` (expressions over config keys such as
``"schedule.qk_preload <= schedule.cv_fifo_size"``).

Every point is identified by a hash of its full config.  Results are appended
to ``results.jsonl`` one complete line per finished point, so a killed sweep
loses only the points in flight and rerunning the same command skips the
finished ones; ``results.csv`` is the same table regenerated from it.
"""
from __future__ import annotations

import ast
import csv
import hashlib
import itertools
import json
import operator
import os
import random
import tomllib
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfa_sim.config import build_config, merge
from tfa_sim.errors import InputError, ScheduleError

METRICS = {"time_us": min, "total_cycles": min, "tflops": max, "normalized_tflops": max}
SHAPE_KEYS = ("head", "s0", "s1", "causal", "batch", "heads", "kv_heads")


@dataclass(frozen=True)
class Sweep:
    base: dict[str, Any]
    axes: list[tuple[str, list[Any]]]
    metric: str = "time_us"
    mode: str = "grid"
    budget: int = 0
    seed: int = 0
    numerics: bool = False
    constraints: tuple[str, ...] = ()


def _axis_values(key: str, spec: Any) -> list[Any]:
    if isinstance(spec, list) and spec:
        return spec
    if isinstance(spec, dict) and {"start", "stop"} <= set(spec) and len(set(spec) & {"step", "factor"}) == 1:
        values, v = [], spec["start"]
        step, factor = spec.get("step"), spec.get("factor")
        if (step is not None and step <= 0) or (factor is not None and factor <= 1):
            raise InputError(f"sweep axis {key}: step must be > 0 and factor > 1")
        while v <= spec["stop"]:
            values.append(v)
            v = v + step if step is not None else v * factor
        return values
    raise InputError(f"sweep axis {key} = {spec!r}: give a non-empty list or {{start, stop, step|factor}}")


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"sweep file {path} not found")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"sweep file {path} does not parse: {exc}") from None
    unknown = set(data) - {"base", "axes", "sweep"}
    if unknown:
        raise InputError(f"sweep file {path}: unknown table(s) {sorted(unknown)}; use [base], [axes], [sweep]")
    if not data.get("axes"):
        raise InputError(f"sweep file {path}: [axes] is empty; add e.g. \"schedule.qk_preload\" = [1, 2, 4]")
    axes = []
    for key, spec in data["axes"].items():
        if "." not in key:
            raise InputError(f"sweep axis {key!r}: use section.key, e.g. \"schedule.qk_preload\"")
        axes.append((key, _axis_values(key, spec)))
    opts = dict(data.get("sweep", {}))
    known = {"metric", "mode", "budget", "seed", "numerics", "constraints"}
    if set(opts) - known:
        raise InputError(f"sweep file {path}: unknown [sweep] key(s) {sorted(set(opts) - known)}; known: "
                         f"{', '.join(sorted(known))}")
    sweep = Sweep(base=data.get("base", {}), axes=axes, metric=opts.get("metric", "time_us"),
                  mode=opts.get("mode", "grid"), budget=int(opts.get("budget", 0)), seed=int(opts.get("seed", 0)),
                  numerics=bool(opts.get("numerics", False)), constraints=tuple(opts.get("constraints", ())))
    if sweep.metric not in METRICS:
        raise InputError(f"[sweep] metric = {sweep.metric!r}: use one of {', '.join(METRICS)}")
    if sweep.mode not in ("grid", "random") or (sweep.mode == "random" and sweep.budget < 1):
        raise InputError("[sweep] mode must be \"grid\", or \"random\" with budget ≥ 1")
    for expr in sweep.constraints:
        _parse_constraint(expr)
    return sweep


# ---- constraints: a tiny expression language over config keys --------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _parse_constraint(expr: str) -> ast.Expression:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise InputError(f"constraint {expr!r} does not parse; write e.g. schedule.qk_preload <= 4") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.Compare, ast.BinOp, ast.BoolOp, ast.And, ast.Or, ast.Name,
                                 ast.Attribute, ast.Constant, ast.Load, *_OPS)):
            raise InputError(f"constraint {expr!r}: only arithmetic, comparisons, and/or over config keys")
    return tree


def _eval(node: ast.AST, config: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, config)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        try:
            return config[node.value.id][node.attr]
        except KeyError:
            raise InputError(f"constraint names unknown key {node.value.id}.{node.attr}") from None
    if isinstance(node, ast.BinOp):
        return _OPS[type(node.op)](_eval(node.left, config), _eval(node.right, config))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, config) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, config)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, config)
            if not _OPS[type(op)](left, right):
                return False
            left = right
        return True
    raise InputError(f"constraint element {ast.dump(node)} is not supported")


# ---- points ------------------------------------------------------------------------------------
def point_key(config: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def points(sweep: Sweep) -> list[dict[str, Any]]:
    """Every point as {key, overrides, config (nested dict)}, grid order or a seeded random sample."""
    combos = list(itertools.product(*[values for _k, values in sweep.axes]))
    if sweep.mode == "random" and sweep.budget < len(combos):
        combos = random.Random(sweep.seed).sample(combos, sweep.budget)
    out = []
    for combo in combos:
        data = {k: dict(v) for k, v in sweep.base.items()}
        data["numerics"] = {**data.get("numerics", {}), "enabled": sweep.numerics}
        for (dotted, _values), value in zip(sweep.axes, combo):
            section, key = dotted.split(".", 1)
            data = merge(data, section, key, value)
        out.append({"key": point_key(data), "overrides": dict(zip((k for k, _ in sweep.axes), combo)),
                    "config": data})
    return out


def run_point(point: dict[str, Any], constraints: tuple[str, ...] = (), metric: str = "time_us") -> dict[str, Any]:
    """Simulate one point (in a worker): the row that goes into results.jsonl."""
    from tfa_sim.buffers.capacity import buffer_use
    from tfa_sim.engine.report import timing_summary
    from tfa_sim.hardware import load_hardware
    from tfa_sim.simulation import simulate

    row: dict[str, Any] = {"key": point["key"], "overrides": point["overrides"]}
    try:
        config = build_config(point["config"])
    except InputError as exc:
        return {**row, "status": "illegal", "message": str(exc), "config": point["config"]}
    row["config"] = config.to_dict()
    for expr in constraints:
        if not _eval(_parse_constraint(expr), row["config"]):
            return {**row, "status": "excluded", "message": f"constraint {expr} is false"}
    hw = load_hardware(config.hardware)
    use = buffer_use(config, hw.ub_align)
    row.update(l1_bytes=use.l1_bytes, ub_bytes=use.ub_bytes)
    try:
        numerics = _numerics(config) if config.numerics.enabled else None
        t = timing_summary(simulate(config, hw, numerics, log_events=False), config)
    except ScheduleError as exc:
        return {**row, "status": "schedule_error", "message": str(exc)}
    row.update(status="ok", total_cycles=t["total_cycles"], time_us=t["time_us"], tflops=t["tflops"],
               normalized_tflops=t["normalized_tflops"], bound_pipe=t["bound_pipe"], cores_used=t["cores_used"])
    row["metric"] = row[metric]
    return row


def _numerics(config):
    import numpy as np

    from tfa_sim.backends import get_backend
    from tfa_sim.inputs import generate_inputs
    from tfa_sim.stages.block_kernel import Numerics

    c = config.case
    return Numerics(get_backend(config.numerics.backend, config.numerics.exp_model), generate_inputs(config),
                    np.zeros((c.batch, c.heads, c.s0, c.head), np.float32))


# ---- results file ------------------------------------------------------------------------------
def read_results(path: Path) -> list[dict[str, Any]]:
    """Complete rows of results.jsonl; a line cut short by a kill is dropped (and removed from the file)."""
    if not path.is_file():
        return []
    rows, good = [], []
    for line in path.read_text().splitlines(keepends=True):
        try:
            rows.append(json.loads(line))
            good.append(line if line.endswith("\n") else line + "\n")
        except json.JSONDecodeError:
            continue
    if "".join(good) != path.read_text():
        tmp = path.with_suffix(".jsonl.partial")
        tmp.write_text("".join(good))
        os.replace(tmp, path)
    return rows


class ResultWriter:
    """Appends one JSON line per finished point with a single write (then fsync)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, row: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(row, sort_keys=True) + "\n").encode())
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


CSV_COLUMNS = ("key", "status", "time_us", "total_cycles", "tflops", "normalized_tflops", "bound_pipe",
               "l1_bytes", "ub_bytes", "message")


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    axes = sorted({k for r in rows for k in r.get("overrides", {})})
    tmp = path.with_suffix(".csv.partial")
    with open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*axes, *CSV_COLUMNS])
        for r in rows:
            w.writerow([r["overrides"].get(a, "") for a in axes] + [r.get(c, "") for c in CSV_COLUMNS])
    os.replace(tmp, path)


# ---- execution ---------------------------------------------------------------------------------
def run_sweep(sweep_file: str | Path, out_dir: str | Path | None, jobs: int, executor: str = "local",
              scheduler: str | None = None, progress: bool = True) -> tuple[Path, list[dict[str, Any]]]:
    """Run (or resume) a sweep; returns the output directory and all rows."""
    sweep = load_sweep(sweep_file)
    out = Path(out_dir) if out_dir else Path("runs") / f"sweep-{Path(sweep_file).stem}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps({"file": str(sweep_file), "metric": sweep.metric,
                                                "axes": [k for k, _ in sweep.axes]}, indent=2))
    results = out / "results.jsonl"
    done = {r["key"] for r in read_results(results)}
    todo = [p for p in points(sweep) if p["key"] not in done]
    total = len(todo) + len(done)
    writer = ResultWriter(results)
    bar = _progress(total, len(done), progress)
    try:
        runner = _run_dask if executor == "dask" else _run_local
        if executor not in ("local", "dask"):
            raise InputError(f"--executor {executor!r}: use local or dask")
        for row in runner(todo, sweep, jobs, scheduler):
            writer.write(row)
            bar.update(1)
    finally:
        writer.close()
        bar.close()
        rows = read_results(results)
        write_csv(rows, out / "results.csv")
    return out, rows


def _progress(total: int, done: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="pt", desc="sweep", disable=not enabled, smoothing=0.1)


def _run_local(todo: list[dict], sweep: Sweep, jobs: int, _scheduler: str | None) -> Iterator[dict]:
    """A process pool with at most 2·jobs points in flight (a kill loses only those)."""
    if jobs <= 1:
        for p in todo:
            yield run_point(p, sweep.constraints, sweep.metric)
        return
    pending = iter(todo)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        inflight = set()
        try:
            for p in itertools.islice(pending, 2 * jobs):
                inflight.add(pool.submit(run_point, p, sweep.constraints, sweep.metric))
            while inflight:
                finished, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield fut.result()
                    nxt = next(pending, None)
                    if nxt is not None:
                        inflight.add(pool.submit(run_point, nxt, sweep.constraints, sweep.metric))
        except BaseException:
            for fut in inflight:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _run_dask(todo: list[dict], sweep: Sweep, jobs: int, scheduler: str | None) -> Iterator[dict]:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError("--executor dask needs dask.distributed: pip install \"dask[distributed]\"") from None
    cluster = None if scheduler else LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                                                  dashboard_address=None)
    client = Client(scheduler or cluster)
    try:
        futures = client.map(run_point, todo, constraints=sweep.constraints, metric=sweep.metric, pure=False)
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ---- report ------------------------------------------------------------------------------------
def shape_of(row: dict[str, Any]) -> tuple:
    c = row["config"]
    return tuple(c["case"][k] for k in SHAPE_KEYS) + (c["hardware"]["preset"], c["hardware"]["cores"])


def shape_label(shape: tuple) -> str:
    head, s0, s1, causal, batch, heads, kv, preset, cores = shape
    extra = (" causal" if causal else "") + (f" batch {batch} heads {heads}/{kv}" if (batch, heads) != (1, 1) else "")
    return f"H{head} S0={s0} S1={s1}{extra} on {preset}" + (f" ({cores} cores)" if cores else "")


def pareto(rows: list[dict[str, Any]], metric: str, other: str) -> list[dict[str, Any]]:
    """Points no other point beats on both the metric and ``other`` (bytes)."""
    better = METRICS[metric]
    sign = 1 if better is min else -1
    ordered = sorted(rows, key=lambda r: (r[other], sign * r[metric]))
    front, best = [], None
    for r in ordered:
        if best is None or sign * r[metric] < best:
            front.append(r)
            best = sign * r[metric]
    return front


def default_metric(row: dict[str, Any], metric: str, cache: dict) -> float | str:
    """The metric of the kernel's default tiling and schedule for the row's shape (simulated if absent)."""
    shape = shape_of(row)
    if shape not in cache:
        base = {"case": row["config"]["case"], "hardware": row["config"]["hardware"],
                "numerics": {"enabled": False}}
        result = run_point({"key": point_key(base), "overrides": {}, "config": base}, (), metric)
        cache[shape] = result.get("metric", f"defaults {result['status']}: {result.get('message', '')}")
    return cache[shape]


def sweep_report(out_dir: str | Path, plots: bool = True) -> dict[str, Any]:
    out = Path(out_dir)
    meta_path = out / "sweep.json"
    if not meta_path.is_file():
        raise InputError(f"{out} is not a sweep directory (no sweep.json); give the --out of tfa-sim sweep")
    meta = json.loads(meta_path.read_text())
    metric = meta["metric"]
    rows = read_results(out / "results.jsonl")
    ok = [r for r in rows if r["status"] == "ok"]
    status = {s: sum(r["status"] == s for r in rows) for s in ("ok", "illegal", "excluded", "schedule_error")}
    better = METRICS[metric]
    shapes: dict[tuple, list] = {}
    for r in ok:
        shapes.setdefault(shape_of(r), []).append(r)
    cache: dict = {}
    per_shape = []
    for shape, rs in sorted(shapes.items()):
        ranked = sorted(rs, key=lambda r: r[metric], reverse=better is max)
        best = ranked[0]
        ref = default_metric(best, metric, cache)
        speedup = None
        if isinstance(ref, float):
            speedup = (ref / best[metric]) if better is min else (best[metric] / ref)
        per_shape.append({"shape": shape_label(shape), "best": best, "default_metric": ref, "speedup": speedup,
                          "ranked": ranked[:10], "pareto_ub": pareto(rs, metric, "ub_bytes"),
                          "pareto_l1": pareto(rs, metric, "l1_bytes")})
    report = {"metric": metric, "points": len(rows), "status": status, "shapes": per_shape,
              "plots": _plots(out, ok, meta["axes"], metric) if plots and ok else []}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report


def format_sweep_report(report: dict[str, Any]) -> str:
    m = report["metric"]
    lines = [f"sweep report: {report['points']} points ({', '.join(f'{k} {v}' for k, v in report['status'].items())})"
             f"; metric {m} ({'lower' if METRICS[m] is min else 'higher'} is better)"]
    for s in report["shapes"]:
        best = s["best"]
        sp = f"{s['speedup']:.2f}× vs the kernel defaults ({s['default_metric']:.4g})" if s["speedup"] else \
            f"no default to compare ({s['default_metric']})"
        lines.append(f"{s['shape']}: best {m} {best[m]:.4g} with {best['overrides']} — {sp}")
        lines.append(f"  {'rank':>4s} {m:>12s} {'bound':>10s} {'UB B':>7s} {'L1 B':>7s}  point")
        for i, r in enumerate(s["ranked"], 1):
            lines.append(f"  {i:4d} {r[m]:12.4g} {r['bound_pipe']:>10s} {r['ub_bytes']:7d} {r['l1_bytes']:7d}  "
                         f"{r['overrides']}")
        front = ", ".join(f"{r[m]:.4g}@{r['ub_bytes']}B" for r in s["pareto_ub"])
        lines.append(f"  Pareto front {m} vs UB bytes: {front}")
    for p in report["plots"]:
        lines.append(f"plot: {p}")
    return "\n".join(lines)


def _plots(out: Path, ok: list[dict], axes: list[str], metric: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    written = []
    varied = [a for a in axes if len({json.dumps(r["overrides"].get(a)) for r in ok}) > 1]
    if "schedule.qk_preload" in varied:
        series_key = "tiling.tile_s1" if "tiling.tile_s1" in varied else None
        fig, ax = plt.subplots(figsize=(8, 5))
        groups: dict[Any, dict[int, list[float]]] = {}
        for r in ok:
            g = groups.setdefault(r["overrides"].get(series_key) if series_key else "all", {})
            g.setdefault(r["overrides"]["schedule.qk_preload"], []).append(r[metric])
        pick = METRICS[metric]
        for name, by_p in sorted(groups.items(), key=lambda kv: str(kv[0])):
            xs = sorted(by_p)
            ax.plot(xs, [pick(by_p[x]) for x in xs], marker="o", label=f"tile_s1 = {name}" if series_key else name)
        ax.set_xlabel("qk_preload")
        ax.set_ylabel(f"{metric} ({pick.__name__} over the other axes)")
        ax.set_title(f"{metric} vs qk_preload")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "plot_preload.png", dpi=100)
        plt.close(fig)
        written.append(str(out / "plot_preload.png"))
    if len(varied) >= 2:
        a, b = varied[0], varied[1]
        xa = sorted({r["overrides"][a] for r in ok})
        xb = sorted({r["overrides"][b] for r in ok})
        grid = np.full((len(xa), len(xb)), np.nan)
        pick = METRICS[metric]
        for r in ok:
            i, j = xa.index(r["overrides"][a]), xb.index(r["overrides"][b])
            grid[i, j] = r[metric] if np.isnan(grid[i, j]) else pick(grid[i, j], r[metric])
        fig, ax = plt.subplots(figsize=(8, 6))
        im = ax.imshow(grid, cmap="viridis_r" if pick is min else "viridis", aspect="auto")
        ax.set_xticks(range(len(xb)), [str(v) for v in xb])
        ax.set_yticks(range(len(xa)), [str(v) for v in xa])
        ax.set_xlabel(b)
        ax.set_ylabel(a)
        for i in range(len(xa)):
            for j in range(len(xb)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=7, color="white")
        fig.colorbar(im, label=f"{metric} ({pick.__name__} over the other axes)")
        ax.set_title(f"{metric}: {a} × {b}")
        fig.tight_layout()
        fig.savefig(out / "heatmap.png", dpi=100)
        plt.close(fig)
        written.append(str(out / "heatmap.png"))
    return written

