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
from tfa_sim.functional import run_functional
from tfa_sim.golden import kernel_golden, reference_attention
from tfa_sim.inputs import Inputs, generate_inputs, load_inputs
from tfa_sim.outputs import new_run_dir, write_json, write_npy


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
    o: np.ndarray
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.summary["golden"]["passed"]


def get_inputs(config: Config, inputs_dir: str | None) -> tuple[Inputs, str]:
    if inputs_dir:
        return load_inputs(inputs_dir, config), str(inputs_dir)
    return generate_inputs(config), f"generated (reference generator, seed {config.numerics.seed})"


def run(config: Config, inputs_dir: str | None = None, out_dir: str | None = None) -> RunResult:
    """Execute one run and write ``o.npy`` and ``summary.json``."""
    inputs, source = get_inputs(config, inputs_dir)
    backend = get_backend(config.numerics.backend, config.numerics.exp_model)
    o, _ = run_functional(backend, config, inputs)
    vs_fp64 = compare(o, reference_attention(inputs, config))
    vs_kernel = compare(o, kernel_golden(inputs, config).o)
    path = Path(out_dir) if out_dir else new_run_dir(config.name)
    path.mkdir(parents=True, exist_ok=True)
    summary = {
        "case": config.name,
        "backend": backend.name,
        "exp_model": config.numerics.exp_model,
        "inputs": source,
        "golden": {"passed": vs_fp64.passed, "rule": "KERNEL.md §5, eps 1e-3",
                   "vs_reference_fp64": vs_fp64.to_dict(), "vs_kernel_golden": vs_kernel.to_dict()},
        "config": config.to_dict(),
        "versions": versions(),
    }
    write_npy(path / "o.npy", o)
    write_json(path / "summary.json", summary)
    return RunResult(path, o, summary)


def format_summary(result: RunResult) -> str:
    s = result.summary
    g = s["golden"]["vs_reference_fp64"]
    verdict = "PASS" if result.passed else "FAIL"
    return "\n".join([
        f"tfa-sim run: {s['case']}  backend={s['backend']}  exp={s['exp_model']}",
        f"  golden (fp64, kernel rule eps=1e-3): {verdict}  failures {g['failures']}/{g['allowed_failures']} allowed"
        f"  max abs {g['max_abs_err']:.3g}  max rel {g['max_rel_err']:.3g}",
        f"  wrote {result.out_dir / 'o.npy'}, {result.out_dir / 'summary.json'}",
    ])
