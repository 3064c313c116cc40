"""BLAS threads for the numerics: a number chosen by the config, not OpenBLAS's one thread per core.

The numerics' matmuls (numpy backend, goldens, the fp64 reference) are small per call — one tile of
128×128×128 at a time — so BLAS worker threads cost more in wake-ups than they bring: with OpenBLAS's
default of one thread per core an S0=512 S1=8192 numpy-backend run measured 1.53× slower than with one.
Sweep workers, each a process, would also multiply their BLAS threads past the cores.  So every entry
point of the numerics runs inside :func:`blas_threads` with ``numerics.blas_threads`` (default 1).
threadpoolctl finds the BLAS that numpy actually loaded (OpenBLAS, MKL, BLIS…) and restores its setting
on the way out, so library callers of tfa_sim keep theirs.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def blas_threads(threads: int) -> Iterator[None]:
    """Limit the BLAS libraries loaded in this process to ``threads`` threads inside the ``with`` block."""
    from threadpoolctl import threadpool_limits  # ~10 ms to import: only runs with numerics pay for it

    with threadpool_limits(limits=threads, user_api="blas"):
        yield
