"""The error kinds tfa-sim reports, each with its exit code (README, "Exit codes")."""
from __future__ import annotations


class TfaError(Exception):
    """Base class: a one-line message for the user and an exit code."""

    exit_code = 2


class InputError(TfaError):
    """Bad input: config key, tiling, file, data.  Exit code 2."""

    exit_code = 2


class ScheduleError(TfaError):
    """Deadlock or buffer/flag hazard found while simulating.  Exit code 3."""

    exit_code = 3
