"""Running a sweep's points: local process pool or dask, resume, results.jsonl/csv.

Every point is identified by a hash of its full config.  Results are appended
to ``results.jsonl`` one complete line per finished point, so a killed sweep
loses only the points in flight and rerunning the same command skips the
finished ones; ``results.csv`` is the same table regenerated from it.
"""
from __future__ import annotations

import csv
import itertools
import json
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Iterator

from tfa_sim.config import build_config
from tfa_sim.errors import InputError, ScheduleError
from tfa_sim.sweep.spec import Sweep, _eval, _parse_constraint, load_sweep, points


def run_point(point: dict[str, Any], constraints: tuple[str, ...] = (), metric: str = "time_us") -> dict[str, Any]:
    """Simulate one point (in a worker): the row that goes into results.jsonl."""
    from tfa_sim.buffers.capacity import buffer_use
    from tfa_sim.simulation import simulate
    from tfa_sim.engine.report import timing_summary
    from tfa_sim.hardware import load_hardware

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
    from tfa_sim.stages.block_kernel import Numerics
    from tfa_sim.inputs import generate_inputs

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


