"""One sweep point in a worker: config → legality → constraints → simulation → a results row.

Importing this module loads the whole simulator, legality included; the local
executor imports it in the parent before forking its workers so that they start warm.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np

from tfa_sim.backends import get_backend
from tfa_sim.buffers.capacity import buffer_use
from tfa_sim.engine.report import timing_summary
from tfa_sim.explore.sweep.constraints import failed_constraint
from tfa_sim.numerics.blas import blas_threads
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.sim.prediction import prediction
from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError, ScheduleError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.stages.block_kernel import Numerics
from tfa_sim.stages.plan import kernel_plan


def run_point(point: dict[str, Any], constraints: tuple[str, ...] = (), metric: str = "time_us",
              fold: bool = False) -> dict[str, Any]:
    """Simulate one point: the row that goes into results.jsonl (status ok, illegal, excluded or
    schedule_error); ``fold``: a timing-only point is estimated from short samples (tfa_sim.sim.fold)."""
    row: dict[str, Any] = {"key": point["key"], "overrides": point["overrides"]}
    try:
        config = build_config(point["config"])
    except InputError as exc:
        return {**row, "status": "illegal", "message": str(exc), "config": point["config"]}
    row["config"] = config.to_dict()
    excluded = failed_constraint(constraints, row["config"])
    if excluded:
        return {**row, "status": "excluded", "message": excluded}
    use = buffer_use(config, load_hardware(config.hardware).ub_align)
    row.update(l1_bytes=use.l1_bytes, ub_bytes=use.ub_bytes)
    try:
        plan = kernel_plan(config)
        numerics = _numerics(config) if config.numerics.enabled else None
        with blas_threads(config.numerics.blas_threads) if numerics is not None else nullcontext():
            sim = simulate(plan, numerics, log_events=False, fold=fold and numerics is None)
        t = timing_summary(sim, config)
    except ScheduleError as exc:
        return {**row, "status": "schedule_error", "message": str(exc)}
    except InputError as exc:
        return {**row, "status": "illegal", "message": str(exc)}
    p = prediction(plan, sim.total_cycles)
    row.update(status="ok", total_cycles=t["total_cycles"], time_us=t["time_us"], tflops=t["tflops"],
               normalized_tflops=t["normalized_tflops"], bound_pipe=t["bound_pipe"], cores_used=t["cores_used"],
               launch_period_us=p["launch_period_us"], time_interval_us=p["time_interval_us"],
               launch_period_interval_us=p["launch_period_interval_us"], host_sync_us=p["host_sync_us"],
               host_sync_interval_us=p["host_sync_interval_us"], pipe_busy_mean=t["pipe_busy_mean"],
               stalls=t["stalls"])
    row["metric"] = row[metric]
    return row


def _numerics(config: Config) -> Numerics:
    c = config.case
    n = config.numerics
    return Numerics(get_backend(n.backend, n.exp_model, n.reference), generate_inputs(config),
                    np.zeros((c.batch, c.heads, c.s0, c.head), np.float32))


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_point` on ``{point, constraints, metric}``; any other failure of the simulator becomes
    an ``error`` row naming it, so one bad point cannot stop the sweep."""
    try:
        return run_point(task["point"], task["constraints"], task["metric"], task.get("fold", False))
    except Exception as exc:  # noqa: BLE001 — recorded in the row, the sweep goes on
        point = task["point"]
        return {"key": point["key"], "overrides": point["overrides"], "config": point["config"],
                "status": "error", "message": f"{type(exc).__name__}: {str(exc)[:300]}"}
