"""tfa-sim as a library: the functions ``tfa_sim`` exports and the ``tfa-sim`` command calls, and the version."""

__version__ = "0.1.0"  # tfa_sim.__version__, the package's version (pyproject.toml reads it here)
