"""cffi build script for ``tfa_sim.backends._native``: the C stage kernels (API mode, out of line).

setup.py names ``native/build_native.py:ffibuilder``; pip runs it from the
project root, so every path here is taken relative to this file's directory.
Compile flags keep the numerics contract: ``-ffp-contract=off`` (no a*b+c
fusion: the exp polynomial would change) and ``-fno-fast-math`` (no
reassociation).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import sysconfig

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "tfa_native.h")
SOURCE = os.path.join(HERE, "tfa_native.c")

COMPILE_ARGS = ["-O3", "-ffp-contract=off", "-fno-fast-math", "-std=c11"]


def _check_compiler() -> None:
    """Fail early, naming the compiler, when the configured C compiler is missing."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    words = shlex.split(cc)
    exe = words[0] if words else "cc"
    if shutil.which(exe) is None:
        raise RuntimeError(
            f"tfa-sim needs a C compiler (gcc/cc) to build its native kernels, and {exe!r} "
            "was not found: install one, e.g. apt-get install gcc"
        )


def _relative(path: str) -> str:
    """``path`` relative to the working directory when possible (setuptools prefers it)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def _cdef_from_header(text: str) -> str:
    """The header's declarations without comments and preprocessor lines (cffi's cdef)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    text = "\n".join(lines)
    text = text.replace('extern "C" {', "")
    return "\n".join(ln for ln in text.splitlines() if ln.strip() not in ("", "}"))


_check_compiler()

ffibuilder = FFI()
with open(HEADER, encoding="utf-8") as fh:
    ffibuilder.cdef(_cdef_from_header(fh.read()))
ffibuilder.set_source(
    "tfa_sim.backends._native",
    '#include "tfa_native.h"\n',
    sources=[_relative(SOURCE)],
    include_dirs=[_relative(HERE)],
    depends=[_relative(HEADER)],
    extra_compile_args=COMPILE_ARGS,
    libraries=["m"],
)
