"""Guards for what users hand tfa-sim: names, paths, files to read, values echoed in messages.

* A *name* (a case, a hardware preset, ``case.name``) is a name, never a path: 1–100 characters of
  ``A-Z a-z 0-9 _ . -``, not starting with a dot.  So no name can climb out of ``configs/`` or put a
  run directory anywhere; paths are taken only where a path is asked for (CONFIG, ``--hw FILE``,
  ``hardware.file``, ``--inputs``, ``--out``, RUN_DIR, ``-o``).
* :func:`read_bytes` reads a regular file only — a FIFO would block for ever, a device never end —
  and turns every refusal of the OS into one :class:`InputError` line naming the file.
* :func:`show` is a bounded ``repr`` for messages: a 5000-digit integer or a YAML alias bomb must
  neither raise nor take minutes to print.
* :func:`load_npy` parses ``.npy`` bytes only after its header agrees with the data that follows:
  a header can claim terabytes.
"""
from __future__ import annotations

import io
import math
import os
import re
import reprlib
import stat
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfa_sim.spec.errors import InputError

if TYPE_CHECKING:  # numpy is imported by load_npy: the command line (and --help) loads this module without it
    import numpy as np

NAME_RULE = "1-100 characters of A-Z a-z 0-9 _ . -, not starting with a dot"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxlevel = 2


def show(value: Any) -> str:
    """A short one-line ``repr`` of any value, safe for huge or deeply nested ones."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        sign = "-" if value < 0 else ""
        return f"{sign}<an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits>"
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - e.g. a huge integer inside a list: describe instead
        return f"<a {type(value).__name__}>"


def plain(text: str) -> str:
    """``text`` itself where it prints as one line of its own characters, else its escaped ``repr``."""
    return text if text and text.isprintable() else show(text)


def is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and not value.startswith(".")


def check_name(value: Any, what: str, hint: str = "") -> str:
    """``value`` if it is a name (module docstring), else InputError naming ``what`` and the rule."""
    if not is_name(value):
        raise InputError(f"{what} {show(value)} is not a name: use {NAME_RULE}" + (f"; {hint}" if hint else ""))
    return value


def check_path(value: Any, what: str) -> Path:
    """A path the OS can take: a non-empty string without NUL bytes."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value) or "\0" in os.fspath(value):
        raise InputError(f"{what} {show(value)} is not a usable path (empty or with a NUL byte)")
    return Path(value)


def os_problem(exc: OSError) -> str:
    """``exc`` as a few words (``No such file or directory``), without the path it repeats."""
    return exc.strerror or type(exc).__name__


def read_bytes(path: str | os.PathLike, what: str, hint: str = "", max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file, or one InputError line: ``{what} {path} {problem}[; {hint}]``."""
    p = check_path(path, what)
    tail = f"; {hint}" if hint else ""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{what} {p} not found{tail}") from None
    except OSError as exc:
        raise InputError(f"{what} {p} cannot be read ({os_problem(exc)}){tail}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise InputError(f"{what} {p} is {kind}{tail}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputError(f"{what} {p} has {st.st_size} bytes, more than such a file ever has ({max_bytes}){tail}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(f"{what} {p} cannot be read ({os_problem(exc)}){tail}") from None
    finally:
        os.close(fd)


def decode_text(data: bytes, path: str | os.PathLike, what: str) -> str:
    """``data`` as UTF-8 text, or an InputError naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}); "
                         f"save it as UTF-8") from None


def load_npy(data: bytes, path: str | os.PathLike, what: str) -> np.ndarray:
    """A read-only array over the bytes of a ``.npy`` file whose header matches its size; no pickles."""
    import numpy as np

    fh = io.BytesIO(data)
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if reader is None:
            raise ValueError(f"format version {version[0]}.{version[1]} is not read here; save with numpy.save")
        with warnings.catch_warnings():  # a Python 2 header parses (with a UserWarning); the checks below decide
            warnings.simplefilter("ignore")
            shape, fortran, dtype = reader(fh)
    except Exception as exc:  # noqa: BLE001 - numpy's header parser raises ValueError, SyntaxError, TokenError…
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{what} {path} is not a .npy array ({first})") from None
    if dtype.hasobject or dtype.itemsize == 0:
        raise InputError(f"{what} {path} holds dtype {dtype}, not numbers; tfa-sim reads numeric arrays only")
    want = math.prod(shape) * dtype.itemsize
    got = len(data) - fh.tell()
    if got != want:
        raise InputError(f"{what} {path}: its header says {dtype} {tuple(shape)} ({want} bytes) but {got} bytes "
                         f"follow; the file is truncated or damaged")
    if want == 0:
        return np.empty(shape, dtype)
    a = np.frombuffer(data, dtype, math.prod(shape), fh.tell()).reshape(shape, order="F" if fortran else "C")
    return np.ascontiguousarray(a)


#: Kinds of :func:`require_fields`: a check and what it asks for.
_KINDS = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: _finite(v) and v >= 0, "a finite number ≥ 0"),
    "positive": (lambda v: _finite(v) and v > 0, "a finite number > 0"),
    "table": (lambda v: isinstance(v, dict), "a table"),
    "list": (lambda v: isinstance(v, list), "a list"),
}


def _finite(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return isinstance(v, int) or math.isfinite(v)  # isfinite would overflow on a huge int


def require_fields(data: Any, spec: dict[str, str], problem: str) -> None:
    """Check ``data`` against ``spec`` — dotted key → kind of :data:`_KINDS` (``kind?``: may be missing or null) — or
    raise InputError ``{problem} ({key} …)``, e.g. problem = "run/summary.json is not a tfa-sim summary"."""
    for dotted, kind in spec.items():
        optional = kind.endswith("?")
        value: Any = data
        for part in dotted.split("."):
            if not isinstance(value, dict) or part not in value:
                if optional:
                    break
                raise InputError(f"{problem} ({dotted} missing)")
            value = value[part]
        else:
            ok, wanted = _KINDS[kind.rstrip("?")]
            if not ok(value) and not (optional and value is None):
                raise InputError(f"{problem} ({dotted} = {show(value)} is not {wanted})")
