"""The error kinds tfa-sim reports, each with its exit code (docs/guide/exit-codes.md).

:class:`TfaSimError` is the one exception type of the library (``tfa_sim.TfaSimError``): the command prints
its message as one line and exits with its code.
"""
from __future__ import annotations


class TfaSimError(Exception):
    """Base class: a one-line message for the user and the command's exit code."""

    exit_code = 2


class InputError(TfaSimError):
    """Bad input: config key, tiling, file, data.  Exit code 2."""

    exit_code = 2


class ScheduleError(TfaSimError):
    """Deadlock or buffer/flag hazard found while simulating.  Exit code 3."""

    exit_code = 3
