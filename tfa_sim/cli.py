"""``tfa-sim`` command line.  Errors print one line and exit 2 (bad input) or 3 (schedule)."""
from __future__ import annotations

import argparse
import os
import re
import select
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from tfa_sim import __version__
from tfa_sim.rundir.directory import EVENTS_CSV_MAX, TRACE_MAX_EVENTS
from tfa_sim.spec.config import Config, parse_override, parse_span
from tfa_sim.spec.errors import InputError, TfaSimError
from tfa_sim.spec.safety import check_name, check_path, os_problem, show

if TYPE_CHECKING:
    pass


class _Parser(argparse.ArgumentParser):
    """argparse in tfa-sim's error style: one line on stderr, exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def _config_args(p: argparse.ArgumentParser, positional: bool = True, backend: bool = True) -> None:
    if positional:
        p.add_argument("config", nargs="?", help="config file (.toml/.yaml); default: the built-in reference case")
    p.add_argument("--case", metavar="NAME", help="a shipped reference case by name (configs/cases/NAME.toml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config key (repeatable), e.g. --set schedule.qk_preload=2")
    p.add_argument("--hw", metavar="PRESET", help="hardware preset name (910b1…910b4) or preset TOML file")
    _plugin_arg(p)
    if backend:
        p.add_argument("--backend", metavar="NAME", choices=("numpy", "native"),
                       help="stage-kernel backend (numerics.backend)")


def _plugin_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin", dest="plugins", action="append", default=[], metavar="FILE",
                   help="a module adding values to the design choices' registries, loaded first (repeatable; "
                   "added to kernel.plugins; docs/guide/extending.md)")


def _overrides(texts: list[str]) -> dict[str, Any]:
    """``--set SECTION.KEY=VALUE`` options as the API's overrides, ``{"section.key": value}``."""
    return {f"{section}.{key}": value for section, key, value in map(parse_override, texts)}


def _config_from(args: argparse.Namespace) -> Config:
    """``tfa-sim run``'s config: CONFIG or --case, --set, then the options that set config keys."""
    from tfa_sim.api.library import load_config

    overrides = _overrides(args.overrides)
    if args.no_numerics:
        overrides["numerics.enabled"] = False
    if args.intermediate_check:
        overrides["numerics.intermediate_check"] = True
    for flag in ("blocks", "tiles"):
        text = getattr(args, flag)
        if text is not None:
            parse_span(text, f"--{flag}")
            overrides[f"numerics.dump_{flag}"] = text
    if args.backend:
        overrides["numerics.backend"] = args.backend
    if args.mask:
        overrides["case.mask"] = args.mask
    return load_config(args.config, case=args.case, overrides=overrides, hw=args.hw, plugins=args.plugins)


#: A run with more instruction groups than this exits without tearing down its heap (see :func:`cmd_run`).
FAST_EXIT_INSTRUCTIONS = 100_000


def cmd_run(args: argparse.Namespace) -> int:
    import gc

    from tfa_sim.api.library import run
    from tfa_sim.api.runner import format_summary
    from tfa_sim.spec.workload import instruction_groups

    window = _core_span(args.trace_window, "--trace-window") if args.trace_window else None
    config = _config_from(args)
    # A large run from the process's own command line (main(None), never a caller that goes on: tests, sweeps)
    # leaves without tearing its heap down.  The simulation's object graph is cyclic: a GC pass after the run
    # would walk millions of objects, and the interpreter's exit would walk and free them all — seconds to
    # minutes that change nothing on disk.  So GC stays off to the end, and os._exit skips the teardown
    # (gc.freeze would spare the walks, not the freeing).
    fast_exit = args.fast_exit and not args.fold and instruction_groups(config) > FAST_EXIT_INSTRUCTIONS
    if fast_exit:
        gc.disable()
    result = run(config, inputs=args.inputs, out=args.out or True, event_log=not args.no_event_log, fold=args.fold,
                 events_csv=args.events_csv, trace_window=window)
    assert result.out_dir is not None, "out= writes the run directory"
    print(format_summary(result.summary, result.out_dir))
    code = 0 if result.passed else 1
    if fast_exit:  # every file is written, renamed into place and closed, the lock released: run() has returned
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _core_span(text: str, flag: str) -> tuple[int, int]:
    """``a:b`` (a < b) of core numbers."""
    m = re.fullmatch(r"\s*([0-9]{1,4})\s*:\s*([0-9]{1,4})\s*", text)
    if m is None or int(m[1]) >= int(m[2]):
        raise InputError(f"{flag} {show(text)}: expected cores a:b with a < b, e.g. 0:4")
    return int(m[1]), int(m[2])


#: ``tfa-sim trace --format``: what each writes, and the --out suffixes that choose it when --format is not given.
TRACE_FORMATS = {"json": "Chrome JSON", "perfetto": "Perfetto protobuf", "parquet": "Parquet table of the events"}
TRACE_SUFFIXES = {".json": "json", ".pftrace": "perfetto", ".perfetto-trace": "perfetto", ".pb": "perfetto",
                  ".parquet": "parquet"}
#: The formats an extra writes: the module each needs (tfa_sim.spec.extras names its extra).
TRACE_NEEDS = {"perfetto": "perfetto", "parquet": "pyarrow"}


def cmd_trace(args: argparse.Namespace) -> int:
    from tfa_sim.api.runner import trace_metadata
    from tfa_sim.rundir.outputs import EVENTS_NPZ, read_log, read_summary
    from tfa_sim.spec.extras import require
    from tfa_sim.views.trace import write_trace

    run_dir = check_path(args.run_dir, "RUN_DIR")
    cores = _core_span(args.cores, "--cores") if args.cores else None
    tiles = parse_span(args.tiles, "--tiles") if args.tiles else None
    out = check_path(args.out, "--out")
    fmt = args.format or TRACE_SUFFIXES.get(out.suffix.lower(), "json")
    if fmt in TRACE_NEEDS:
        require(f"trace --format {fmt}", TRACE_NEEDS[fmt])
    summary = read_summary(run_dir)
    log = read_log(run_dir / EVENTS_NPZ)
    rows = log.window(range(*cores) if cores else None, tiles)
    if not len(rows):
        raise InputError(f"{run_dir}: no events in --cores {args.cores or 'all'} --tiles {args.tiles or 'all'}; "
                         f"widen the window")
    if fmt == "perfetto":
        from tfa_sim.views.perfetto_trace import write_perfetto

        write_perfetto(out, log, summary["clock_mhz"], rows)
    elif fmt == "parquet":
        from tfa_sim.rundir.event_table import write_parquet

        write_parquet(out, log, rows)
    else:
        write_trace(out, log, summary["clock_mhz"], trace_metadata(summary), rows)
    print(f"tfa-sim trace: {len(rows)} of {len(log)} events → {out} ({TRACE_FORMATS[fmt]})")
    return 0


def cmd_gen_data(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import load_config
    from tfa_sim.numerics.golden import kernel_golden
    from tfa_sim.numerics.inputs import generate_inputs, write_input_bins
    from tfa_sim.rundir.directory import RunDir
    from tfa_sim.rundir.memory import gen_data_parts, require

    text = args.case_or_config
    is_file = text.endswith((".toml", ".yaml", ".yml"))
    if not is_file:
        check_name(text, "gen-data CASE", "give a shipped case's name or a config file (.toml/.yaml)")
    config = load_config(text if is_file else None, case=None if is_file else text,
                         overrides=_overrides(args.overrides))
    require(gen_data_parts(config), config.numerics.mem_limit_gib, "gen-data")
    with RunDir(args.out, "--out", "gen-data") as rd, rd.stage() as staged:
        inputs = generate_inputs(config)
        write_input_bins(inputs, staged)
        kernel_golden(inputs, config, record=True).write(staged, config)
        rd.refuse_foreign(os.listdir(staged))
        rd.remove(lambda rel: "/" not in rel and rel.endswith(".bin"))  # an earlier gen-data's files
        rd.commit(staged)
    print(f"tfa-sim gen-data: {config.name} → {rd.path} (inputs and kernel-ordered golden, raw .bin)")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import profile
    from tfa_sim.views.profile import PROFILE_FILES, format_profile

    result = profile(args.profile, args.config, case=args.case, overrides=_overrides(args.overrides), hw=args.hw,
                     op=args.op, launch=args.launch, out=args.out or True, plugins=args.plugins)
    print(format_profile(result.report))
    print(f"  wrote {result.out_dir}/ ({', '.join(PROFILE_FILES)})")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tfa_sim.api.calibration import calibrate

    result = calibrate(args.points, profiles=args.profiles, kernel=args.kernel, exclude=args.exclude,
                       check=args.check, out=args.out or True, write_presets=args.write_presets,
                       echo=lambda line: print(line, flush=True))
    print(result.report)
    if args.check:
        print(f"wrote {result.out_dir}/check.txt and check.json")
    else:
        print(f"wrote {result.out_dir}/report.txt, calibration.json and presets "
              f"{', '.join(str(p) for p in result.presets)} (use one with --hw FILE)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import check
    from tfa_sim.views.check import format_report

    stages = [s for item in args.stage or [] for s in item.split(",") if s]
    report = check(args.run_dir, golden=args.golden, eps=args.eps, atol=args.atol, rtol=args.rtol, stages=stages,
                   mem_limit_gib=args.mem_limit_gib, kernel_dumps=args.kernel_dumps, exact=args.exact)
    if report.get("kind") == "kernel_dumps":
        from tfa_sim.views.kernel_dumps import format_kernel_report

        print(format_kernel_report(report))
    else:
        print(format_report(report))
    print(f"wrote {Path(args.run_dir) / 'check.json'}")
    return 0 if report["passed"] else 1


def cmd_sweep(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import sweep_table
    from tfa_sim.explore.sweep import default_out, format_sweep_report, sweep_report

    out = Path(args.out) if args.out else default_out(args.file)
    _, points = sweep_table(args.file, jobs=args.jobs, out=out, executor=args.executor, scheduler=args.scheduler,
                            progress=not args.no_progress, plugins=args.plugins)
    report = sweep_report(out, plots=not args.no_plots)
    print(f"tfa-sim sweep: {len(points)} points in {out}/results.jsonl (+ results.csv): "
          + ", ".join(f"{k} {v}" for k, v in report["status"].items()))
    print(format_sweep_report(report))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import tune
    from tfa_sim.explore.tune.tuner import FILES

    result = tune(args.config, case=args.case, overrides=_overrides(args.overrides), hw=args.hw, space=args.space,
                  budget_s=args.budget_s, jobs=args.jobs, executor=args.executor, scheduler=args.scheduler,
                  out=args.out or True, top=args.top, progress=not args.no_progress,
                  echo=None if args.no_progress else lambda line: print(line, file=sys.stderr), plugins=args.plugins)
    print(result.report)
    out = result.out_dir
    assert out is not None, "the command keeps its tune directory"
    written = [name for name in FILES if (out / name).exists()]
    print(f"wrote {out}/ ({', '.join(written)}); tfa-sim run {out / 'best.toml'} reproduces "
          f"time_us {result.summary['best']['time_us']}")
    return 0


def cmd_sweep_report(args: argparse.Namespace) -> int:
    from tfa_sim.explore.sweep import format_sweep_report, sweep_report

    print(format_sweep_report(sweep_report(args.dir, plots=not args.no_plots)))
    return 0


def _write_figure(path: str | Path, views: list, arrows: bool = False) -> Path:
    """Render ``views`` to ``-o`` atomically (the user named the file: it is replaced)."""
    from tfa_sim.rundir.directory import atomic_write_via
    from tfa_sim.views.timeline import render

    out = check_path(path, "-o")  # render checks the format (the commands check -o before any work, too)
    atomic_write_via(out, lambda tmp: render(views, tmp, arrows))
    return out


def cmd_timeline(args: argparse.Namespace) -> int:
    from tfa_sim.rundir.directory import RunDir
    from tfa_sim.views.timeline import check_output, load_view, parse_cores

    runs = list(args.run_dirs) + list(args.compare or [])
    if not runs:
        raise InputError("tfa-sim timeline needs a RUN_DIR (or --compare RUN_A RUN_B …)")
    if len(runs) > 1 and not args.compare:
        raise InputError("several run directories: use --compare RUN_A RUN_B … to stack them")
    if args.output:
        check_output(check_path(args.output, "-o"))
    cores, tiles = parse_cores(args.cores), parse_span(args.tiles or "", "--tiles")
    views = [load_view(r, args.by, cores, tiles, args.arrows) for r in runs]
    if args.output:
        out = _write_figure(args.output, views, args.arrows)
    else:  # into the run directory, by its rules
        with RunDir(runs[0], "RUN_DIR", "timeline", create=False) as rd:
            rd.refuse_foreign(["timeline.svg"], "write the figure elsewhere with -o FILE")
            out = _write_figure(rd.file("timeline.svg"), views, args.arrows)
    for v in views:
        print(f"{v.name}: {v.makespan}, {len(v.bars)} bars in {len(v.lanes)} lanes")
    print(f"wrote {out}")
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import roofline
    from tfa_sim.rundir.directory import RunDir
    from tfa_sim.views.roofline_chart import format_table

    if args.output:
        runs = roofline(args.run_dirs, out=args.output)
        out = Path(args.output)
    else:  # into the first run directory, by its rules
        runs = roofline(args.run_dirs)
        with RunDir(args.run_dirs[0], "RUN_DIR", "roofline", create=False) as rd:
            rd.refuse_foreign(["roofline.svg"], "write the figure elsewhere with -o FILE")
            out = rd.file("roofline.svg")
            roofline(args.run_dirs, out=out)
    print("\n".join(format_table(list(runs.items()))))
    print(f"wrote {out}")
    return 0


def cmd_listing(args: argparse.Namespace) -> int:
    from tfa_sim.api.library import listing
    from tfa_sim.views.listing import format_listing

    when = {}
    for text in args.when:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise InputError(f"--when {show(text)}: write NAME=VALUE, e.g. --when first=true")
        when[key.strip()] = value.strip()
    print(format_listing(listing(args.stage, args.config, case=args.case, overrides=_overrides(args.overrides),
                                 hw=args.hw, when=when, plugins=args.plugins)))
    return 0


def _plan_units(text: str) -> dict[str, int]:
    """``--units cube.M=2,vec.V=2`` → servers per pipe kind (1…64 each)."""
    from tfa_sim.spec.units import PIPES

    known = [f"{kind}.{pipe}" for kind, pipes in PIPES.items() for pipe in pipes]
    units = {}
    for item in filter(None, text.split(",")):
        kind, _, n = (part.strip() for part in item.partition("="))
        if kind not in known or not re.fullmatch(r"[0-9]{1,2}", n) or not 1 <= int(n) <= 64:
            raise InputError(f"--units {show(item)}: expected PIPE=N, N in 1…64, PIPE one of {', '.join(known)}")
        units[kind] = int(n)
    return units


def cmd_plan(args: argparse.Namespace) -> int:
    from tfa_sim.rundir.events import DISPATCH
    from tfa_sim.rundir.outputs import events_file, read_events, read_summary
    from tfa_sim.views.analysis import plan
    from tfa_sim.views.timeline import check_output, make_view, planned

    run_dir = check_path(args.run_dir, "RUN_DIR")
    if args.output:
        check_output(check_path(args.output, "-o"))
    units = _plan_units(args.units or "") if args.resources == "pipes" else None
    summary = read_summary(run_dir)
    events = read_events(run_dir)
    if all(e.pipe == DISPATCH for e in events):
        raise InputError(f"{events_file(run_dir)} holds no instruction groups; rerun tfa-sim run")
    schedule = plan(events, summary["overhead"], units, [x["first_block"] for x in summary.get("launches", [])[1:]])
    plan_summary, moved = planned(summary, events, schedule)
    what = "unlimited resources" if units is None else "one server per pipe" + (f" ({args.units})" if units else "")
    print(f"plan ({what}): {plan_summary['total_cycles']:.0f} cycles = {plan_summary['time_us']:.2f} µs; "
          f"simulated: {summary['total_cycles']:.0f} cycles = {summary['time_us']:.2f} µs "
          f"(plan/simulated {plan_summary['total_cycles'] / summary['total_cycles']:.0%})")
    if args.output:
        views = [make_view(f"plan ({what})", plan_summary, moved, by="pipe"),
                 make_view(f"simulated {run_dir.name}", summary, events, by="pipe")]
        print(f"wrote {_write_figure(args.output, views)}")
    return 0


def _run_parsers(sub: Any) -> None:
    """``run``, ``gen-data`` and ``check``."""
    p = sub.add_parser("run", help="run one config: output, golden check, summary")
    _config_args(p)
    p.add_argument("--inputs", metavar="DIR", help="directory with q.npy/k.npy/v.npy or q.bin/kt.bin/v.bin (fp16)")
    p.add_argument("--out", metavar="DIR", help="run directory (default: a new runs/<case>-<time>)")
    p.add_argument("--no-numerics", action="store_true", help="timing only: skip the arithmetic")
    p.add_argument("--no-event-log", action="store_true",
                   help="do not write events.npz, events.csv, trace.json (large runs)")
    p.add_argument("--events-csv", action="store_true",
                   help=f"write events.csv however large the run (by default only up to {EVENTS_CSV_MAX} events)")
    p.add_argument("--trace-window", metavar="CORES",
                   help=f"trace.json for cores a:b only, e.g. 0:4 (the default beyond {TRACE_MAX_EVENTS} events)")
    p.add_argument("--fold", action="store_true", help="with --no-numerics: estimate the time of a long unmasked "
                   "run from short samples (no event log; docs/guide/decode.md)")
    p.add_argument("--mask", metavar="FILE", help=".npy boolean mask (True = masked), S0×S1 or [batch, heads, S0, S1]")
    p.add_argument("--intermediate-check", action="store_true",
                   help="dump every stage's output per block and tile to RUN/dumps/ (then: tfa-sim check RUN)")
    p.add_argument("--blocks", metavar="A:B", help="with --intermediate-check: dump only blocks a:b")
    p.add_argument("--tiles", metavar="A:B", help="with --intermediate-check: dump only logical tiles a:b")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("gen-data", help="write a case's reference inputs and golden as the kernel's .bin files")
    p.add_argument("case_or_config", help="reference case name or config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config key (repeatable), as for run")
    p.add_argument("--out", metavar="DIR", required=True, help="directory to write")
    p.set_defaults(func=cmd_gen_data)
    p = sub.add_parser("check", help="compare a run's intermediate dumps with the model or a golden directory")
    p.add_argument("run_dir", help="a run directory with dumps (tfa-sim run --intermediate-check --out RUN_DIR)")
    p.add_argument("--golden", metavar="DIR", help="directory of raw .bin files in the reference generator's layout")
    p.add_argument("--eps", metavar="E", type=float, default=1e-3,
                   help="the kernel rule's eps (default 1e-3; exp_max 1e-2)")
    p.add_argument("--atol", metavar="A", type=float, help="absolute tolerance (default eps)")
    p.add_argument("--rtol", metavar="R", type=float, help="relative tolerance (default eps)")
    p.add_argument("--stage", metavar="STAGES", action="append",
                   help="only these stages or dumps, e.g. compute_p or qk,pv")
    p.add_argument("--kernel-dumps", metavar="DIR",
                   help="the directory the kernel's main.cpp --intermediate wrote (qk_out.bin, p_out.bin, "
                        "exp_max_ififo.bin, out2.bin, o_out.bin, or .bin.gz): compare tensor by tensor")
    p.add_argument("--exact", action="store_true",
                   help="with --kernel-dumps: pass only if every compared element is bit-equal")
    p.add_argument("--mem-limit-gib", metavar="GIB", type=float, default=None,
                   help="refuse when the check would hold more memory (default: the run's numerics.mem_limit_gib, "
                        "else 80%% of the memory available)")
    p.set_defaults(func=cmd_check)


def _profile_parser(sub: Any) -> None:
    """``profile``."""
    p = sub.add_parser("profile", help="a board's profile beside the model, pipe by pipe (docs/profiles.md)")
    p.add_argument("profile", metavar="DIR", help="the OPPROF_… directory of msprof op, the PROF_… directory of "
                   "msprof --application (or its op_summary_*.csv), a torch_npu …_ascend_pt directory (or its "
                   "kernel_details.csv), or a msprof_*.db or ascend_pytorch_profiler_*.db (docs/profiles.md)")
    _config_args(p, backend=False)
    p.add_argument("--op", metavar="NAME",
                   help="the operator (Op Name, or the start of it) where the profile holds several")
    p.add_argument("--launch", type=int, metavar="N", help="compare launch N of the operator alone, 0-based in "
                   "start-time order (0 = the first); default: the mean of every launch, their spread shown")
    p.add_argument("--out", metavar="DIR", help="output directory (default: a new runs/profile-<case>-<time>)")
    p.set_defaults(func=cmd_profile)


def _tune_parser(sub: Any) -> None:
    """``tune``."""
    p = sub.add_parser("tune", help="find a case's best legal schedule: legality, a screen of every candidate, "
                       "full simulations of the finalists (resumable; local processes or dask)")
    _config_args(p, backend=False)
    p.add_argument("--space", metavar="FILE",
                   help="sweep TOML whose [base], [axes] and constraints span the candidates "
                   "(default: every schedule and tiling knob that applies to the case)")
    p.add_argument("--budget-s", metavar="SECONDS", type=float,
                   help="wall seconds for the whole tune (default: no limit)")
    p.add_argument("--jobs", metavar="N", type=int, default=os.cpu_count() or 1,
                   help="worker processes for the simulations "
                   "(default: all cores)")
    p.add_argument("--executor", metavar="NAME", choices=("local", "dask"), default="local",
                   help="where the simulations run: local worker processes (default) or dask")
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler address, reached within 5 s")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default runs/tune-<case>-<time>); rerunning into it resumes")
    p.add_argument("--top", metavar="K", type=int, default=5,
                   help="candidates the report shows against the defaults (default 5)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_tune)


def _explore_parsers(sub: Any) -> None:
    """``sweep``, ``sweep-report``, ``timeline``, ``trace``, ``plan``, ``roofline``, ``listing``
    (:func:`_listing_parser`) and ``calibrate`` (:func:`_calibrate_parser`)."""
    p = sub.add_parser("sweep", help="run a schedule exploration (resumable; local processes or dask)")
    p.add_argument("file", help="sweep TOML: [base] config, [axes], optional [sweep]")
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/sweep-<file>); rerunning resumes it")
    p.add_argument("--jobs", metavar="N", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: all cores); each point runs in a worker, which dies with "
                   "the sweep")
    p.add_argument("--executor", metavar="NAME", choices=("local", "dask"), default="local",
                   help="where the points run: local worker processes (default) or dask")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="dask scheduler address, reached within 5 s (default: a LocalCluster of "
                   "--jobs workers)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="report without plots (sweep-report DIR draws them)")
    _plugin_arg(p)
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("sweep-report", help="rank a sweep's points, Pareto fronts, plots (no simulation)")
    p.add_argument("dir", help="a sweep's output directory (tfa-sim sweep --out DIR)")
    p.add_argument("--no-plots", action="store_true", help="the report without plots")
    p.set_defaults(func=cmd_sweep_report)
    p = sub.add_parser("timeline", help="Gantt chart of a run (.svg/.png/.html); --compare stacks runs")
    p.add_argument("run_dirs", nargs="*", help="run directory (from tfa-sim run --out)")
    p.add_argument("--compare", nargs="+", metavar="RUN", help="stack these runs on one time axis")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="output file .svg, .png or .html (default RUN_DIR/timeline.svg)")
    p.add_argument("--cores", metavar="CORES", help="cores to show, e.g. 0,2,5-7")
    p.add_argument("--tiles", metavar="A:B", help="logical tiles a:b to show (a ≤ t < b)")
    p.add_argument("--by", metavar="LANES", choices=("pipe", "stage", "unit"),
                   help="lanes per pipe, per stage band, or per unit")
    p.add_argument("--arrows", action="store_true", help="draw FIFO hand-offs between units")
    p.set_defaults(func=cmd_timeline)
    p = sub.add_parser("trace", help="export a window of a run's event log as Chrome JSON, a Perfetto trace or "
                       "a Parquet table")
    p.add_argument("run_dir", help="a run directory with its event log (tfa-sim run --out)")
    p.add_argument("--cores", metavar="A:B", help="cores a:b (a ≤ core < b; default all)")
    p.add_argument("--tiles", metavar="A:B",
                   help="logical tiles a:b (a ≤ tile < b; default all; dispatch spans have none)")
    p.add_argument("--format", metavar="FORMAT", choices=tuple(TRACE_FORMATS),
                   help="json (Chrome trace events), perfetto (protobuf) "
                   "or parquet (one row per event, for pandas, polars, DuckDB); default: perfetto for --out "
                   ".pftrace, .perfetto-trace or .pb, parquet for .parquet, else json")
    p.add_argument("--out", metavar="FILE", required=True, help="the file to write")
    p.set_defaults(func=cmd_trace)
    p = sub.add_parser("plan", help="ideal list schedule of a run's task graph, compared with the simulation")
    p.add_argument("run_dir", help="a run directory with its event log (tfa-sim run --out)")
    p.add_argument("--resources", metavar="WHICH", choices=("unlimited", "pipes"), default="unlimited",
                   help="unlimited: dependencies only; pipes: one server per pipe (see --units)")
    p.add_argument("--units", metavar="PIPE=N,…",
                   help="servers per pipe kind with --resources pipes, e.g. cube.M=2,vec.V=2")
    p.add_argument("-o", "--output", metavar="FILE", help="plan vs simulated Gantt (.svg/.png/.html)")
    p.set_defaults(func=cmd_plan)
    _listing_parser(sub)
    p = sub.add_parser("roofline", help="runs and their stages against the chip's limits (.svg/.png/.html)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (tfa-sim run --out)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="output file .svg, .png or .html (default RUN_DIR/roofline.svg)")
    p.set_defaults(func=cmd_roofline)
    _calibrate_parser(sub)


def _listing_parser(sub: Any) -> None:
    """``listing``."""
    p = sub.add_parser("listing", help="the listing a config runs for one stage, each line with its cycles and share "
                       "(docs/kernel.md, \"Listings\")")
    p.add_argument("stage", help="compute_qk, compute_p, compute_pv, compute_gu, epilogue or combine")
    _config_args(p, backend=False)
    p.add_argument("--when", action="append", default=[], metavar="NAME=VALUE",
                   help="the call to price, e.g. --when first=true --when mask=partial (default: the steady call)")
    p.set_defaults(func=cmd_listing)


def _calibrate_parser(sub: Any) -> None:
    """``calibrate``."""
    p = sub.add_parser("calibrate", help="fit the timing model's free parameters to measured launches")
    p.add_argument("--points", action="append", default=[], metavar="FILE",
                   help="CSV of measured points, repeatable (default: the shipped sets unless --profiles is given; "
                   "docs/calibration.md)")
    p.add_argument("--profiles", metavar="LIST", help="TOML or CSV naming board profiles (msprof, torch_npu) and the "
                   "config each ran: each a point of timing task (docs/calibration.md, \"Profiles as points\")")
    p.add_argument("--kernel", metavar="BUILD", help="fit only the points of this build: a shipped one (manual, jit, "
                   "dsl) or a bundle file's path")
    p.add_argument("--exclude", type=int, action="append", default=[], metavar="ROW",
                   help="leave out data row ROW (1 = the first point; repeatable)")
    p.add_argument("--out", metavar="DIR", help="directory for the report and the fitted presets DIR/<preset>.toml "
                                 "(default: runs/calibration-<time>; with --check runs/calibration-check-<time>)")
    p.add_argument("--write-presets", action="store_true",
                   help="also overwrite the shipped presets in configs/hw/ (developers)")
    p.add_argument("--check", action="store_true",
                   help="fit nothing: each point beside the presets' prediction and its 90 %% interval, the errors "
                   "and the coverage (DIR/check.txt, check.json)")
    p.set_defaults(func=cmd_calibrate)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tfa-sim", description="Simulate the tiled FlashAttention kernel of "
                                     "Ascend A2/A3 NPUs: bit-accurate outputs and schedule timing.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parsers(sub)
    _explore_parsers(sub)
    _tune_parser(sub)
    _profile_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; errors are one line on stderr and the exit code of docs/guide/exit-codes.md."""
    args = build_parser().parse_args(argv)
    args.fast_exit = argv is None  # the process's own command line: nothing runs after this command
    if args.fast_exit:
        from tfa_sim.numerics.blas import start_single_threaded

        start_single_threaded()  # before numpy is imported
    try:
        return args.func(args)
    except TfaSimError as exc:
        return _fail(str(exc), exc.exit_code)
    except BrokenPipeError as exc:  # the reader of our output left (``| head``): quiet, as any Unix tool
        if _stdout_closed():
            return BROKEN_PIPE
        return _fail(f"{os_problem(exc)}", 2)
    except OSError as exc:  # the system refused something no check foresaw (a disk full, a file gone)
        where = f" ({exc.filename})" if exc.filename else ""
        return _fail(f"{os_problem(exc)}{where}", 2)
    except MemoryError:
        return _fail("out of memory: narrow the run (fewer batch/heads, a smaller S0 or S1) or free memory", 2)
    except Exception as exc:  # with a user's plugin loaded, its value is the likeliest cause: one line, not a trace
        from tfa_sim.spec import plugins

        if not plugins.LOADED:
            raise
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return _fail(f"{type(exc).__name__}: {exc} (line {frame.lineno} of {frame.filename}) with plugin(s) "
                     f"{', '.join(plugins.NAMED.values())} loaded: a plugin's value may break its registry's "
                     f"contract (docs/guide/extending.md); run without the plugins to tell", 2)
    except KeyboardInterrupt:
        print("tfa-sim: interrupted", file=sys.stderr)
        return 130


#: The exit code of a command whose output's reader left: 128 + SIGPIPE, what a shell reports for ``yes | head``.
BROKEN_PIPE = 141


def _stdout_closed() -> bool:
    """Whether standard output's reader has gone (its pipe polls as an error); if so stdout is pointed at
    /dev/null, so that the interpreter's own flush at exit does not fail a second time."""
    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll on this system, or stdout is not a file
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    return gone


#: Every character that ends a line (``str.splitlines``), as the escape an error line shows instead.
LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def _fail(message: str, code: int) -> int:
    """Print ``message`` as one line (line breaks inside paths or values escaped)."""
    print(f"tfa-sim: error: {message.translate(LINE_BREAKS)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
