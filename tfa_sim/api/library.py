"""tfa-sim as a library: the functions ``tfa_sim`` exports, which the ``tfa-sim`` command calls too.

Each takes what its command takes, as Python values, and raises :class:`~tfa_sim.spec.errors.TfaSimError`
(:class:`InputError` for bad input, :class:`~tfa_sim.spec.errors.ScheduleError` when the schedule cannot run)
with the one line the command prints.  Nothing is written unless asked for: ``run`` writes a run directory
only with ``out``, ``sweep`` and ``tune`` keep their directories only with ``out``, ``profile`` writes its
directory only with ``out``; ``check`` writes ``check.json`` into the run directory it checks, as the command does.
"""
from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfa_sim.spec import load
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.extras import require
from tfa_sim.spec.safety import check_path, is_name, plain, show

if TYPE_CHECKING:
    import pandas as pd

    from tfa_sim.api.result import ProfileResult, Result


def load_config(path: str | Path | None = None, *, case: str | None = None,
                overrides: Mapping[str, Any] | None = None, hw: str | Path | None = None,
                plugins: Sequence[str] = ()) -> Config:
    """A legal config: the file ``path`` (TOML or YAML), the shipped ``case``, or the built-in case; then
    ``overrides`` such as ``{"case.s1": 8192}`` (the keys and checks of ``--set``) and ``hw``, a preset's name
    or a preset file (as ``--hw``); ``plugins`` (as ``--plugin``) are added to its ``kernel.plugins``
    (docs/guide/extending.md)."""
    return load.load_config(path, case, (), settings(overrides, hw), [str(p) for p in plugins])


def settings(overrides: Mapping[str, Any] | None, hw: str | Path | None = None) -> list[tuple[str, str, Any]]:
    """``{"section.key": value}`` and ``hw`` as (section, key, value) settings, in order."""
    out = []
    for dotted, value in (overrides or {}).items():
        if not isinstance(dotted, str) or "." not in dotted:
            raise InputError(f"override {show(dotted)}: expected section.key, e.g. {{\"schedule.qk_preload\": 2}}")
        section, key = dotted.strip().split(".", 1)
        out.append((section, key, value))
    if hw is not None:
        out.append(hw_setting(str(hw)))
    return out


def hw_setting(text: str) -> tuple[str, str, str]:
    """``--hw``: a shipped preset's name, or the path of a preset file."""
    from tfa_sim.spec.hardware import preset_names

    if text in preset_names():
        return "hardware", "preset", text
    if os.path.lexists(text):
        return "hardware", "file", text  # spec/hardware.py reads regular files only
    if is_name(text) and not text.endswith(".toml"):
        return "hardware", "preset", text  # an unknown preset: spec/hardware.py lists the known ones
    raise InputError(f"--hw {plain(text)} is neither a preset ({', '.join(preset_names())}) nor an existing preset "
                     f"file")


def chosen(config: Config | str | Path | None, case: str | None, overrides: Mapping[str, Any] | None,
           hw: str | Path | None, plugins: Sequence[str] = ()) -> Config:
    """The config a function of the API is given: a :class:`Config` (with ``overrides``, ``hw`` and ``plugins``
    set on it), or a file, a shipped ``case`` or the built-in one as :func:`load_config` takes them."""
    if isinstance(config, Config):
        if case is not None:
            raise InputError("give either a Config or case=NAME, not both")
        extra = settings(overrides, hw)
        if plugins:
            extra.append(("kernel", "plugins", [*load.with_plugins(config.to_dict(), extra), *map(str, plugins)]))
        return load.configure(config.to_dict(), extra) if extra else config
    return load_config(config, case=case, overrides=overrides, hw=hw, plugins=plugins)


def run(config: Config | str | Path | None = None, *, case: str | None = None,
        overrides: Mapping[str, Any] | None = None, hw: str | Path | None = None, backend: str | None = None,
        numerics: bool = True, event_log: bool = True, inputs: str | Path | None = None,
        out: str | Path | bool | None = None, fold: bool = False, events_csv: bool = False,
        trace_window: tuple[int, int] | None = None, plugins: Sequence[str] = ()) -> Result:
    """Simulate one config (``tfa-sim run``): a :class:`Config`, a config file, the shipped ``case`` or the
    built-in one, with ``overrides``, ``hw`` and ``plugins`` as :func:`load_config` takes them.

    ``backend`` numpy or native; ``numerics=False`` times the run without arithmetic; ``event_log=False``
    keeps no log; ``inputs`` a directory of q/k/v ``.npy`` or ``.bin``.  ``out``: the run directory to write
    (True: a new ``runs/<case>-<time>``); without it nothing is written.  ``fold``, ``events_csv`` and
    ``trace_window`` are the command's ``--fold``, ``--events-csv`` and ``--trace-window``."""
    from tfa_sim.api import runner
    from tfa_sim.api.result import Result

    extra = dict(overrides or {})
    if backend is not None:
        extra["numerics.backend"] = backend
    if not numerics:
        extra["numerics.enabled"] = False
    config = chosen(config, case, extra, hw, plugins)
    source = None if inputs is None else str(inputs)
    if out is None or out is False:
        return Result(runner.compute(config, source, event_log, fold))
    directory = None if out is True else str(out)
    return Result(runner.run(config, source, directory, event_log, fold, events_csv, trace_window))


def tolerance(value: float | None, option: str, zero_ok: bool = True) -> float | None:
    """A tolerance option: finite and ≥ 0 (> 0 unless ``zero_ok``)."""
    if value is not None and (not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok)):
        raise InputError(f"{option} {value!r}: give a finite number {'≥' if zero_ok else '>'} 0")
    return value


def check(run_dir: str | Path, *, golden: str | Path | None = None, eps: float = 1e-3, atol: float | None = None,
          rtol: float | None = None, stages: Iterable[str] | None = None, mem_limit_gib: float | None = None,
          kernel_dumps: str | Path | None = None, exact: bool = False) -> dict[str, Any]:
    """``tfa-sim check``: a run's intermediate dumps (``run(..., overrides={"numerics.intermediate_check":
    True}, out=DIR)``) against the model, or against ``golden``, a directory of the reference generator's
    ``.bin`` files; ``stages`` narrows it (``["compute_p"]``, ``["qk", "pv"]``).  ``kernel_dumps``: instead, the
    directory the kernel's ``main.cpp --intermediate`` wrote (CPU_SIM or a board), tensor by tensor; with
    ``exact`` only bit-equal tensors pass (tfa_sim.views.kernel_dumps).  Returns the report, also written to
    ``RUN_DIR/check.json``; ``report["passed"]`` is the verdict."""
    from tfa_sim.views.check import check_run

    tolerance(eps, "--eps", zero_ok=False)
    atol, rtol = tolerance(atol, "--atol"), tolerance(rtol, "--rtol")
    mem = tolerance(mem_limit_gib, "--mem-limit-gib")
    path = check_path(run_dir, "RUN_DIR")
    reference = check_path(golden, "--golden") if golden is not None else None
    if kernel_dumps is not None:
        from tfa_sim.views.kernel_dumps import check_kernel_dumps

        if golden is not None or stages:
            raise InputError("--kernel-dumps compares every tensor the kernel writes: drop --golden and --stage")
        return check_kernel_dumps(path, check_path(kernel_dumps, "--kernel-dumps"), exact, mem or 0.0)
    if exact:
        raise InputError("--exact applies to --kernel-dumps DIR (against the model every dump must be bit-equal "
                         "already)")
    return check_run(path, reference, eps, atol, rtol, list(stages or []), mem or 0.0)


def sweep(spec: str | Path | Mapping[str, Any], *, jobs: int = 1, out: str | Path | None = None,
          executor: str = "local", scheduler: str | None = None, progress: bool = False,
          plugins: Sequence[str] = ()) -> pd.DataFrame:
    """``tfa-sim sweep``: run (or, into an ``out`` that holds part of it, resume) a sweep of ``spec``, a sweep
    TOML file or its tables as a mapping (``{"base": …, "axes": {"schedule.qk_preload": [2, 4]}, "sweep":
    …}``), on ``jobs`` worker processes.  One row per point, in the sweep's order: its axis values, then the
    columns of ``results.csv`` (status, time_us, total_cycles, tflops, …; None where a point has none).
    Without ``out`` the sweep runs in a temporary directory that is removed afterwards.  The DataFrame needs
    pandas (the ``pandas`` extra); the command, which prints no table, does not."""
    require("tfa_sim.sweep() (its DataFrame)", "pandas")
    import pandas as pd

    header, body = sweep_table(spec, jobs=jobs, out=out, executor=executor, scheduler=scheduler, progress=progress,
                               plugins=plugins)
    return pd.DataFrame(body, columns=header)


def sweep_table(spec: str | Path | Mapping[str, Any], *, jobs: int = 1, out: str | Path | None = None,
                executor: str = "local", scheduler: str | None = None, progress: bool = False,
                plugins: Sequence[str] = ()) -> tuple[list[str], list[list[Any]]]:
    """:func:`sweep`'s rows without pandas: the column names and a list per point, in the sweep's order;
    ``plugins`` (``--plugin``) are added to the base's ``kernel.plugins``."""
    from tfa_sim.explore.sweep import indices, load_sweep, point_at, results_table, run_sweep

    if plugins:
        spec = with_base_plugins(spec, plugins)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="tfa-sim-sweep-") as tmp:
            return sweep_table(spec, jobs=jobs, out=tmp, executor=executor, scheduler=scheduler, progress=progress)
    rows = run_sweep(spec, Path(out), jobs, executor, scheduler, progress)
    definition = load_sweep(spec)
    order = {point_at(definition, i)["key"]: n for n, i in enumerate(indices(definition))}
    return results_table(sorted(rows, key=lambda r: order.get(r["key"], len(order))), missing=None)


def with_base_plugins(spec: str | Path | Mapping[str, Any], plugins: Sequence[str]) -> dict[str, Any]:
    """A sweep's tables with ``plugins`` added to its ``[base]``'s ``kernel.plugins``."""
    from tfa_sim.explore.sweep.spec import read_tables

    tables = dict(spec) if isinstance(spec, Mapping) else read_tables(Path(spec))
    base = tables.get("base", {})
    if not isinstance(base, dict) or not isinstance(base.get("kernel", {}), dict):
        return tables  # load_sweep refuses it in one line
    kernel = dict(base.get("kernel", {}))
    kernel["plugins"] = [*load.with_plugins(base, []), *map(str, plugins)]
    return {**tables, "base": {**base, "kernel": kernel}}


#: The columns of :attr:`TuneResult.candidates` after the axes.
CANDIDATE_COLUMNS = ["stage", "status", "estimate", "time_us", "launch_period_us", "bound_pipe", "message"]


@dataclass
class TuneResult:
    """What ``tune`` answers: the ``best`` config (timing only, as tuned) and its ``time_us``, the ``metric``
    value it was chosen by, ``summary`` (tune.json's content), ``report`` (the text the command prints),
    ``out_dir`` (None when the tune ran in a temporary directory) and :attr:`candidates`."""

    best: Config
    time_us: float
    metric: float
    summary: dict[str, Any]
    report: str
    out_dir: Path | None

    @property
    def candidates(self) -> pd.DataFrame:
        """Every candidate, a row each, as a pandas DataFrame: the axis values, stage, status, estimate, simulated
        figures, message.  Built when first asked for, so that a tune (and ``tfa-sim tune``) needs no pandas."""
        require("TuneResult.candidates", "pandas")
        import pandas as pd

        axes = list(self.summary["axes"])
        return pd.DataFrame([[c["overrides"].get(a) for a in axes] + [c.get(k) for k in CANDIDATE_COLUMNS]
                             for c in self.summary["candidates"]], columns=axes + CANDIDATE_COLUMNS)

    def __repr__(self) -> str:
        return f"TuneResult(time_us={self.time_us}, best={self.summary['best']['changes']}, out_dir={self.out_dir})"


def tune(config: Config | str | Path | None = None, *, case: str | None = None,
         overrides: Mapping[str, Any] | None = None, hw: str | Path | None = None,
         space: str | Path | Mapping[str, Any] | None = None, budget_s: float | None = None, jobs: int = 1,
         executor: str = "local", scheduler: str | None = None, out: str | Path | bool | None = None, top: int = 5,
         progress: bool = False, echo: Callable[[str], Any] | None = None, plugins: Sequence[str] = ()) -> TuneResult:
    """``tfa-sim tune``: the best legal schedule for a case (docs/guide/tuning.md).  The case is ``config`` (a
    :class:`Config` or a file), or ``case``, with ``overrides`` and ``hw`` as :func:`load_config` takes them;
    ``space`` a sweep file or its tables as a mapping (None: the default space); ``budget_s`` the wall seconds
    for the whole tune; ``jobs``, ``executor`` and ``scheduler`` run the simulations as ``sweep`` does.
    ``out`` keeps the tune directory (rerunning into it resumes; True: a new ``runs/tune-<case>-<time>``);
    without it the tune runs in a temporary directory that is removed afterwards.  ``echo`` receives the
    progress lines the command prints on stderr."""
    from tfa_sim.explore.tune import tune as run_tune
    from tfa_sim.explore.tune.report import format_report

    case_config = chosen(config, case, overrides, hw, plugins)
    if out is None or out is False:
        with tempfile.TemporaryDirectory(prefix="tfa-sim-tune-") as tmp:
            result = tune(case_config, space=space, budget_s=budget_s, jobs=jobs, executor=executor,
                          scheduler=scheduler, out=tmp, top=top, progress=progress, echo=echo)
            result.out_dir = None
            return result
    summary, directory = run_tune(case_config, space, budget_s=budget_s, jobs=jobs, executor=executor,
                                  scheduler=scheduler, out=None if out is True else out, top=top, progress=progress,
                                  echo=echo)
    best = summary["best"]
    return TuneResult(load.build_config(best["config"]), best["time_us"], best["metric"], summary,
                      format_report(summary), Path(directory))


def listing(stage: str, config: Config | str | Path | None = None, *, case: str | None = None,
            overrides: Mapping[str, Any] | None = None, hw: str | Path | None = None,
            when: Mapping[str, Any] | None = None, plugins: Sequence[str] = ()) -> dict[str, Any]:
    """``tfa-sim listing``: the listing the config runs for ``stage`` (``listings.STAGE``), each line with its
    cycles on the config's tile shapes and its share of the call (:func:`tfa_sim.views.listing.listing_table`);
    ``when`` picks the call (``{"first": True, "mask": "partial"}``; default: the stage's steady call).  A listing
    the rules refuse raises as a run would (exit 3 for a race)."""
    from tfa_sim.stages.plan import kernel_plan
    from tfa_sim.views.listing import listing_table

    return listing_table(kernel_plan(chosen(config, case, overrides, hw, plugins)), stage, when)


def roofline(run_dirs: str | Path | Iterable[str | Path], *, out: str | Path | None = None) -> dict[str, Any]:
    """``tfa-sim roofline``: each run's ``roofline`` table (summary.json, docs/guide/roofline.md) by run name, and
    with ``out`` (.svg, .png with the ``plots`` extra, .html with ``html``) the chart of the runs and their stages
    under the chip's limits.  A directory that is not a run, or a run whose summary has no roofline table, raises
    :class:`InputError` before anything is written."""
    from tfa_sim.rundir.directory import atomic_write_via
    from tfa_sim.views.roofline_chart import chart, load_run, render
    from tfa_sim.views.timeline import check_output

    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs)
    if not dirs:
        raise InputError("roofline needs a run directory (tfa-sim run --out DIR)")
    target = check_path(out, "-o") if out is not None else None
    if target is not None:
        check_output(target)
    runs = [load_run(d) for d in dirs]
    if target is not None:
        atomic_write_via(target, lambda tmp: render(chart(runs), tmp))
    return dict(runs)


def profile(path: str | Path, config: Config | str | Path | None = None, *, case: str | None = None,
            overrides: Mapping[str, Any] | None = None, hw: str | Path | None = None, op: str | None = None,
            launch: int | None = None, out: str | Path | bool | None = None,
            plugins: Sequence[str] = ()) -> ProfileResult:
    """``tfa-sim profile``: a board's profile of the kernel beside the model's run of the config
    (docs/profiles.md).  ``path``: the directory ``msprof op`` wrote, the ``PROF_…`` directory of ``msprof
    --application`` or its op summary CSV, a torch_npu ``…_ascend_pt`` directory or its kernel_details.csv, a
    ``msprof_*.db`` or ``ascend_pytorch_profiler_*.db``; ``op``: the operator's name where the profile holds several;
    ``launch``: compare that launch of it alone (0-based, in start-time order; default: the mean of all).  The config
    is ``config`` (a :class:`Config` or a file), or ``case``, with ``overrides`` and ``hw`` as :func:`load_config`
    takes them; it runs timing only.  ``out``: the directory to write (True: a new ``runs/profile-<case>-<time>``);
    without it nothing is written.  Every check runs before anything is written."""
    from tfa_sim.api import runner
    from tfa_sim.api.result import ProfileResult
    from tfa_sim.rundir.msprof import read_profile
    from tfa_sim.spec.workload import instruction_groups
    from tfa_sim.stages.plan import kernel_plan
    from tfa_sim.views.analysis import bubbles
    from tfa_sim.views.profile import check_charts, check_clock, check_launch, compare
    from tfa_sim.views.roofline_board import LOGGED_UP_TO

    if out is not None and out is not False:
        check_charts()

    board = read_profile(check_path(path, "profile"), op, launch=launch)
    timing_only = {**(overrides or {}), "numerics.enabled": False, "numerics.intermediate_check": False}
    run_config = chosen(config, case, timing_only, hw, plugins)
    plan = kernel_plan(run_config)
    check_clock(board, plan.hw)
    check_launch(board, run_config.name, plan.geometry.main.grid, 1 if plan.geometry.combine is None else 2)
    logged = instruction_groups(run_config) <= LOGGED_UP_TO  # the roofline's work per pipe needs the event log
    done = runner.compute(run_config, None, event_log=logged)  # only once the profile is the config's launch
    stalls = bubbles(done.sim.stats.pipes, done.sim.total_cycles, top=len(done.sim.stats.pipes) * 64)
    result = ProfileResult(compare(board, done.summary, stalls, done.plan.geometry.main))
    if out is not None and out is not False:
        result.save(None if out is True else out)
    return result
