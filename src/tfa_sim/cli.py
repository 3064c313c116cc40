"""``tfa-sim`` command line.  Errors print one line and exit 2 (bad input) or 3 (schedule)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfa_sim.config import Config, load_config
from tfa_sim.errors import TfaError


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
    if args.hw:
        is_file = args.hw.endswith(".toml") or Path(args.hw).exists()
        overrides.append(f'hardware.{"file" if is_file else "preset"}="{args.hw}"')
    if args.backend:
        overrides.append(f'numerics.backend="{args.backend}"')
    return load_config(getattr(args, "config", None), args.case, overrides)


def cmd_run(args: argparse.Namespace) -> int:
    from tfa_sim.runner import format_summary, run

    result = run(_config_from(args), args.inputs, args.out, event_log=not args.no_event_log)
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
    kernel_golden(inputs, config).write(out)
    print(f"tfa-sim gen-data: {config.name} → {out} (inputs and kernel-ordered golden, raw .bin)")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tfa_sim.calibrate import fit, format_report, load_points, write_presets
    from tfa_sim.outputs import new_run_dir, write_json

    points = load_points(args.points) if args.points else load_points()
    print(f"tfa-sim calibrate: fitting to {len(points)} measured points (a few minutes)…", flush=True)
    result = fit(points)
    out = Path(args.out) if args.out else new_run_dir("calibration")
    (out / "hw").mkdir(parents=True, exist_ok=True)
    report = format_report(result)
    (out / "report.txt").write_text(report + "\n")
    write_json(out / "calibration.json", {k: v for k, v in result.items() if k != "presets"})
    written = write_presets(result, out / "hw")
    if args.write_presets:
        written += write_presets(result, None)
    print(report)
    print(f"wrote {out}/report.txt, calibration.json and fitted presets: {', '.join(str(p) for p in written)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfa-sim", description="Simulate the tiled FlashAttention kernel of "
                                     "Ascend A2/A3 NPUs: bit-accurate outputs and schedule timing.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one config: output, golden check, summary")
    _config_args(p)
    p.add_argument("--inputs", help="directory with q.npy/k.npy/v.npy or q.bin/kt.bin/v.bin (fp16)")
    p.add_argument("--out", help="run directory (default: a new runs/<case>-<time>)")
    p.add_argument("--no-numerics", action="store_true", help="timing only: skip the arithmetic")
    p.add_argument("--no-event-log", action="store_true", help="do not write events.csv (large runs)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("gen-data", help="write a case's reference inputs and golden as the kernel's .bin files")
    p.add_argument("case_or_config", help="reference case name or config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--out", required=True, help="directory to write")
    p.set_defaults(func=cmd_gen_data)
    p = sub.add_parser("calibrate", help="fit the timing model's free parameters to measured kernel times")
    p.add_argument("--points", help="CSV of measured points (default: the shipped HARDWARE.md calibration set)")
    p.add_argument("--out", help="directory for report and fitted presets (default: runs/calibration-<time>)")
    p.add_argument("--write-presets", action="store_true",
                   help="also overwrite the shipped presets in configs/hw/ (developers)")
    p.set_defaults(func=cmd_calibrate)
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
