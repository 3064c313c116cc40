"""``tfa-sim`` command line.  Errors print one line and exit 2 (bad input) or 3 (schedule)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tfa_sim.config import Config, load_config
from tfa_sim.errors import InputError, TfaError


def _config_args(p: argparse.ArgumentParser, positional: bool = True) -> None:
    if positional:
        p.add_argument("config", nargs="?", help="config file (.toml/.yaml); default: the built-in reference case")
    p.add_argument("--case", help="a shipped reference case by name (configs/cases/NAME.toml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config key (repeatable), e.g. --set schedule.qk_preload=2")
    p.add_argument("--hw", help="hardware preset name (910b1…910b4) or preset TOML file")
    p.add_argument("--backend", choices=("numpy", "native"), help="stage-kernel backend (numerics.backend)")


def _config_from(args: argparse.Namespace) -> Config:
    overrides = list(args.overrides)
    if getattr(args, "no_numerics", False):
        overrides.append("numerics.enabled=false")
    if getattr(args, "intermediate_check", False):
        overrides.append("numerics.intermediate_check=true")
    for flag in ("blocks", "tiles"):
        if getattr(args, flag, None):
            overrides.append(f'numerics.dump_{flag}="{getattr(args, flag)}"')
    if args.hw:
        is_file = args.hw.endswith(".toml") or Path(args.hw).exists()
        overrides.append(f'hardware.{"file" if is_file else "preset"}="{args.hw}"')
    if args.backend:
        overrides.append(f'numerics.backend="{args.backend}"')
    if getattr(args, "mask", None):
        overrides.append(f"case.mask={json.dumps(args.mask)}")  # a TOML basic string
    return load_config(getattr(args, "config", None), args.case, overrides)


def cmd_run(args: argparse.Namespace) -> int:
    from tfa_sim.runner import format_summary, run

    result = run(_config_from(args), args.inputs, args.out, event_log=not args.no_event_log, fold=args.fold)
    print(format_summary(result))
    return 0 if result.passed else 1


def cmd_gen_data(args: argparse.Namespace) -> int:
    from tfa_sim.golden import kernel_golden
    from tfa_sim.inputs import generate_inputs, write_input_bins

    is_file = args.case_or_config.endswith((".toml", ".yaml", ".yml"))
    config = load_config(args.case_or_config if is_file else None, None if is_file else args.case_or_config,
                         args.overrides)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = generate_inputs(config)
    write_input_bins(inputs, out)
    kernel_golden(inputs, config, record=True).write(out, config)
    print(f"tfa-sim gen-data: {config.name} → {out} (inputs and kernel-ordered golden, raw .bin)")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tfa_sim.calibrate import (
        calibration_record,
        fit,
        format_report,
        leave_one_out,
        select_points,
        sensitivity,
        write_presets,
    )
    from tfa_sim.outputs import new_run_dir, write_json

    points = select_points(args.points, args.exclude)
    print(f"tfa-sim calibrate: fitting to {len(points)} measured points…", flush=True)
    result = fit(points)
    sens = sensitivity(result)
    loo = None
    if args.leave_one_out:
        print(f"tfa-sim calibrate: leave-one-out, {len(points)} refits on {args.jobs} processes…", flush=True)
        loo = leave_one_out(points, jobs=args.jobs)
    out = Path(args.out) if args.out else new_run_dir("calibration")
    (out / "hw").mkdir(parents=True, exist_ok=True)
    report = format_report(result, loo, sens)
    (out / "report.txt").write_text(report + "\n", encoding="utf-8")
    write_json(out / "calibration.json", calibration_record(result, loo, sens))
    note = f"tfa-sim calibrate, {len(points)} points, in-sample MAPE {result.mape:.1%}"
    written = write_presets(result, out / "hw", note)
    if args.write_presets:
        written += write_presets(result, None, note)
    print(report)
    print(f"wrote {out}/report.txt, calibration.json and fitted presets: {', '.join(str(p) for p in written)}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from tfa_sim.check import check_run, format_report

    stages = [s for item in args.stage or [] for s in item.split(",") if s]
    report = check_run(Path(args.run_dir), Path(args.golden) if args.golden else None, args.eps, args.atol,
                       args.rtol, stages)
    print(format_report(report))
    print(f"wrote {Path(args.run_dir) / 'check.json'}")
    return 0 if report["passed"] else 1


def cmd_sweep(args: argparse.Namespace) -> int:
    from tfa_sim.sweep import format_sweep_report, run_sweep, sweep_report

    out, rows = run_sweep(args.file, args.out, args.jobs, args.executor, args.scheduler,
                          progress=not args.no_progress)
    report = sweep_report(out, plots=not args.no_plots)
    print(f"tfa-sim sweep: {len(rows)} points in {out}/results.jsonl (+ results.csv): "
          + ", ".join(f"{k} {v}" for k, v in report["status"].items()))
    print(format_sweep_report(report))
    return 0


def cmd_sweep_report(args: argparse.Namespace) -> int:
    from tfa_sim.sweep import format_sweep_report, sweep_report

    print(format_sweep_report(sweep_report(args.dir, plots=not args.no_plots)))
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from tfa_sim.config import parse_span
    from tfa_sim.timeline import load_view, parse_cores, render

    runs = list(args.run_dirs) + list(args.compare or [])
    if not runs:
        raise InputError("tfa-sim timeline needs a RUN_DIR (or --compare RUN_A RUN_B …)")
    if len(runs) > 1 and not args.compare:
        raise InputError("several run directories: use --compare RUN_A RUN_B … to stack them")
    cores, tiles = parse_cores(args.cores), parse_span(args.tiles or "", "--tiles")
    views = [load_view(r, args.by, cores, tiles, args.arrows) for r in runs]
    out = Path(args.output) if args.output else Path(runs[0]) / "timeline.svg"
    render(views, out, args.arrows)
    for v in views:
        print(f"{v.name}: {v.makespan}, {len(v.bars)} bars in {len(v.lanes)} lanes")
    print(f"wrote {out}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from tfa_sim.analysis import plan
    from tfa_sim.outputs import read_events, read_summary
    from tfa_sim.timeline import make_view, planned, render

    run_dir = Path(args.run_dir)
    summary = read_summary(run_dir)
    events = read_events(run_dir / "events.csv")
    overhead = summary["overhead"]
    units = None
    if args.resources == "pipes":
        units = {}
        for item in filter(None, (args.units or "").split(",")):
            kind, _, n = item.partition("=")
            if not n.isdigit() or int(n) < 1:
                raise InputError(f"--units {item!r}: expected PIPE=N like cube.M=2")
            units[kind.strip()] = int(n)
    schedule = plan(events, overhead, units)
    plan_summary, moved = planned(summary, events, schedule)
    what = "unlimited resources" if units is None else "one server per pipe" + (f" ({args.units})" if units else "")
    print(f"plan ({what}): {plan_summary['total_cycles']:.0f} cycles = {plan_summary['time_us']:.2f} µs; "
          f"simulated: {summary['total_cycles']:.0f} cycles = {summary['time_us']:.2f} µs "
          f"(plan/simulated {plan_summary['total_cycles'] / summary['total_cycles']:.0%})")
    if args.output:
        views = [make_view(f"plan ({what})", plan_summary, moved, by="pipe"),
                 make_view(f"simulated {run_dir.name}", summary, events, by="pipe")]
        render(views, Path(args.output))
        print(f"wrote {args.output}")
    return 0


def _run_parsers(sub: Any) -> None:
    """``run``, ``gen-data`` and ``check``."""
    p = sub.add_parser("run", help="run one config: output, golden check, summary")
    _config_args(p)
    p.add_argument("--inputs", help="directory with q.npy/k.npy/v.npy or q.bin/kt.bin/v.bin (fp16)")
    p.add_argument("--out", help="run directory (default: a new runs/<case>-<time>)")
    p.add_argument("--no-numerics", action="store_true", help="timing only: skip the arithmetic")
    p.add_argument("--no-event-log", action="store_true", help="do not write events.csv, trace.json (large runs)")
    p.add_argument("--fold", action="store_true", help="with --no-numerics: estimate the time of a long unmasked "
                   "run from short samples (no event log; README \"Decode\")")
    p.add_argument("--mask", help=".npy boolean mask (True = masked), S0×S1 or [batch, heads, S0, S1]")
    p.add_argument("--intermediate-check", action="store_true",
                   help="dump every stage's output per block and tile to RUN/dumps/ (then: tfa-sim check RUN)")
    p.add_argument("--blocks", help="with --intermediate-check: dump only blocks a:b")
    p.add_argument("--tiles", help="with --intermediate-check: dump only logical tiles a:b")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("gen-data", help="write a case's reference inputs and golden as the kernel's .bin files")
    p.add_argument("case_or_config", help="reference case name or config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--out", required=True, help="directory to write")
    p.set_defaults(func=cmd_gen_data)
    p = sub.add_parser("check", help="compare a run's intermediate dumps with the model or a golden directory")
    p.add_argument("run_dir")
    p.add_argument("--golden", help="directory of raw .bin files in the reference generator's layout")
    p.add_argument("--eps", type=float, default=1e-3, help="the kernel rule's eps (default 1e-3; exp_max 1e-2)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default eps)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default eps)")
    p.add_argument("--stage", action="append", help="only these stages or dumps, e.g. compute_p or qk,pv")
    p.set_defaults(func=cmd_check)


def _explore_parsers(sub: Any) -> None:
    """``sweep``, ``sweep-report``, ``timeline``, ``plan`` and ``calibrate``."""
    p = sub.add_parser("sweep", help="run a schedule exploration (resumable; local processes or dask)")
    p.add_argument("file", help="sweep TOML: [base] config, [axes], optional [sweep]")
    p.add_argument("--out", help="output directory (default runs/sweep-<file>); rerunning resumes it")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: all cores); each point runs in a worker, which dies with "
                   "the sweep")
    p.add_argument("--executor", choices=("local", "dask"), default="local")
    p.add_argument("--scheduler", help="dask scheduler address, reached within 5 s (default: a LocalCluster of "
                   "--jobs workers)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="report without plots (sweep-report DIR draws them)")
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("sweep-report", help="rank a sweep's points, Pareto fronts, plots (no simulation)")
    p.add_argument("dir")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=cmd_sweep_report)
    p = sub.add_parser("timeline", help="Gantt chart of a run (.svg/.png/.html); --compare stacks runs")
    p.add_argument("run_dirs", nargs="*", help="run directory (from tfa-sim run --out)")
    p.add_argument("--compare", nargs="+", metavar="RUN", help="stack these runs on one time axis")
    p.add_argument("-o", "--output", help="output file .svg, .png or .html (default RUN_DIR/timeline.svg)")
    p.add_argument("--cores", help="cores to show, e.g. 0,2,5-7")
    p.add_argument("--tiles", help="logical tiles a:b to show (a ≤ t < b)")
    p.add_argument("--by", choices=("pipe", "stage", "unit"), help="lanes per pipe, per stage band, or per unit")
    p.add_argument("--arrows", action="store_true", help="draw FIFO hand-offs between units")
    p.set_defaults(func=cmd_timeline)
    p = sub.add_parser("plan", help="ideal list schedule of a run's task graph, compared with the simulation")
    p.add_argument("run_dir")
    p.add_argument("--resources", choices=("unlimited", "pipes"), default="unlimited",
                   help="unlimited: dependencies only; pipes: one server per pipe (see --units)")
    p.add_argument("--units", help="servers per pipe kind with --resources pipes, e.g. cube.M=2,vec.V=2")
    p.add_argument("-o", "--output", help="plan vs simulated Gantt (.svg/.png/.html)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("calibrate", help="fit the timing model's free parameters to measured kernel times")
    p.add_argument("--points", help="CSV of measured points (default: the shipped set, docs/calibration.md)")
    p.add_argument("--exclude", type=int, action="append", default=[], metavar="ROW",
                   help="leave out data row ROW (1 = the first point; repeatable)")
    p.add_argument("--leave-one-out", action="store_true",
                   help="also refit once per point without it and report each point's out-of-sample error")
    p.add_argument("--jobs", type=int, default=2, help="processes for --leave-one-out (default 2)")
    p.add_argument("--out", help="directory for report and fitted presets (default: runs/calibration-<time>)")
    p.add_argument("--write-presets", action="store_true",
                   help="also overwrite the shipped presets in configs/hw/ (developers)")
    p.set_defaults(func=cmd_calibrate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfa-sim", description="Simulate the tiled FlashAttention kernel of "
                                     "Ascend A2/A3 NPUs: bit-accurate outputs and schedule timing.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parsers(sub)
    _explore_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except TfaError as exc:
        print(f"tfa-sim: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tfa-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
