"""tfa-sim: a bit-accurate, timed simulator of the tiled FlashAttention (TFA) kernel of Ascend A2/A3 NPUs.

The command is ``tfa-sim`` (README.md, ``tfa-sim --help``); the same as a library (docs/guide/python-api.md)::

    import tfa_sim
    r = tfa_sim.run(case="case_float_H_128_S0_128_S1_1024", overrides={"schedule.qk_preload": 2})
    r.time_us, r.o, r.events.to_pandas(), r.timeline()

Bad arguments raise :class:`TfaSimError` with the line the command prints.  The names are imported when
first used: ``import tfa_sim`` stays light, and the command can set BLAS's threads before numpy loads.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tfa_sim.api import __version__

__all__ = ["CalibrationResult", "Config", "Events", "InputError", "ProfileResult", "Result", "ScheduleError",
           "TfaSimError", "TuneResult", "__version__", "calibrate", "check", "listing", "load_config", "profile",
           "roofline", "run", "sweep", "tune"]
#: Where each name of the API is defined.
_MODULES = {"tfa_sim.api.library": ("TuneResult", "check", "listing", "load_config", "profile", "roofline", "run",
                                     "sweep", "tune"),
            "tfa_sim.api.calibration": ("CalibrationResult", "calibrate"),
            "tfa_sim.api.result": ("Events", "ProfileResult", "Result"),
            "tfa_sim.spec.config": ("Config",), "tfa_sim.spec.errors": ("InputError", "ScheduleError", "TfaSimError")}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from tfa_sim.api.calibration import CalibrationResult, calibrate
    from tfa_sim.api.library import TuneResult, check, listing, load_config, profile, roofline, run, sweep, tune
    from tfa_sim.api.result import Events, ProfileResult, Result
    from tfa_sim.spec.config import Config
    from tfa_sim.spec.errors import InputError, ScheduleError, TfaSimError


def __getattr__(name: str) -> Any:
    """An API name, imported from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tfa_sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
