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
native run 0.437 → 0.403 s, 7 alternated runs), unless the user set ``OPENBLAS_NUM_THREADS`` or
``MKL_NUM_THREADS``.  :func:`blas_threads` then has nothing to do for the default of one thread, and raises
the count where the config asks for more.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: The BLAS thread count this process started with when :func:`start_single_threaded` set it (None: unknown).
_started_with: int | None = None


@contextmanager
def blas_threads(threads: int) -> Iterator[None]:
    """Limit the BLAS libraries loaded in this process to ``threads`` threads inside the ``with`` block
    (nothing to do when the process started with that many: threadpoolctl's look at the loaded libraries
    costs 2–5 ms a call)."""
    if threads == _started_with:
        yield
        return
    from threadpoolctl import threadpool_limits  # only runs with numerics pay for importing it

    with threadpool_limits(limits=threads, user_api="blas"):
        yield


#: The variables OpenBLAS and MKL read for their thread count when they are loaded.
START_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def start_single_threaded() -> None:
    """Have the BLAS that numpy loads start with one thread, unless the user's environment says otherwise
    (for a process of its own only: it changes ``os.environ``, and acts only before numpy is imported)."""
    global _started_with
    if "numpy" in sys.modules or any(var in os.environ for var in START_THREADS):
        return
    for var in START_THREADS:
        os.environ[var] = "1"
    _started_with = 1
