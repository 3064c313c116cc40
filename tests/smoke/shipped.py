"""What a build of tfa-sim must ship, checked against what a build ships.

The wheel holds every file git tracks under tfa_sim/ and configs/ (as tfa_sim/configs/…), the C stage kernels and
the mypyc group of the hot path; the sdist holds those sources, native/ and the build's own files.  Run as
``python tests/smoke/shipped.py DIST_DIR`` (.ci/run, after ``python -m build``) it compares the built wheel and sdist
and exits 1 naming what is missing; tests/test_packaging.py compares setuptools' own file lists, without a build.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The build's own files, which the sdist needs beside the sources.
BUILD_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
#: The wheel's extensions, built by pip: the C kernels (cffi) and, unless TFA_SIM_PURE_PYTHON=1, the hot path (mypyc).
EXTENSIONS = ("tfa_sim/backends/_native.", "tfa_sim/_engine__mypyc.")


def tracked(root: Path = ROOT) -> list[str]:
    """The files git tracks in the checkout at ``root``."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True)
    return [path for path in listing.stdout.split("\0") if path]


def wheel_needs(files: Iterable[str]) -> set[str]:
    """Where the tree's ``files`` land in the wheel: tfa_sim/ as it is, configs/ as tfa_sim/configs/."""
    files = list(files)
    return {f for f in files if f.startswith("tfa_sim/")} | {f"tfa_sim/{f}" for f in files if f.startswith("configs/")}


def sdist_needs(files: Iterable[str]) -> set[str]:
    """The tree's ``files`` an sdist needs to build the package from its own files."""
    return {f for f in files if f.startswith(("tfa_sim/", "configs/", "native/")) or f in BUILD_FILES}


def missing(shipped: Iterable[str], needed: set[str], extensions: Iterable[str] = ()) -> list[str]:
    """What of ``needed`` is not ``shipped``, and each of the ``extensions`` (a path prefix) with no ``.so``."""
    shipped = set(shipped)
    gone = sorted(needed - shipped)
    return gone + [f"{prefix}*.so" for prefix in extensions
                   if not any(name.startswith(prefix) and name.endswith(".so") for name in shipped)]


def built(dist: Path) -> tuple[list[str], list[str]]:
    """The files of the one wheel and the one sdist in ``dist`` (the sdist's without its top folder)."""
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit(f"shipped: expected one wheel and one sdist in {dist}, found {wheels + sdists}")
    with zipfile.ZipFile(wheels[0]) as wheel, tarfile.open(sdists[0]) as sdist:
        return wheel.namelist(), [m.name.partition("/")[2] for m in sdist.getmembers() if m.isfile()]


#: Run in a copy of the tree: setuptools reads setup.py and pyproject.toml and lists what build_py puts in the wheel
#: (modules and package data) and what egg_info puts in the sdist (SOURCES.txt), building nothing.
LISTS = """
import json, sys
import setuptools
from distutils.core import run_setup
dist = run_setup("setup.py", stop_after="config")
build_py = dist.get_command_obj("build_py")
build_py.ensure_finalized()
wheel = [f"{package.replace('.', '/')}/{module}.py" for package, module, _ in build_py.find_all_modules()]
wheel += [f"{package.replace('.', '/')}/{name}" for package, _, _, names in build_py.data_files for name in names]
dist.run_command("egg_info")
sdist = dist.get_command_obj("egg_info").filelist.files
open(sys.argv[1], "w").write(json.dumps({"wheel": wheel, "sdist": sdist}))
"""


def setuptools_lists(root: Path) -> tuple[list[str], list[str]]:
    """What setuptools would put in the wheel and in the sdist of the tree at ``root`` (it writes root's egg-info:
    give it a copy), without compiling anything."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lists.json"
        env = {**os.environ, "TFA_SIM_PURE_PYTHON": "1"}  # no mypyc: its extensions are .ci/run's to check
        subprocess.run([sys.executable, "-c", LISTS, str(out)], cwd=root, env=env, check=True, capture_output=True,
                       timeout=120)
        lists = json.loads(out.read_text(encoding="utf-8"))
    return lists["wheel"], lists["sdist"]


def main(dist: str) -> int:
    """Compare the wheel and sdist in ``dist`` with this checkout; print what is missing."""
    wheel, sdist = built(Path(dist))
    files = tracked()
    extensions = EXTENSIONS if os.environ.get("TFA_SIM_PURE_PYTHON") != "1" else EXTENSIONS[:1]
    gone = [f"wheel: {f}" for f in missing(wheel, wheel_needs(files), extensions)]
    gone += [f"sdist: {f}" for f in missing(sdist, sdist_needs(files))]
    for line in gone:
        print(f"shipped: missing from the {line}")
    if not gone:
        print(f"shipped: the wheel ({len(wheel)} files) and the sdist ({len(sdist)}) hold every module, config and "
              f"native source of the tree")
    return 1 if gone else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
