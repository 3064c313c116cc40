"""``tfa_sim.calibrate``: the timing model's fit to measured launches, or (``check=True``) the presets beside them.

What ``tfa-sim calibrate`` runs (docs/guide/calibration.md, docs/calibration.md); the command calls this and prints its
report.  Nothing is written unless asked for: ``out`` (a directory, or True: a new ``runs/calibration-<time>``)
receives the report, the JSON record and (a fit) the fitted presets; ``write_presets`` also overwrites the
shipped presets in configs/hw/ (developers).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfa_sim.spec.errors import InputError


@dataclass
class CalibrationResult:
    """A calibration's ``report`` (the text the command prints), ``record`` (calibration.json's or, with check,
    check.json's content), ``presets`` (the preset files written), ``out_dir`` (None: nothing written) and, for a
    fit, the fitted ``values`` (preset key → value)."""

    report: str
    record: dict[str, Any]
    out_dir: Path | None
    presets: list[Path] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"CalibrationResult(values={self.values}, out_dir={self.out_dir})"


def _directory(out: str | Path | bool | None, kind: str) -> Path | None:
    from tfa_sim.rundir.outputs import new_run_dir

    if out is None or out is False:
        return None
    directory = new_run_dir(kind) if out is True else Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _write(directory: Path | None, name: str, report: str, json_name: str, record: dict[str, Any]) -> None:
    from tfa_sim.rundir.directory import atomic_write
    from tfa_sim.rundir.outputs import write_json

    if directory is not None:
        atomic_write(directory / name, lambda f: f.write((report + "\n").encode("utf-8")))
        write_json(directory / json_name, record)


def calibrate(points: Sequence[str | Path] = (), *, profiles: str | Path | None = None, kernel: str | None = None,
              exclude: Sequence[int] = (), check: bool = False, out: str | Path | bool | None = None,
              write_presets: bool = False, echo: Callable[[str], Any] | None = None) -> CalibrationResult:
    """Fit the timing model's free parameters to measured points (``points``: CSV files, default the shipped
    sets unless ``profiles`` is given; ``profiles``: a LIST of board profiles, each a point of timing task;
    ``kernel``: only that build's points; ``exclude``: data rows left out, 1 = the first), cross-validated by
    leaving each shape out; or with ``check`` fit nothing and set each point beside the presets' prediction and
    its 90 % interval.  ``echo`` receives the progress lines the command prints."""
    from tfa_sim.explore.calibrate import builds
    from tfa_sim.explore.profile_points import calibration_points

    if check and write_presets:
        raise InputError("--check fits nothing, so it writes no presets: drop --write-presets, or --check to fit")
    chosen, profiled = calibration_points([str(p) for p in points], list(exclude), kernel,
                                          None if profiles is None else str(profiles))
    kinds = ", ".join(builds(chosen))
    say = echo or (lambda line: None)
    if check:
        return _check(chosen, kinds, out, say)
    return _fit(chosen, profiled, kinds, out, write_presets, say)


def _check(points: list[Any], kinds: str, out: str | Path | bool | None, say: Callable[[str], Any]
           ) -> CalibrationResult:
    """The presets against the points, no fit (tfa_sim.explore.check_points)."""
    from tfa_sim.explore.check_points import check_points, check_record, format_check

    say(f"tfa-sim calibrate --check: the presets against {len(points)} measured points of the builds {kinds}…")
    rows = check_points(points)
    report, record = format_check(rows), check_record(rows)
    directory = _directory(out, "calibration-check")
    _write(directory, "check.txt", report, "check.json", record)
    return CalibrationResult(report, record, directory)


def _fit(points: list[Any], profiled: list[Any], kinds: str, out: str | Path | bool | None, write_presets: bool,
         say: Callable[[str], Any]) -> CalibrationResult:
    """The fit, its cross-validation and sensitivity, and the presets it makes."""
    from tfa_sim.explore.calibrate import (
        Simulator,
        calibration_record,
        cross_validate,
        fit,
        format_report,
        half_width,
        sensitivity,
    )
    from tfa_sim.explore.calibrate import write_presets as write
    from tfa_sim.explore.profile_points import pipes_beside

    say(f"tfa-sim calibrate: fitting to {len(points)} measured points of the builds {kinds}…")
    sim = Simulator()
    result = fit(points, sim)
    say(f"tfa-sim calibrate: fitted in {result.seconds:.1f} s; cross-validating (each shape left out)…")
    held_out = cross_validate(points, sim)
    sens = sensitivity(result, sim)
    width = half_width(points, held_out)
    report = format_report(result, held_out, sens) + pipes_beside(result, profiled)
    record = calibration_record(result, held_out, sens)
    directory = _directory(out, "calibration")
    _write(directory, "report.txt", report, "calibration.json", record)
    note = (f"tfa-sim calibrate, {len(points)} points of the builds {kinds}, in-sample MAPE "
            f"{result.mape:.1%}, held-out MAPE {float(abs(held_out / result.measured - 1).mean()):.1%}")
    written = write(result, width, directory, note) if directory is not None else []
    if write_presets:
        written += write(result, width, None, note)
    return CalibrationResult(report, record, directory, written, dict(result.values))
