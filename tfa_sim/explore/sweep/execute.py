"""``tfa-sim sweep``: run (or resume) a sweep's points on local worker processes or dask.

The points still to run are the sweep's points minus those in
``results.jsonl``, plus the reference point of each shape that no point of
the sweep already is (the kernel defaults for that shape, recorded in
``references.jsonl`` for the report's speed-ups).  They go to the workers
longest first, so the last wave is short.  Each row is written by the parent
as soon as it arrives, so a killed sweep loses only the points in flight,
and a resumed one runs and records each remaining point exactly once.

Test hook: with ``TFA_SIM_SWEEP_TEST_SIGNAL=SIGNAME:N`` in the environment
the parent sends itself that signal right after writing its N-th row of this
run (e.g. ``SIGKILL:3``), so tests can kill a sweep at an exact point.
"""
from __future__ import annotations

import importlib
import os
import signal
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.constraints import failed_constraint
from tfa_sim.explore.sweep.points import cost, indices, point_at, reference_config, reference_point, shape_of
from tfa_sim.explore.sweep.pool import WorkerPool
from tfa_sim.explore.sweep.results import REFERENCES, RESULTS, ResultWriter, claimed, repair_tail, scan, write_csv
from tfa_sim.explore.sweep.schema import filled, show
from tfa_sim.explore.sweep.spec import Sweep, load_sweep
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.extras import require
from tfa_sim.spec.load import parse_config, with_plugins
from tfa_sim.spec.plugins import load_plugins

DASK_CONNECT_TIMEOUT = 5  # seconds to reach a --scheduler before giving up
TEST_SIGNAL_ENV = "TFA_SIM_SWEEP_TEST_SIGNAL"


@dataclass
class Plan:
    """What is left to run: ``(cost, point number)`` of the points, the reference points, and what is done."""

    points: list[tuple[float, int]]
    references: list[dict[str, Any]]
    done: int


def plan(sweep: Sweep, done_points: set[str], done_references: set[str]) -> Plan:
    """The points not in ``done_points`` and the references (of shapes no point covers) not yet run."""
    todo: list[tuple[float, int]] = []
    shapes: dict[tuple, dict[str, Any]] = {}
    covered: set[tuple] = set()
    for i in indices(sweep):
        p = point_at(sweep, i)
        full = filled(p["config"])
        if full is not None:
            shape = shape_of(full)
            shapes.setdefault(shape, full)
            if full == reference_config(full) and failed_constraint(sweep.constraints, full) is None:
                covered.add(shape)
        if p["key"] not in done_points:
            todo.append((cost(full) if full else 0.0, i))
    refs = [reference_point(full) for shape, full in shapes.items() if shape not in covered]
    return Plan(todo, [r for r in refs if r["key"] not in done_references], len(done_points))


def check_constraints(sweep: Sweep) -> None:
    """Evaluate the constraints on every point whose values have the config's types (a point of another type is
    recorded as illegal, its constraints never evaluated): a constraint that cannot be evaluated stops the sweep
    here, with one :class:`InputError` naming it, before any point runs."""
    if not sweep.constraints:
        return
    for i in indices(sweep):
        full = filled(point_at(sweep, i)["config"])
        if full is not None and _typed(full):
            failed_constraint(sweep.constraints, full)


def _typed(full: dict[str, dict[str, Any]]) -> bool:
    """Whether every value of a filled config has the config's type."""
    try:
        parse_config(full)
    except InputError:
        return False
    return True


def default_out(sweep_file: str | Path) -> Path:
    """Where ``tfa-sim sweep FILE`` writes without ``--out``: ``runs/sweep-<file name>``."""
    return Path("runs") / f"sweep-{Path(sweep_file).stem}"


def check_executor(jobs: int, executor: str) -> None:
    """``--jobs`` at least 1 and ``--executor`` local or dask (one line each otherwise)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--jobs {jobs}: give at least 1 worker")
    if executor not in ("local", "dask"):
        raise InputError(f"--executor {executor!r}: use local or dask")
    if executor == "dask":
        require("--executor dask", "dask", "distributed")


def run_sweep(source: str | Path | Mapping[str, Any], out: Path, jobs: int, executor: str = "local",
              scheduler: str | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) into ``out`` the sweep of a file or of its tables given as a mapping
    (:func:`load_sweep`); returns all rows of ``results.jsonl``."""
    check_executor(jobs, executor)
    sweep = load_sweep(source)
    check_constraints(sweep)
    # The plugins every point loads, loaded here first: one that fails is the sweep's error (one line, exit 2,
    # nothing written), not every point's "illegal".
    load_plugins(with_plugins(sweep.base, []), where="[base] kernel.plugins")
    with claimed(out, sweep, "sweep spec" if isinstance(source, Mapping) else str(Path(source))):
        results, references = resumed(out / RESULTS), resumed(out / REFERENCES)
        work = plan(sweep, {r["key"] for r in results}, {r["key"] for r in references})
        bar = progress_bar(len(work.points) + len(work.references) + work.done, work.done, progress)
        try:
            run_points(_tasks(sweep, work), {False: out / RESULTS, True: out / REFERENCES},
                       Executor(jobs, executor, scheduler, sweep.point_timeout), bar)
        finally:
            bar.close()
            rows = scan(out / RESULTS)[0]
            write_csv(rows, out / "results.csv")
    return rows


@dataclass(frozen=True)
class Executor:
    """Where points run: ``jobs`` local worker processes, or dask (a LocalCluster of ``jobs`` processes, or the
    cluster at ``scheduler``); ``timeout`` seconds per point (local), 0 for none; ``window``: at most that many
    points handed out at once (dask; the local workers take one each), so that a caller's task generator
    decides each next point from the rows so far (the tuner); None hands out every point at once."""

    jobs: int = 1
    kind: str = "local"
    scheduler: str | None = None
    timeout: float = 0.0
    window: int | None = None


def run_points(tasks: Iterable[dict[str, Any]], files: Mapping[bool, Path], executor: Executor, bar: Any,
               on_row: Callable[[dict[str, Any], dict[str, Any]], None] | None = None) -> None:
    """Run ``tasks`` (:func:`~tfa_sim.explore.sweep.runpoint.run_task`'s) on ``executor`` and append each row,
    the moment it arrives, as one line to ``files[task["reference"]]`` (results files: a resume reads them
    back with :func:`resumed`, so the caller leaves out the points already there); then ``on_row(task, row)``
    and one step of ``bar``.  The tasks are drawn as workers free up.  The :data:`TEST_SIGNAL_ENV` hook counts
    the rows written here."""
    hook = _test_hook()
    opened = {path: ResultWriter(path) for path in set(files.values())}
    runner = _run_dask(tasks, executor) if executor.kind == "dask" else _run_local(tasks, executor)
    try:
        for n, (task, row) in enumerate(runner, 1):
            opened[files[task["reference"]]].write(row)
            if on_row is not None:
                on_row(task, row)
            bar.update(1)
            hook(n)
    finally:
        runner.close()  # on Ctrl-C or an error: stop the workers now, not when the generator is collected
        for w in opened.values():
            w.close()


def resumed(path: Path) -> list[dict[str, Any]]:
    """The rows already in a results file, after dropping a last line cut short by a kill (under the lock)."""
    rows, size = scan(path)
    repair_tail(path, size)
    return rows


def _tasks(sweep: Sweep, work: Plan) -> Iterator[dict[str, Any]]:
    """What the workers run, longest first; point configs are built one at a time as workers free up."""
    queue = [(c, False, i) for c, i in work.points] + [(cost(r["config"]), True, r) for r in work.references]
    queue.sort(key=lambda t: -t[0])
    for _cost, reference, what in queue:
        yield _task(sweep, what if isinstance(what, dict) else point_at(sweep, what), reference)


def _task(sweep: Sweep, point: dict[str, Any], reference: bool) -> dict[str, Any]:
    return {"point": point, "constraints": () if reference else sweep.constraints, "metric": sweep.metric,
            "fold": sweep.fold, "reference": reference}


def progress_bar(total: int | None, done: int, enabled: bool, desc: str = "sweep") -> Any:
    """A tqdm bar (done/total, rate, ETA; without a total: done and rate)."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: replacement workers are forked later
    return tqdm(total=total, initial=done, unit="pt", desc=desc, disable=not enabled, smoothing=0.1)


def _run_local(tasks: Iterable[dict[str, Any]], executor: Executor) -> Generator[tuple[dict, dict]]:
    """Rows from ``jobs`` worker processes (forked after the simulator is imported)."""
    runpoint = importlib.import_module("tfa_sim.explore.sweep.runpoint")
    with WorkerPool(runpoint.run_task, executor.jobs, executor.timeout) as pool:
        for task, (kind, value) in pool.imap_unordered(tasks):
            yield task, value if kind == "done" else _lost(task["point"], kind, value)


def _lost(point: dict[str, Any], kind: str, value: Any) -> dict[str, Any]:
    """The row of a point whose worker timed out or died."""
    message = (f"took longer than [sweep] point_timeout = {value:g} s and was stopped" if kind == "timeout"
               else f"its worker process died (exit code {value}) while simulating it")
    return {"key": point["key"], "overrides": point["overrides"], "config": point["config"],
            "status": "timeout" if kind == "timeout" else "error", "message": message}


def _run_dask(tasks: Iterable[dict[str, Any]], executor: Executor) -> Generator[tuple[dict, dict]]:
    """Rows from a dask.distributed LocalCluster of ``jobs`` processes, or the cluster at ``scheduler``; at most
    ``executor.window`` points submitted at a time (None: all at once)."""
    from dask.distributed import Client, LocalCluster, as_completed

    from tfa_sim.explore.sweep.runpoint import run_task

    cluster = None if executor.scheduler else LocalCluster(n_workers=executor.jobs, threads_per_worker=1,
                                                           processes=True, dashboard_address=None)
    client = _connect(executor.scheduler) if executor.scheduler else Client(cluster)
    todo, futures, running = iter(tasks), {}, as_completed()

    def submit() -> bool:
        task = next(todo, None)
        if task is not None:
            futures[fut := client.submit(run_task, task, pure=False)] = task
            running.add(fut)
        return task is not None

    try:
        while (executor.window is None or len(futures) < executor.window) and submit():
            pass
        for fut in running:
            yield futures.pop(fut), fut.result()
            submit()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _connect(scheduler: str) -> Any:
    from dask.distributed import Client

    try:
        return Client(scheduler, timeout=DASK_CONNECT_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 — OSError, TimeoutError, ValueError for a malformed address, …
        raise InputError(f"--scheduler {show(scheduler)}: no dask scheduler reachable within "
                         f"{DASK_CONNECT_TIMEOUT} s ({type(exc).__name__}: {show(str(exc), 80)}); start one "
                         f"(dask scheduler) or leave out --scheduler to use a LocalCluster") from None


def _test_hook() -> Callable[[int], None]:
    """The :data:`TEST_SIGNAL_ENV` hook (see the module docstring); a no-op when it is unset."""
    spec = os.environ.get(TEST_SIGNAL_ENV, "")
    if not spec:
        return lambda n: None
    name, _, count = spec.partition(":")
    if not (count.isdigit() and name in signal.Signals.__members__):
        raise InputError(f"{TEST_SIGNAL_ENV}={show(spec)}: expected SIGNAME:N, e.g. SIGKILL:3")
    sig, after = getattr(signal, name), int(count)
    return lambda n: os.kill(os.getpid(), sig) if n == after else None
