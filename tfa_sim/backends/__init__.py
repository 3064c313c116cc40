"""Stage-kernel backends: the same tile kernels in numpy and in native C.

A backend turns one tile into the next with the kernel's rounding points
(``tfa_sim.numerics.rounding``).  Both backends are bit-identical for the ``tfa`` exp
model and for the ``cpu_sim`` reference; ``get_backend`` is the one place that chooses between them.
"""
from __future__ import annotations

from tfa_sim.backends.interface import Backend
from tfa_sim.spec.errors import InputError

BACKENDS = ("numpy", "native")


def get_backend(name: str, exp_model: str = "tfa", reference: str = "npu") -> Backend:
    """Return the backend called ``name`` using exp model ``exp_model`` and the orders of ``reference``
    (``numerics.reference``: "npu" or "cpu_sim", which brings CPU_SIM's exp with it)."""
    if name == "numpy":
        from tfa_sim.backends.numpy_backend import NumpyBackend

        return NumpyBackend(exp_model, reference)
    if name == "native":
        from tfa_sim.backends.native_backend import NativeBackend

        return NativeBackend(exp_model, reference)
    raise InputError(f"numerics.backend={name!r} is not a backend; use one of {', '.join(BACKENDS)}")
