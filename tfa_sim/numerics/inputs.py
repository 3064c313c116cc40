"""Q, K, V for a run: the reference data generator, readers for .npy/.bin, validation.

Layouts (``case.dtype``: fp16 or bf16, row-major): q [batch, heads, S0, HEAD];
k and v [batch, kv_heads, S1, HEAD] — k is the kernel's ``kt.bin`` layout (rows
of K).  A bf16 ``.npy`` written by ``numpy.save`` from an ml_dtypes array holds
2-byte void elements; those are read as bf16 bit patterns.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tfa_sim.numerics.rounding import bf16_from_npy, input_dtype, narrow
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_path, load_npy, read_bytes

F16 = np.float16
#: The files ``--inputs DIR`` may hold: .npy (preferred) or the kernel's raw .bin, per tensor.
NPY_FILES = {"q": "q.npy", "k": "k.npy", "v": "v.npy"}
BIN_FILES = {"q": "q.bin", "k": "kt.bin", "v": "v.bin"}


@dataclass(frozen=True)
class Inputs:
    """Q, K, V and ``hashes``: sha256 of each file they were read from, or of each generated array (recorded in
    summary.json so that ``tfa-sim check`` can tell when the inputs changed after the run)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    hashes: dict[str, str] = field(default_factory=dict, compare=False)


def shapes(config: Config) -> dict[str, tuple[int, ...]]:
    c = config.case
    return {"q": (c.batch, c.heads, c.s0, c.head), "k": (c.batch, c.kv_heads, c.s1, c.head),
            "v": (c.batch, c.kv_heads, c.s1, c.head)}


def _reference_draw(shape: tuple[int, ...], factor: float, dtype: str = "fp16", rows_last: bool = False) -> np.ndarray:
    """One tensor as the reference generator makes it: randn → fp16 → ×factor in fp16 → fp32 → fp16; for
    bf16 (which the generator has not): randn → fp32 → ×factor in fp32 → bf16, round to nearest even.
    ``rows_last``: return it with its last two axes swapped, contiguous (K, which the generator draws HEAD×S1)."""
    if dtype == "bf16":
        x = narrow(np.random.randn(*shape).astype(np.float32) * np.float32(factor), input_dtype(dtype))
    else:
        x = fp16_product_table(factor)[np.random.randn(*shape).astype(F16).view(np.uint16)]
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if rows_last else x


def fp16_product_table(factor: float) -> np.ndarray:
    """x·factor in fp16 for each of the 65,536 fp16 bit patterns x, as the generator computes it (the exact fp32
    product of two fp16 values, rounded once to fp16; its fp16 → fp32 → fp16 round trip after that is exact):
    looking a tensor's values up here gives the same bits 3× faster than computing them."""
    with np.errstate(all="ignore"):  # the patterns of NaN and of values the product takes past fp16's range
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16)
        return (x.astype(np.float32) * np.float32(F16(factor))).astype(F16)


def generate_inputs(config: Config) -> Inputs:
    """The reference data: ``numpy.random.seed(seed)``, then Q, K (HEAD×S1), V in that order.

    Only the first case after seeding matches the reference files (the reference
    generator shares one stream across the cases of a call).
    """
    c = config.case
    np.random.seed(config.numerics.seed)
    q = _reference_draw((c.batch, c.heads, c.s0, c.head), 1.5, c.dtype)
    k = _reference_draw((c.batch, c.kv_heads, c.head, c.s1), 1.5, c.dtype, rows_last=True)
    v = _reference_draw((c.batch, c.kv_heads, c.s1, c.head), 1.2, c.dtype)
    return Inputs(q, k, v, {name: _sha256(a) for name, a in (("q", q), ("k", k), ("v", v))})


def _sha256(data: bytes | np.ndarray) -> str:
    raw = np.ascontiguousarray(data).view(np.uint8).data if isinstance(data, np.ndarray) else data
    return hashlib.sha256(raw).hexdigest()


def validate(inputs: Inputs, config: Config) -> Inputs:
    """Check dtype, shape and finiteness; NaN/Inf are rejected (docs/guide/numerics.md)."""
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


def _as_shape(a: np.ndarray, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A 2-D array for a run with batch = heads = 1 stands for [1, 1, rows, HEAD]; a bf16 run reads the
    2-byte void elements ``numpy.save`` writes for an ml_dtypes bfloat16 array as bf16."""
    if dtype == "bf16":
        a = bf16_from_npy(a)
    if a.ndim == 2 and shape[0] == shape[1] == 1 and a.shape == shape[2:]:
        return a.reshape(shape)
    return a


def _from_bin(data: bytes, path: Path, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    want = int(np.prod(shape)) * 2
    if len(data) != want:
        raise InputError(f"{path} has {len(data)} bytes, expected {want} ({dtype} {shape}); check the config's "
                         f"shape")
    return np.frombuffer(data, input_dtype(dtype)).reshape(shape)


def read_input_files(directory: str | Path) -> dict[str, bytes]:
    """The bytes of q.npy/k.npy/v.npy or, when none exist, of q.bin/kt.bin/v.bin, by file name."""
    d = check_path(directory, "--inputs")
    if not os.path.isdir(d):
        raise InputError(f"--inputs {d} is not a directory")
    npy = [d / f for f in NPY_FILES.values()]
    if any(os.path.lexists(p) for p in npy):
        missing = [str(p) for p in npy if not os.path.lexists(p)]
        if missing:
            raise InputError(f"--inputs {d}: {', '.join(missing)} missing (need all of q.npy, k.npy, v.npy)")
        files = NPY_FILES
    else:
        files = BIN_FILES
    hint = "--inputs needs q.npy/k.npy/v.npy or q.bin/kt.bin/v.bin"
    return {f: read_bytes(d / f, "input", hint) for f in files.values()}


def input_hashes(raw: dict[str, bytes]) -> dict[str, str]:
    return {name: _sha256(data) for name, data in raw.items()}


def changed_inputs(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """Files (or generated tensors) whose hash differs from the run's record, or that appeared or vanished."""
    return sorted(n for n in set(recorded) | set(now) if recorded.get(n) != now.get(n))


def load_inputs(directory: str | Path, config: Config, recorded: dict[str, str] | None = None) -> Inputs:
    """Read, hash and check ``--inputs DIR``; with ``recorded`` (a run's hashes) refuse inputs changed since."""
    d = Path(directory)
    gone = [n for n in recorded or {} if not os.path.lexists(d / n)]
    raw = read_input_files(directory) if not gone else {}
    hashes = input_hashes(raw)
    changed = [f"{n} (gone)" for n in gone] or (changed_inputs(recorded, hashes) if recorded is not None else [])
    if changed:
        raise InputError(f"inputs changed since the run: {', '.join(str(d / n) for n in changed)}; "
                         f"rerun tfa-sim run")
    want, dt = shapes(config), config.case.dtype
    names = NPY_FILES if "q.npy" in raw else BIN_FILES
    arrays = {t: _as_shape(load_npy(raw[f], d / f, "input"), want[t], dt) if f.endswith(".npy")
              else _from_bin(raw[f], d / f, want[t], dt) for t, f in names.items()}
    return validate(Inputs(**arrays, hashes=hashes), config)


def write_input_bins(inputs: Inputs, directory: Path) -> None:
    """The reference generator's input files: q, k (HEAD×S1), kt (S1×HEAD), v, vt."""
    files = {"q": inputs.q, "k": np.swapaxes(inputs.k, -1, -2), "kt": inputs.k,
             "v": inputs.v, "vt": np.swapaxes(inputs.v, -1, -2)}
    for name, a in files.items():
        np.ascontiguousarray(a).tofile(directory / f"{name}.bin")
