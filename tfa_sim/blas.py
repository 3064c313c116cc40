"""BLAS threads for the numerics: a number chosen by the config, not OpenBLAS's one thread per core.

The numerics' matmuls (numpy backend, goldens, the fp64 reference) are small per call — one tile of
128×128×128 at a time — so BLAS worker threads cost more in wake-ups than they bring: with OpenBLAS's
default of one thread per core an S0=512 S1=8192 numpy-backend run measured 1.53× slower than with one.
Sweep workers, each a process, would also multiply their BLAS threads past the cores.  So every entry
point of the numerics runs inside :func:`blas_threads` with ``numerics.blas_threads`` (default 1).
threadpoolctl finds the BLAS that numpy actually loaded (OpenBLAS, MKL, BLIS…) and restores its setting
on the way out, so library callers of tfa_sim keep theirs.

The ``tfa-sim`` command also starts OpenBLAS (or MKL) with one thread (:func:`start_single_threaded`, before
numpy is imported): a pool of one thread per core is created at import and its idle threads spin for a while
after each call, taking a CPU from the goldens' forked child and the numerics workers (S0 = 512, S1 = 8192
native run 0.437 → 0.403 s, 7 alternated runs).  :func:`blas_threads` raises the count again where the config
asks for more.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def blas_threads(threads: int) -> Iterator[None]:
    """Limit the BLAS libraries loaded in this process to ``threads`` threads inside the ``with`` block."""
    from threadpoolctl import threadpool_limits  # ~10 ms to import: only runs with numerics pay for it

    with threadpool_limits(limits=threads, user_api="blas"):
        yield


#: The variables OpenBLAS and MKL read for their thread count when they are loaded.
START_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def start_single_threaded() -> None:
    """Have the BLAS that numpy loads start with one thread, unless the user's environment says otherwise
    (for a process of its own only: it changes ``os.environ``, and acts only before numpy is imported)."""
    for var in START_THREADS:
        os.environ.setdefault(var, "1")
