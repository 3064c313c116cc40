"""One simulated run of the TFA kernel: the stage programs (``tfa_sim.stages``) on the chip engine."""
from __future__ import annotations

from tfa_sim.config import Config
from tfa_sim.engine.chip import SimResult, run_chip
from tfa_sim.hardware import Hardware
from tfa_sim.stages.block_kernel import Numerics
from tfa_sim.stages.run_tfa import TfaKernel


def simulate(config: Config, hw: Hardware, numerics: Numerics | None = None, log_events: bool = True) -> SimResult:
    """Run the whole kernel once; fills ``numerics.out`` when numerics are on."""
    return run_chip(TfaKernel(config, hw, numerics), hw, log_events)
