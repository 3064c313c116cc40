"""Every compiled copy of the native hot kernels (baseline, AVX2, AVX-512) gives the same bits.

The backend tests compare numpy with the copy this CPU picks at run time; tests/native_copies.c runs every
copy the CPU can execute on the same inputs and compares them byte for byte, built with the extension's own
flags (native/build_native.py) and once more with the baseline copy alone (``-DTFA_DISPATCH=0``).
"""
from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def compile_args() -> list[str]:
    """The extension's compile flags, read from the build script (not repeated here)."""
    spec = importlib.util.spec_from_file_location("build_native", ROOT / "native" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.COMPILE_ARGS)


@pytest.mark.parametrize("dispatch", [[], ["-DTFA_DISPATCH=0"]], ids=["dispatch", "baseline_only"])
def test_every_copy_of_the_hot_kernels_gives_the_same_bits(tmp_path, dispatch):
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    exe = tmp_path / "native_copies"
    source = ROOT / "tests" / "native_copies.c"
    subprocess.run([*cc, *compile_args(), *dispatch, "-I", str(ROOT / "native"), str(source), "-o", str(exe), "-lm"],
                   check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    assert r.stdout.startswith("ok 830 cases")
