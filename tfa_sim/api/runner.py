"""``tfa-sim run``: config → inputs → kernel → golden comparison → run directory."""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import platform
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.api import __version__
from tfa_sim.backends import get_backend
from tfa_sim.engine.chip import SimResult
from tfa_sim.engine.report import format_timing, timing_summary
from tfa_sim.listings.library import MATH_STAGES
from tfa_sim.numerics.blas import blas_threads
from tfa_sim.numerics.compare import compare, rule_eps
from tfa_sim.numerics.inputs import Inputs, generate_inputs, load_inputs
from tfa_sim.numerics.shared_goldens import SharedGoldens
from tfa_sim.rundir.directory import EVENTS_CSV_MAX, TIMELINE_MAX_EVENTS, TRACE_MAX_EVENTS, TRACE_WINDOW, RunDir
from tfa_sim.rundir.dumps import DumpRecorder, check_size, write_dumps
from tfa_sim.rundir.events import EventLog
from tfa_sim.rundir.memory import check_run_memory
from tfa_sim.rundir.outputs import EVENTS_CSV, EVENTS_NPZ, new_run_dir, write_events, write_json, write_log, write_npy
from tfa_sim.sim.parallel import Forked, can_fork
from tfa_sim.sim.prediction import format_prediction, prediction
from tfa_sim.sim.simulation import launches, simulate
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.units import buffer_owner, parse_unit
from tfa_sim.stages.block_kernel import Numerics
from tfa_sim.stages.plan import KernelPlan, kernel_plan
from tfa_sim.views.roofline import format_nearest, roofline
from tfa_sim.views.trace import collect_counters, write_trace


def versions() -> dict[str, str]:
    """Python's and the packages' versions, as the modules state them (looking them up in importlib.metadata
    took 9 ms a run; tfa-sim's own version is the one pyproject.toml takes from ``tfa_sim.api.__version__``)."""
    import cffi
    import simpy

    return {"python": platform.python_version(), "tfa-sim": __version__, "numpy": np.__version__,
            "simpy": simpy.__version__, "cffi": cffi.__version__}


#: Event logs longer than this have their trace.json written by a forked child (forking a large heap costs ms).
TRACE_FORK_EVENTS = 50_000
OUTPUT_FILES = ("summary.json", "o.npy", EVENTS_NPZ, EVENTS_CSV, "trace.json", "timeline.svg", "check.json")
#: Everything a run writes into its directory (``dumps/`` a directory); a reused --out loses tfa-sim's old
#: copies of these (they would describe another run) and nothing else.
RUN_FILES = (*OUTPUT_FILES, "dumps/")


def passed(summary: dict[str, Any]) -> bool:
    """True unless numerics ran and the output failed the comparison rule."""
    golden = summary.get("golden")
    return golden is None or golden["passed"]


def get_inputs(config: Config, inputs_dir: str | None) -> tuple[Inputs, str]:
    if inputs_dir:
        return load_inputs(inputs_dir, config), os.path.abspath(inputs_dir)  # absolute: check may run elsewhere
    return generate_inputs(config), f"generated (reference generator, seed {config.numerics.seed})"


@dataclass
class Computed:
    """A finished simulation, not yet written: the run's results in memory.  ``golden``, while set, computes
    the golden comparison (the goldens may still be running in a forked child); :meth:`finish` puts it into
    the summary."""

    config: Config
    plan: KernelPlan  # what the run resolved the config into (its chip, choices, geometry)
    sim: SimResult
    numerics: Numerics | None
    summary: dict[str, Any]
    golden: Callable[[], dict[str, Any]] | None = None
    out_dir: Path | None = None  # the run directory once written (:func:`write`)

    def finish(self) -> Computed:
        """Wait for the golden comparison and add it to the summary; returns self."""
        if self.golden is not None:
            self.summary["golden"], self.golden = self.golden(), None
        return self


def prepare_numerics(config: Config, inputs_dir: str | None, summary: dict[str, Any]) -> Numerics | None:
    """Inputs, backend and (with the intermediate check) the dump recorder; None for timing only."""
    if not config.numerics.enabled:
        if inputs_dir or config.numerics.intermediate_check:
            raise InputError("--inputs and --intermediate-check need numerics: drop --no-numerics "
                             "(numerics.enabled=false)")
        return None
    recorder = None
    if config.numerics.intermediate_check:
        size = check_size(config)
        print(f"tfa-sim run: intermediate dumps will take {size / 2 ** 20:.1f} MiB", flush=True)
        recorder = DumpRecorder(config)
    inputs, source = get_inputs(config, inputs_dir)
    backend = get_backend(config.numerics.backend, config.numerics.exp_model, config.numerics.reference)
    c = config.case
    summary.update(backend=backend.name, exp_model=config.numerics.exp_model, reference=config.numerics.reference,
                   inputs=source, input_hashes=inputs.hashes)
    return Numerics(backend, inputs, np.zeros((c.batch, c.heads, c.s0, c.head), np.float32), recorder)


def compute(config: Config, inputs_dir: str | None = None, event_log: bool = True, fold: bool = False) -> Computed:
    """Simulate one config and check its output against the goldens; nothing is written.  ``fold``: estimate
    a timing-only run from short samples (:mod:`tfa_sim.sim.fold`; no event log)."""
    with started(config, inputs_dir, event_log, fold) as done:
        return done.finish()


@contextlib.contextmanager
def started(config: Config, inputs_dir: str | None = None, event_log: bool = True,
            fold: bool = False) -> Iterator[Computed]:
    """:func:`compute` up to the golden comparison, left pending (``Computed.golden``), so that a run writes its
    event files while the goldens finish.  They need only the inputs: with a CPU to spare a forked child
    computes them from before the simulation on (a process, not a thread: the simulation and the writers
    hold the GIL most of the time), and the run computes what is left when it asks for them
    (:mod:`tfa_sim.numerics.shared_goldens`); the child is stopped on leaving, whether or not anyone asked."""
    check_run_memory(config, event_log and not fold)
    hw = load_hardware(config.hardware)
    summary: dict[str, Any] = {"case": config.name, "hardware": hw.name}
    numerics = prepare_numerics(config, inputs_dir, summary)
    shared = None
    try:
        with blas_threads(config.numerics.blas_threads) if numerics is not None else nullcontext():
            plan = kernel_plan(config, hw)  # refuses bad blocks (a mask hiding a row) before the goldens
            kernels = launches(plan, numerics)
            forked = numerics is not None and can_fork()
            shared = SharedGoldens(numerics.inputs, config, forked) if numerics is not None else None
            sim = simulate(plan, numerics, log_events=event_log and not fold, fold=fold, kernels=kernels,
                           goldens_forked=forked)
        summary.update(timing_summary(sim, config))
        summary.update(prediction(plan, sim.total_cycles))
        summary["overhead"] = dataclasses.asdict(hw.overhead)
        summary["bottleneck"] = bottleneck(sim, hw)
        summary["roofline"] = roofline(summary, hw, sim.stats.events)
        summary["listings"] = listing_summary(plan)
        summary.update(config=config.to_dict(), versions=versions())
        yield Computed(config, plan, sim, numerics, summary,
                       partial(_compare, numerics, config, shared) if numerics and shared else None)
    finally:
        if shared is not None:
            shared.close()


def _compare(numerics: Numerics, config: Config, shared: SharedGoldens) -> dict[str, Any]:
    """The golden comparison, once the goldens are done."""
    return goldens(numerics, shared.result(), config)


def goldens(numerics: Numerics, references: tuple[np.ndarray, np.ndarray], config: Config) -> dict[str, Any]:
    """The run's output against the float64 reference (the verdict) and the kernel-ordered golden's output
    (``references``, from :meth:`SharedGoldens.result`)."""
    fp64, kernel_o = references
    eps = rule_eps(config.case.dtype)
    vs_fp64 = compare(numerics.out, fp64, eps)
    vs_kernel = compare(numerics.out, kernel_o, eps)
    return {"passed": vs_fp64.passed, "eps": eps, "rule": f"docs/kernel.md \"Comparison rule\", eps {eps:g}",
            "vs_reference_fp64": vs_fp64.to_dict(), "vs_kernel_golden": vs_kernel.to_dict()}


def claim(out_dir: str | Path | None, case_name: str) -> RunDir:
    """The run directory to write (``--out``, or a new ``runs/<case>-<time>``), to be entered with ``with``."""
    if out_dir:
        return RunDir(out_dir, "--out", "run")
    return RunDir(new_run_dir(case_name), "--out", "run", fresh=True)


def _is_run_file(rel: str) -> bool:
    return rel in OUTPUT_FILES or rel.startswith("dumps/")


def trace_metadata(summary: dict[str, Any]) -> dict[str, Any]:
    """What trace.json's ``otherData`` says about the run."""
    return {k: summary[k] for k in ("case", "hardware", "config", "total_cycles", "time_us")}


def write_event_files(rd: RunDir, log: EventLog, pools: list[Any], summary: dict[str, Any], events_csv: bool,
                      trace_window: tuple[int, int] | None) -> dict[str, Any]:
    """events.npz (with the pools' occupancy counters), events.csv (small runs, or ``events_csv``) and trace.json
    (a window of cores for large runs, or ``trace_window``); returns what was written, for summary.json.  A large
    run's trace.json, the longest of them to format, is written by a forked child meanwhile
    (:func:`trace_in_child`)."""
    n = len(log)
    window = trace_window or (TRACE_WINDOW if n > TRACE_MAX_EVENTS else None)
    trace, metadata = rd.file("trace.json"), trace_metadata(summary)
    writer = (Forked(trace_in_child, trace, log, pools, window, summary["clock_mhz"], metadata)
              if n > TRACE_FORK_EVENTS and can_fork() else None)
    try:
        log.set_counters(collect_counters(pools))
        write_log(rd.file(EVENTS_NPZ), log)
        csv = events_csv or n <= EVENTS_CSV_MAX
        if csv:
            write_events(rd.file(EVENTS_CSV), log)
        if writer is None or writer.result() is not True:  # no child, or it failed: here, raising its error
            write_trace(trace, log, summary["clock_mhz"], metadata, _window_rows(log, window))
    finally:
        if writer is not None:
            writer.close()
    return {"events": n, "file": EVENTS_NPZ, "csv": csv, "trace_cores": list(window) if window else None}


def _window_rows(log: EventLog, window: tuple[int, int] | None) -> np.ndarray | None:
    return log.window(range(*window), None) if window else None


def trace_in_child(path: Path, log: EventLog, pools: list[Any], window: tuple[int, int] | None, clock_mhz: float,
                   metadata: dict[str, Any]) -> bool:
    """trace.json from a forked child, with the counters of the window's pools only (the parent adds every
    pool's to the log for events.npz meanwhile): the 910b2 32k² run's 4-core window took 1.4 s of formatting
    after 0.44 s of counters, its events.npz 0.3 s."""
    cores = range(*window) if window else None
    shown = [p for p in pools if cores is None or parse_unit(buffer_owner(p.name)[0]).core in cores]
    log.set_counters(collect_counters(shown))
    write_trace(path, log, clock_mhz, metadata, _window_rows(log, window))
    return True


def write(done: Computed, out_dir: RunDir | str | Path | None = None, events_csv: bool = False,
          trace_window: tuple[int, int] | None = None) -> Path:
    """Write a computed run into ``out_dir`` (a claimed :class:`RunDir`; a path or None claims one).
    ``events_csv``: write events.csv however large the run; ``trace_window``: trace.json for these cores only.
    Returns the directory (also ``done.out_dir``)."""
    if not isinstance(out_dir, RunDir):
        with claim(out_dir, done.config.name) as rd:
            return write(done, rd, events_csv, trace_window)
    rd = out_dir
    config, sim, numerics, summary = done.config, done.sim, done.numerics, done.summary
    rd.refuse_foreign(RUN_FILES)
    rd.remove(_is_run_file)  # a reused --out must not keep a previous run's files
    events = sim.stats.events
    if events is not None:  # first: the goldens may still be running on the other CPU
        summary["event_log"] = write_event_files(rd, events, sim.stats.pools, summary, events_csv, trace_window)
        if len(events) <= TIMELINE_MAX_EVENTS:
            write_timeline(rd, summary, events)
    done.finish()
    if numerics is not None:
        write_npy(rd.file("o.npy"), numerics.out)
    if numerics is not None and numerics.dumps is not None:
        with rd.stage() as staged:
            nbytes = write_dumps(staged, numerics.dumps, config)
            rd.commit(staged, "dumps")
        summary["dumps"] = {"dir": "dumps", "bytes": nbytes, "tiles": len(numerics.dumps.done)}
    write_json(rd.file("summary.json"), summary)
    done.out_dir = rd.path
    return rd.path


def write_timeline(rd: RunDir, summary: dict[str, Any], events: EventLog) -> None:
    """timeline.svg of the whole run."""
    from tfa_sim.rundir.directory import atomic_write_via
    from tfa_sim.views.timeline import make_view, render

    view = make_view(rd.path.name, summary, events)
    atomic_write_via(rd.file("timeline.svg"), lambda tmp: render([view], tmp))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Cyclic GC off until the run is written: the simulation and its outputs allocate millions of objects
    that live until the end, and every collection pass would walk them all (engine/chip.py keeps it off while
    simulating; this extends that to writing the files)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run(config: Config, inputs_dir: str | None = None, out_dir: str | None = None, event_log: bool = True,
        fold: bool = False, events_csv: bool = False, trace_window: tuple[int, int] | None = None) -> Computed:
    """Simulate one config and write its run directory (``tfa-sim run``), which is locked meanwhile; returns the
    finished run (``out_dir`` set)."""
    with claim(out_dir, config.name) as rd, gc_paused():
        rd.refuse_foreign(RUN_FILES)  # before the long part: a directory holding the user's files is refused now
        with started(config, inputs_dir, event_log, fold) as done:
            write(done, rd, events_csv, trace_window)
            return done


def bottleneck(sim: Any, hw: Any) -> dict[str, Any]:
    """Bound pipe, bubbles by cause and (with the event log) the critical path of the task graph."""
    from tfa_sim.views.analysis import bubbles, critical_path_report

    out: dict[str, Any] = {"bubbles": bubbles(sim.stats.pipes, sim.total_cycles)}
    if sim.stats.events is not None:
        cp = critical_path_report(sim.stats.events, dataclasses.asdict(hw.overhead),
                                  [x.first_block for x in sim.launches[1:]])
        cp.pop("path", None)
        if "length_cycles" in cp:
            cp["fraction_of_makespan"] = round(cp["length_cycles"] / sim.total_cycles, 4)
        out["critical_path"] = cp
    return out


def listing_summary(plan: KernelPlan) -> dict[str, dict[str, str]]:
    """Each stage's listing and, for the stages that compute, whether its math is the shipped listing's (the
    backend's kernels) or its own (the lines one by one, in numpy: docs/kernel.md, "Listings")."""
    out = {}
    for stage, listing in plan.listings.items():
        out[stage] = {"listing": listing.value}
        if stage in MATH_STAGES:
            out[stage]["math"] = "listing" if listing.changes_math() else "shipped"
    return out


def _numerics_words(s: dict[str, Any]) -> str:
    """``exp=tfa`` (the npu reference), or ``reference=cpu_sim`` with CPU_SIM's exp."""
    if s.get("reference", "npu") == "cpu_sim":
        return "reference=cpu_sim (exp, sums and max as the kernel's g++ CPU simulation)"
    return f"exp={s['exp_model']}"


def format_summary(s: dict[str, Any], out_dir: Path) -> str:
    """What ``tfa-sim run`` prints: the timing, the bottleneck, the golden verdict, the files written."""
    lines = [f"tfa-sim run: {s['case']} on {s['hardware']}"
             + (f"  backend={s['backend']}  {_numerics_words(s)}" if "backend" in s else "  (timing only)")]
    lines += format_timing(s)
    lines += format_prediction(s)
    cp = s["bottleneck"].get("critical_path", {})
    if "length_cycles" in cp:
        shares = ", ".join(f"{k} {v:.0%}" for k, v in cp["share"].items())
        lines.append(f"  critical path: {cp['length_cycles']:.0f} cycles ({cp['fraction_of_makespan']:.0%} of the "
                     f"makespan; the rest is pipes waiting for each other): {shares}")
    elif "skipped" in cp:
        lines.append(f"  critical path: skipped, {cp['skipped']}")
    lines += [f"  {b['text']}" for b in s["bottleneck"]["bubbles"][:4]]
    lines += format_nearest(s)
    own = [f"{stage} ({v['listing']})" for stage, v in s.get("listings", {}).items() if v.get("math") == "listing"]
    if own and "backend" in s:
        lines.append(f"  listings with math of their own: {', '.join(own)}: their vector steps ran instruction by "
                     f"instruction in numpy (the native kernels run the shipped math only)")
    if "golden" in s:
        g = s["golden"]["vs_reference_fp64"]
        verdict = "PASS" if passed(s) else "FAIL"
        lines.append(f"  golden (fp64, kernel rule eps={s['golden']['eps']:g}): {verdict}  failures {g['failures']}/"
                     f"{g['allowed_failures']} allowed  max abs {g['max_abs_err']:.3g}  max rel {g['max_rel_err']:.3g}")
    files = ["summary.json"] + [f for f in ("o.npy", EVENTS_NPZ, EVENTS_CSV, "trace.json", "timeline.svg", "dumps/")
                                if (out_dir / f).exists()]
    lines.append(f"  wrote {out_dir}/ ({', '.join(files)})")
    log = s.get("event_log")
    if log and not log["csv"]:
        lines.append(f"  events.csv skipped ({log['events']} events > {EVENTS_CSV_MAX}; events.npz has them all): "
                     f"rerun with --events-csv to write it")
    if log and log["trace_cores"]:
        a, b = log["trace_cores"]
        lines.append(f"  trace.json holds cores {a}:{b} only ({log['events']} events): export others with "
                     f"tfa-sim trace {out_dir} --cores A:B [--tiles A:B] --out FILE")
    if log and not (out_dir / "timeline.svg").exists():
        lines.append(f"  timeline.svg skipped (over {TIMELINE_MAX_EVENTS} instruction groups): "
                     f"tfa-sim timeline {out_dir} --cores 0-1 --tiles 0:16")
    return "\n".join(lines)
