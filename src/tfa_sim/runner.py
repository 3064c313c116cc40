"""``tfa-sim run``: config → inputs → kernel → golden comparison → run directory."""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.backends import get_backend
from tfa_sim.compare import compare
from tfa_sim.config import Config
from tfa_sim.engine.chip import simulate
from tfa_sim.engine.program import Numerics
from tfa_sim.engine.report import format_timing, timing_summary
from tfa_sim.errors import InputError
from tfa_sim.golden import kernel_golden, reference_attention
from tfa_sim.hardware import load_hardware
from tfa_sim.inputs import Inputs, generate_inputs, load_inputs
from tfa_sim.outputs import new_run_dir, write_events, write_json, write_npy


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("tfa-sim", "numpy", "simpy", "cffi"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


@dataclass
class RunResult:
    out_dir: Path
    o: np.ndarray | None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True unless numerics ran and the output failed the comparison rule."""
        golden = self.summary.get("golden")
        return golden is None or golden["passed"]


def get_inputs(config: Config, inputs_dir: str | None) -> tuple[Inputs, str]:
    if inputs_dir:
        return load_inputs(inputs_dir, config), str(inputs_dir)
    return generate_inputs(config), f"generated (reference generator, seed {config.numerics.seed})"


def run(config: Config, inputs_dir: str | None = None, out_dir: str | None = None,
        event_log: bool = True) -> RunResult:
    """Simulate one config; write ``o.npy`` (numerics on), ``summary.json`` and ``events.csv``."""
    hw = load_hardware(config.hardware)
    numerics = None
    summary: dict[str, Any] = {"case": config.name, "hardware": hw.name}
    if config.numerics.enabled:
        inputs, source = get_inputs(config, inputs_dir)
        backend = get_backend(config.numerics.backend, config.numerics.exp_model)
        c = config.case
        numerics = Numerics(backend, inputs, np.zeros((c.batch, c.heads, c.s0, c.head), np.float32))
        summary.update(backend=backend.name, exp_model=config.numerics.exp_model, inputs=source)
    elif inputs_dir:
        raise InputError("--inputs needs numerics: drop --no-numerics (numerics.enabled=false) or --inputs")
    sim = simulate(config, hw, numerics, log_events=event_log)
    summary.update(timing_summary(sim, config))
    if numerics is not None:
        vs_fp64 = compare(numerics.out, reference_attention(numerics.inputs, config))
        vs_kernel = compare(numerics.out, kernel_golden(numerics.inputs, config).o)
        summary["golden"] = {"passed": vs_fp64.passed, "rule": "KERNEL.md §5, eps 1e-3",
                             "vs_reference_fp64": vs_fp64.to_dict(), "vs_kernel_golden": vs_kernel.to_dict()}
    summary.update(config=config.to_dict(), versions=versions())
    path = Path(out_dir) if out_dir else new_run_dir(config.name)
    path.mkdir(parents=True, exist_ok=True)
    if numerics is not None:
        write_npy(path / "o.npy", numerics.out)
    if sim.stats.events is not None:
        write_events(path / "events.csv", sim.stats.events)
    write_json(path / "summary.json", summary)
    return RunResult(path, numerics.out if numerics else None, summary)


def format_summary(result: RunResult) -> str:
    s = result.summary
    lines = [f"tfa-sim run: {s['case']} on {s['hardware']}"
             + (f"  backend={s['backend']}  exp={s['exp_model']}" if "backend" in s else "  (timing only)")]
    lines += format_timing(s)
    if "golden" in s:
        g = s["golden"]["vs_reference_fp64"]
        verdict = "PASS" if result.passed else "FAIL"
        lines.append(f"  golden (fp64, kernel rule eps=1e-3): {verdict}  failures {g['failures']}/"
                     f"{g['allowed_failures']} allowed  max abs {g['max_abs_err']:.3g}  max rel {g['max_rel_err']:.3g}")
    lines.append(f"  wrote {result.out_dir}/ (summary.json" + (", o.npy" if result.o is not None else "")
                 + (", events.csv)" if (result.out_dir / "events.csv").exists() else ")"))
    return "\n".join(lines)
