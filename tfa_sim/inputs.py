"""Q, K, V for a run: the reference data generator, readers for .npy/.bin, validation.

Layouts (``case.dtype``: fp16 or bf16, row-major): q [batch, heads, S0, HEAD];
k and v [batch, kv_heads, S1, HEAD] — k is the kernel's ``kt.bin`` layout (rows
of K).  A bf16 ``.npy`` written by ``numpy.save`` from an ml_dtypes array holds
2-byte void elements; those are read as bf16 bit patterns.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tfa_sim.config import Config
from tfa_sim.errors import InputError
from tfa_sim.numerics import input_dtype, narrow

F16 = np.float16


@dataclass(frozen=True)
class Inputs:
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray


def shapes(config: Config) -> dict[str, tuple[int, ...]]:
    c = config.case
    return {"q": (c.batch, c.heads, c.s0, c.head), "k": (c.batch, c.kv_heads, c.s1, c.head),
            "v": (c.batch, c.kv_heads, c.s1, c.head)}


def _reference_draw(shape: tuple[int, ...], factor: float, dtype: str = "fp16") -> np.ndarray:
    """One tensor as the reference generator makes it: randn → fp16 → ×factor in fp16 → fp32 → fp16; for
    bf16 (which the generator has not): randn → fp32 → ×factor in fp32 → bf16, round to nearest even."""
    if dtype == "bf16":
        return narrow(np.random.randn(*shape).astype(np.float32) * np.float32(factor), input_dtype(dtype))
    x = np.random.randn(*shape).astype(F16) * F16(factor)
    return x.astype(np.float32).astype(F16)


def generate_inputs(config: Config) -> Inputs:
    """The reference data: ``numpy.random.seed(seed)``, then Q, K (HEAD×S1), V in that order.

    Only the first case after seeding matches the reference files (the reference
    generator shares one stream across the cases of a call).
    """
    c = config.case
    np.random.seed(config.numerics.seed)
    q = _reference_draw((c.batch, c.heads, c.s0, c.head), 1.5, c.dtype)
    k_hs = _reference_draw((c.batch, c.kv_heads, c.head, c.s1), 1.5, c.dtype)
    v = _reference_draw((c.batch, c.kv_heads, c.s1, c.head), 1.2, c.dtype)
    return Inputs(q, np.ascontiguousarray(np.swapaxes(k_hs, -1, -2)), v)


def validate(inputs: Inputs, config: Config) -> Inputs:
    """Check dtype, shape and finiteness; NaN/Inf are rejected (README, "Numerics")."""
    want, dtype = shapes(config), config.case.dtype
    for name in ("q", "k", "v"):
        a = getattr(inputs, name)
        if a.dtype != input_dtype(dtype):
            raise InputError(f"input {name} has dtype {a.dtype}; this config takes {dtype} Q/K/V (case.dtype): "
                             f"convert the data or set case.dtype")
        if a.shape != want[name]:
            raise InputError(f"input {name} has shape {a.shape}, expected {want[name]} for this config")
        bad = ~np.isfinite(a)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InputError(f"input {name} holds {int(bad.sum())} NaN/Inf values (first at {idx}); "
                             f"tfa-sim rejects non-finite inputs, clean the data first")
    return inputs


def _read_npy(path: Path, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    if dtype == "bf16" and a.dtype == np.dtype("V2"):  # what numpy.save writes for an ml_dtypes bfloat16 array
        a = a.view(input_dtype(dtype))
    if a.ndim == 2 and shape[0] == shape[1] == 1:
        a = a.reshape(shape) if a.shape == shape[2:] else a
    return a


def _read_bin(path: Path, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"{path} not found; --inputs needs q.npy/k.npy/v.npy or q.bin/kt.bin/v.bin")
    want = int(np.prod(shape)) * 2
    got = path.stat().st_size
    if got != want:
        raise InputError(f"{path} has {got} bytes, expected {want} ({dtype} {shape}); check the config's shape")
    return np.fromfile(path, dtype=input_dtype(dtype)).reshape(shape)


def load_inputs(directory: str | Path, config: Config) -> Inputs:
    """Read ``q.npy``/``k.npy``/``v.npy`` or, when none exist, the raw ``q.bin``/``kt.bin``/``v.bin``."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"--inputs {d} is not a directory")
    want, dt = shapes(config), config.case.dtype
    npy = {n: d / f"{n}.npy" for n in ("q", "k", "v")}
    if any(p.exists() for p in npy.values()):
        missing = [str(p) for p in npy.values() if not p.exists()]
        if missing:
            raise InputError(f"--inputs {d}: {', '.join(missing)} missing (need all of q.npy, k.npy, v.npy)")
        arrays = {n: _read_npy(p, want[n], dt) for n, p in npy.items()}
    else:
        arrays = {"q": _read_bin(d / "q.bin", want["q"], dt), "k": _read_bin(d / "kt.bin", want["k"], dt),
                  "v": _read_bin(d / "v.bin", want["v"], dt)}
    return validate(Inputs(**arrays), config)


def write_input_bins(inputs: Inputs, directory: Path) -> None:
    """The reference generator's input files: q, k (HEAD×S1), kt (S1×HEAD), v, vt."""
    files = {"q": inputs.q, "k": np.swapaxes(inputs.k, -1, -2), "kt": inputs.k,
             "v": inputs.v, "vt": np.swapaxes(inputs.v, -1, -2)}
    for name, a in files.items():
        np.ascontiguousarray(a).tofile(directory / f"{name}.bin")
