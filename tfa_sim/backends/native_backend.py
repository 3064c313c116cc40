"""The stage kernels in native C (``native/tfa_native.c`` via cffi), bit-identical to numpy.

Same signatures, dtypes and shapes as :class:`~tfa_sim.backends.numpy_backend.NumpyBackend`;
every method returns fresh arrays.  Inputs may be non-contiguous views: they are
made C-contiguous in the kernel's dtype (``np.ascontiguousarray``), with no other
copies.  The extension ``tfa_sim._native`` is imported on first use.
"""
from __future__ import annotations

import importlib

import numpy as np

from tfa_sim.backends import PResult
from tfa_sim.errors import InputError

F16 = np.float16
F32 = np.float32

#: exp_model name → the kernels' ``exp_model`` code (tfa_native.h).
EXP_MODEL_CODES = {"tfa": 0, "libm": 1}

_NOT_BUILT = ("native backend not built: reinstall with `pip install .` on a machine with a C "
              "compiler, or use --backend numpy")


def _native():
    """The cffi module ``tfa_sim._native`` (``ffi``, ``lib``), or InputError if not built."""
    try:
        return importlib.import_module("tfa_sim._native")
    except ImportError as exc:
        raise InputError(_NOT_BUILT) from exc


def _model_code(exp_model: str) -> int:
    try:
        return EXP_MODEL_CODES[exp_model]
    except KeyError:
        raise InputError(f"numerics.exp_model={exp_model!r} is not an exp model; use one of "
                         f"{', '.join(EXP_MODEL_CODES)}") from None


def _ptr(ffi, ctype: str, a: np.ndarray):
    """A C pointer of type ``ctype`` to the (C-contiguous) buffer of ``a``."""
    return ffi.cast(ctype, ffi.from_buffer(a, require_writable=False))


def _f16(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=F16)


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=F32)


class NativeBackend:
    """C implementation of the stage kernels; matches NumpyBackend bit for bit (tfa exp)."""

    name = "native"

    def __init__(self, exp_model: str = "tfa") -> None:
        self.exp_model = exp_model
        self._model = _model_code(exp_model)
        mod = _native()
        self._ffi, self._lib = mod.ffi, mod.lib

    def compute_qk(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        q16, k16 = _f16(q), _f16(k)
        m, head = q16.shape
        n, head_k = k16.shape
        if head_k != head:
            raise ValueError(f"compute_qk: q is {q16.shape}, k is {k16.shape}; HEAD differs")
        out = np.empty((m, n), F32)
        ffi = self._ffi
        self._lib.tfa_compute_qk(_ptr(ffi, "uint16_t *", q16), _ptr(ffi, "uint16_t *", k16),
                                 m, n, head, _ptr(ffi, "float *", out))
        return out

    def compute_p(self, x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None,
                  scale: np.float32) -> PResult:
        if (m_prev is None) != (l_prev is None):
            raise ValueError("compute_p: m_prev and l_prev are both None (first tile) or both given")
        x32 = _f32(x)
        rows, cols = x32.shape
        first = m_prev is None
        m = np.empty(rows, F32) if first else np.array(m_prev, dtype=F32, copy=True)
        l = np.empty(rows, F32) if first else np.array(l_prev, dtype=F32, copy=True)
        l1_exp_max = np.empty(rows, F32)
        x_exp = np.empty((rows, cols), F16)
        ffi = self._ffi
        self._lib.tfa_compute_p(_ptr(ffi, "float *", x32), rows, cols, float(F32(scale)), int(first),
                                self._model, _ptr(ffi, "float *", m), _ptr(ffi, "float *", l),
                                _ptr(ffi, "float *", l1_exp_max), _ptr(ffi, "uint16_t *", x_exp))
        return PResult(x_exp, l1_exp_max, m, l)

    def compute_pv(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        p16, v16 = _f16(p), _f16(v)
        m, t = p16.shape
        t_v, n = v16.shape
        if t_v != t:
            raise ValueError(f"compute_pv: p is {p16.shape}, v is {v16.shape}; T differs")
        out = np.empty((m, n), F32)
        ffi = self._ffi
        self._lib.tfa_compute_pv(_ptr(ffi, "uint16_t *", p16), _ptr(ffi, "uint16_t *", v16),
                                 m, t, n, _ptr(ffi, "float *", out))
        return out

    def compute_gu(self, o: np.ndarray | None, pv: np.ndarray, l1_exp_max: np.ndarray) -> np.ndarray:
        pv32 = _f32(pv)
        rows, cols = pv32.shape
        ffi = self._ffi
        if o is None:
            out = np.empty((rows, cols), F32)
            self._lib.tfa_compute_gu(_ptr(ffi, "float *", out), _ptr(ffi, "float *", pv32), ffi.NULL,
                                     rows, cols, 1)
            return out
        out = np.array(o, dtype=F32, order="C", copy=True)  # the kernel updates in place
        g = _f32(l1_exp_max)
        self._lib.tfa_compute_gu(_ptr(ffi, "float *", out), _ptr(ffi, "float *", pv32),
                                 _ptr(ffi, "float *", g), rows, cols, 0)
        return out

    def normalize(self, o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
        out = np.array(o, dtype=F32, order="C", copy=True)  # the kernel divides in place
        rows, cols = out.shape
        l32 = _f32(l2_global_sum)
        ffi = self._ffi
        self._lib.tfa_normalize(_ptr(ffi, "float *", out), _ptr(ffi, "float *", l32), rows, cols)
        return out


def native_exp(x: np.ndarray, model: str = "tfa") -> np.ndarray:
    """exp of an fp32 array with the native exp model ``model`` (same shape, fresh fp32)."""
    code = _model_code(model)
    mod = _native()
    x32 = _f32(x)
    out = np.empty(x32.shape, F32)
    mod.lib.tfa_exp(_ptr(mod.ffi, "float *", x32), _ptr(mod.ffi, "float *", out), x32.size, code)
    return out


def native_row_sum(x: np.ndarray) -> np.ndarray:
    """numerics.row_sum of a 2-D fp32 tile, in C."""
    mod = _native()
    x32 = _f32(x)
    rows, cols = x32.shape
    out = np.empty(rows, F32)
    mod.lib.tfa_row_sum(_ptr(mod.ffi, "float *", x32), rows, cols, _ptr(mod.ffi, "float *", out))
    return out


def native_to_fp16(x: np.ndarray) -> np.ndarray:
    """numerics.to_fp16 in C: fp32 → fp16, round to nearest even (same shape)."""
    mod = _native()
    x32 = _f32(x)
    out = np.empty(x32.shape, F16)
    mod.lib.tfa_to_fp16(_ptr(mod.ffi, "float *", x32), _ptr(mod.ffi, "uint16_t *", out), x32.size)
    return out
