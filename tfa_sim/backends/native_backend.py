"""The stage kernels in native C (``native/tfa_native.c`` via cffi), bit-identical to numpy.

Same signatures, dtypes and shapes as :class:`~tfa_sim.backends.numpy_backend.NumpyBackend`;
every method returns fresh arrays.  Inputs may be non-contiguous views: they are
made C-contiguous in the kernel's dtype (``np.ascontiguousarray``), with no other
copies (``combine`` stacks its parts into one buffer).  fp16 and bf16 travel as
uint16 bit patterns with an ``elem`` code.  The extension ``tfa_sim.backends._native`` is
imported on first use.
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from tfa_sim.backends.interface import PResult, check_models, combine_parts, p_options
from tfa_sim.numerics import rounding as nx
from tfa_sim.spec.errors import InputError

F16 = np.float16
F32 = np.float32

#: exp model name → the kernels' ``exp_model`` code (tfa_native.h); "cpu_sim" is the cpu_sim reference's.
EXP_MODEL_CODES = {"tfa": 0, "libm": 1, "cpu_sim": 2}
#: numerics.reference → the kernels' ``reference`` code (tfa_native.h).
REFERENCE_CODES = {"npu": 0, "cpu_sim": 1}
#: narrow dtype → ``enum tfa_elem`` (tfa_native.h); keyed by dtype, not by its ``name``, which numpy computes
#: in Python on every access (a few µs, a thousand times a run).
ELEM_CODES = {np.dtype(F16): 0, nx.BF16: 1}
#: ``ffi.from_buffer`` types: one call makes the C pointer of a C-contiguous array (an array decays to a pointer;
#: ``ffi.cast`` of the buffer would be a second call) and keeps the array alive as long as the pointer.
F32_BUF, U16_BUF, U8_BUF = "float[]", "uint16_t[]", "uint8_t[]"

_NOT_BUILT = ("native backend not built: reinstall with `pip install .` on a machine with a C "
              "compiler, or use --backend numpy")


def _native():
    """The cffi module ``tfa_sim.backends._native`` (``ffi``, ``lib``), or InputError if not built."""
    try:
        return importlib.import_module("tfa_sim.backends._native")
    except ImportError as exc:
        raise InputError(_NOT_BUILT) from exc


def _model_code(exp_model: str) -> int:
    try:
        return EXP_MODEL_CODES[exp_model]
    except KeyError:
        raise InputError(f"numerics.exp_model={exp_model!r} is not an exp model; use one of "
                         f"{', '.join(EXP_MODEL_CODES)}") from None


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=F32)


def _check(status: int, what: str) -> None:
    """Raise for a non-zero ``enum tfa_status`` of kernel ``what``."""
    if status == 1:
        raise MemoryError(f"{what}: the native kernel could not allocate its scratch memory")
    if status != 0:
        raise ValueError(f"{what}: the native kernel rejected its arguments (status {status})")


def _elem_code(dtype: np.dtype) -> int:
    """``enum tfa_elem`` of fp16 or bf16."""
    return ELEM_CODES[np.dtype(dtype)]


def _operands(a, b) -> tuple[np.ndarray, np.ndarray, int]:
    """Both matmul operands C-contiguous in their shared narrow dtype (fp16 or bf16 bits for the kernel's
    uint16_t arguments) and its elem code."""
    dt = nx.operand_dtype(a, b)
    return np.ascontiguousarray(a, dtype=dt), np.ascontiguousarray(b, dtype=dt), _elem_code(dt)


class NativeBackend:
    """C implementation of the stage kernels; matches NumpyBackend bit for bit (tfa exp, or cpu_sim)."""

    name = "native"

    def __init__(self, exp_model: str = "tfa", reference: str = "npu") -> None:
        self.exp_model, self.reference = check_models(exp_model, reference)
        self._model = _model_code("cpu_sim" if reference == "cpu_sim" else exp_model)
        self._reference = REFERENCE_CODES[reference]
        mod = _native()
        self._lib, self._buf, self._null = mod.lib, mod.ffi.from_buffer, mod.ffi.NULL

    def _acc(self, acc: np.ndarray | None, shape: tuple[int, int], what: str) -> Any:
        """The accumulator of a TMATMUL_ACC as a C pointer, NULL for a TMATMUL."""
        if acc is None:
            return self._null
        a = _f32(acc)
        if a.shape != shape:
            raise ValueError(f"{what}: the accumulator is {a.shape}, the product {shape}")
        return self._buf(F32_BUF, a)

    def compute_qk(self, q: np.ndarray, k: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
        q16, k16, elem = _operands(q, k)
        m, head = q16.shape
        n, head_k = k16.shape
        if head_k != head:
            raise ValueError(f"compute_qk: q is {q16.shape}, k is {k16.shape}; HEAD differs")
        out = np.empty((m, n), F32)
        buf = self._buf
        _check(self._lib.tfa_compute_qk(buf(U16_BUF, q16), buf(U16_BUF, k16), m, n, head, elem,
                                        self._acc(acc, (m, n), "compute_qk"), self._reference, buf(F32_BUF, out)),
               "compute_qk")
        return out

    def compute_p(self, x: np.ndarray, m_prev: np.ndarray | None, l_prev: np.ndarray | None,
                  scale: np.float32, mask: np.ndarray | None = None, softcap: float = 0.0,
                  out_dtype: Any = np.float16) -> PResult:
        opt = p_options(x, m_prev, l_prev, mask, softcap, out_dtype)
        x32 = _f32(x)
        rows, cols = x32.shape
        first = m_prev is None
        m = np.empty(rows, F32) if first else np.array(m_prev, dtype=F32, copy=True)
        l = np.empty(rows, F32) if first else np.array(l_prev, dtype=F32, copy=True)
        l1_exp_max = np.empty(rows, F32)
        x_exp = np.empty((rows, cols), opt.out_dtype)
        buf = self._buf
        mask_ptr = self._null if opt.mask is None else buf(U8_BUF, np.ascontiguousarray(opt.mask))
        _check(self._lib.tfa_compute_p(
            buf(F32_BUF, x32), mask_ptr, rows, cols, float(F32(scale)), float(opt.softcap), int(first),
            self._model, self._reference, _elem_code(opt.out_dtype), buf(F32_BUF, m), buf(F32_BUF, l),
            buf(F32_BUF, l1_exp_max), buf(U16_BUF, x_exp)), "compute_p")
        return PResult(x_exp, l1_exp_max, m, l)

    def compute_pv(self, p: np.ndarray, v: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
        p16, v16, elem = _operands(p, v)
        m, t = p16.shape
        t_v, n = v16.shape
        if t_v != t:
            raise ValueError(f"compute_pv: p is {p16.shape}, v is {v16.shape}; T differs")
        out = np.empty((m, n), F32)
        buf = self._buf
        _check(self._lib.tfa_compute_pv(buf(U16_BUF, p16), buf(U16_BUF, v16), m, t, n, elem,
                                        self._acc(acc, (m, n), "compute_pv"), self._reference, buf(F32_BUF, out)),
               "compute_pv")
        return out

    def compute_gu(self, o: np.ndarray | None, pv: np.ndarray, l1_exp_max: np.ndarray) -> np.ndarray:
        pv32 = _f32(pv)
        rows, cols = pv32.shape
        if o is None:
            out = np.empty((rows, cols), F32)
            self._lib.tfa_compute_gu(self._buf(F32_BUF, out), self._buf(F32_BUF, pv32), self._null, rows, cols, 1)
            return out
        out = np.array(o, dtype=F32, order="C", copy=True)  # the kernel updates in place
        self._lib.tfa_compute_gu(self._buf(F32_BUF, out), self._buf(F32_BUF, pv32),
                                 self._buf(F32_BUF, _f32(l1_exp_max)), rows, cols, 0)
        return out

    def normalize(self, o: np.ndarray, l2_global_sum: np.ndarray) -> np.ndarray:
        out = np.array(o, dtype=F32, order="C", copy=True)  # the kernel divides in place
        rows, cols = out.shape
        self._lib.tfa_normalize(self._buf(F32_BUF, out), self._buf(F32_BUF, _f32(l2_global_sum)), rows, cols)
        return out

    def combine(self, o_parts: Sequence[np.ndarray], m_parts: Sequence[np.ndarray],
                l_parts: Sequence[np.ndarray], scale: np.float32) -> np.ndarray:
        o, m, l = combine_parts(o_parts, m_parts, l_parts)  # fresh C-contiguous stacks
        n_parts, rows, cols = o.shape
        out = np.empty((rows, cols), F32)
        buf = self._buf
        _check(self._lib.tfa_combine(buf(F32_BUF, o), buf(F32_BUF, m), buf(F32_BUF, l), n_parts, rows, cols,
                                     float(F32(scale)), self._model, buf(F32_BUF, out)), "combine")
        return out


def native_exp(x: np.ndarray, model: str = "tfa") -> np.ndarray:
    """exp of an fp32 array with the native exp model ``model`` (same shape, fresh fp32)."""
    code = _model_code(model)
    mod = _native()
    x32 = _f32(x)
    out = np.empty(x32.shape, F32)
    mod.lib.tfa_exp(mod.ffi.from_buffer(F32_BUF, x32), mod.ffi.from_buffer(F32_BUF, out), x32.size, code)
    return out


def native_row_sum(x: np.ndarray) -> np.ndarray:
    """rounding.row_sum of a 2-D fp32 tile, in C."""
    mod = _native()
    x32 = _f32(x)
    rows, cols = x32.shape
    out = np.empty(rows, F32)
    mod.lib.tfa_row_sum(mod.ffi.from_buffer(F32_BUF, x32), rows, cols, mod.ffi.from_buffer(F32_BUF, out))
    return out


def native_tanh(x: np.ndarray) -> np.ndarray:
    """rounding.tanh_tfa of an fp32 array, in C (same shape, fresh fp32)."""
    mod = _native()
    x32 = _f32(x)
    out = np.empty(x32.shape, F32)
    mod.lib.tfa_tanh(mod.ffi.from_buffer(F32_BUF, x32), mod.ffi.from_buffer(F32_BUF, out), x32.size)
    return out


def native_narrow(x: np.ndarray, dtype: Any = F16) -> np.ndarray:
    """rounding.narrow in C: fp32 → fp16 or bf16, round to nearest even (same shape)."""
    dt = nx.check_out_dtype(dtype)
    mod = _native()
    x32 = _f32(x)
    out = np.empty(x32.shape, dt)
    _check(mod.lib.tfa_narrow(mod.ffi.from_buffer(F32_BUF, x32), mod.ffi.from_buffer(U16_BUF, out), x32.size,
                              _elem_code(dt)), "narrow")
    return out


def native_to_fp16(x: np.ndarray) -> np.ndarray:
    """rounding.to_fp16 in C: fp32 → fp16, round to nearest even (same shape)."""
    return native_narrow(x, F16)
