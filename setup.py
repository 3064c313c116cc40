"""Build hook: compiles the native C stage kernels with cffi and the engine's hot path with mypyc during
``pip install``.

Everything else lives in pyproject.toml; setuptools needs ``cffi_modules`` and the build command here, and the
packages are found here because pyproject's ``packages.find`` cannot add the top-level configs/ beside them.
mypyc turns the listed modules — what runs once or more per instruction group: the pipes, issue streams,
GM, slot/flag pools, FIFOs, the SimPy adapter, the stage programs and the event log — into C extensions
from the same typed source (docs/guide/layout.md, "The compiled hot path"); the source is what runs when
``TFA_SIM_PURE_PYTHON=1`` is set at install time (same results, slower).  How the build is made fast
(docs/dependencies.md, "The compiled hot path's build"): mypyc runs only when the extensions are built, one C
file per module, compiled on every CPU.
"""
import os

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

#: Every package of tfa_sim/ as setuptools finds it, and the configs (pyproject.toml maps configs/ to them).
PACKAGES = [*find_packages(include=["tfa_sim", "tfa_sim.*"]), "tfa_sim.configs"]

#: Compiled by mypyc (tests/test_compiled_engine.py runs the source beside the compiled modules).
COMPILED = ["tfa_sim/engine/pipes.py", "tfa_sim/engine/issue.py", "tfa_sim/engine/gm.py",
            "tfa_sim/buffers/pools.py", "tfa_sim/buffers/fifo.py", "tfa_sim/clock/simpy_adapter.py",
            "tfa_sim/stages/compute_qk.py", "tfa_sim/stages/compute_p.py", "tfa_sim/stages/compute_pv.py",
            "tfa_sim/stages/compute_gu.py", "tfa_sim/stages/run_tfa.py", "tfa_sim/stages/order_qk_pv.py",
            "tfa_sim/stages/order_pv_qk.py", "tfa_sim/stages/accumulators.py",
            "tfa_sim/stages/block_kernel.py", "tfa_sim/buffers/ffts.py",
            "tfa_sim/rundir/events.py"]
#: The shared library of the compiled modules, inside the package (tfa_sim/_engine__mypyc…so), so editable
#: installs find it too; mypyc writes its C files under build/ and its headers under build/<package>/.
GROUP, C_DIR = "tfa_sim._engine", os.path.join("build", "tfa_sim")


#: The commands that build the extensions; pip also runs setup.py for the build's requirements (egg_info) and its
#: metadata (dist_info), whose file lists finalize build_ext too: mypyc is not run for those.
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}


def compiled_extensions() -> list:
    """mypyc's extensions of COMPILED: its type pass and C generation.

    --no-site-packages: mypy reads no installed package's types (none is compiled; their imports are Any, as in
    pip's isolated build env before the dependencies are installed). Following numpy's, pandas' and scipy's types
    took a rebuild in a venv that holds them from 37 s to 149 s (benchmarks/README.md, "Install time").
    multi_file: a C file per module instead of one, so that the compiler's jobs can share the CPUs.
    """
    from mypyc.build import mypycify

    extensions = mypycify(["--no-site-packages", *COMPILED], group_name=GROUP, multi_file=True, opt_level="3")
    for ext in extensions:  # mypyc puts a dotted group's per-module C files beside, not in, its header's directory
        ext.include_dirs.append(C_DIR)
    return extensions


class BuildExt(build_ext):
    """setuptools' build_ext with mypyc's extensions (unless ``TFA_SIM_PURE_PYTHON=1``) when a build was asked for,
    every extension's C files compiled in parallel."""

    def finalize_options(self) -> None:
        ext_modules = self.distribution.ext_modules or []
        if (os.environ.get("TFA_SIM_PURE_PYTHON", "") != "1" and BUILDS & set(self.distribution.commands)
                and not any(ext.name.startswith(GROUP) for ext in ext_modules)):
            self.distribution.ext_modules = [*ext_modules, *compiled_extensions()]
        super().finalize_options()

    def run(self) -> None:
        from pybind11.setup_helpers import ParallelCompile  # a compiler job per CPU for the C files of one extension

        with ParallelCompile():
            super().run()


setup(packages=PACKAGES, cffi_modules=["native/build_native.py:ffibuilder"], cmdclass={"build_ext": BuildExt},
      options={"build_ext": {"parallel": os.cpu_count() or 1}})
