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
            "tfa_sim/stages/order_pv_qk.py", "tfa_sim/stages/accumulators.py", "tfa_sim/stages/handoffs.py",
            "tfa_sim/stages/block_kernel.py", "tfa_sim/stages/driver.py", "tfa_sim/stages/site.py",
            "tfa_sim/stages/epilogue.py",
            "tfa_sim/listings/program.py",
            "tfa_sim/buffers/ffts.py",
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


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


class BuildExt(build_ext):
    """setuptools' build_ext with mypyc's extensions (unless ``TFA_SIM_PURE_PYTHON=1``) when a build was asked for,
    every extension's C files compiled in parallel.  mypyc's type pass (about 8 s of one CPU) runs in a thread
    while the C kernels compile: its extensions are named when the options are finalized (mypyc's library and a
    stub per module) and get their sources when it has written them."""

    def finalize_options(self) -> None:
        ext_modules = self.distribution.ext_modules or []
        names = [f"{GROUP}__mypyc", *map(module_name, COMPILED)]
        self.engine = [ext for ext in ext_modules if ext.name in names]  # named by an earlier build_ext of the run
        if (not self.engine and os.environ.get("TFA_SIM_PURE_PYTHON", "") != "1"
                and BUILDS & set(self.distribution.commands)):
            from setuptools import Extension

            self.engine = [Extension(name, []) for name in names]
            self.distribution.ext_modules = [*ext_modules, *self.engine]
        super().finalize_options()

    def run(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from pybind11.setup_helpers import ParallelCompile  # a compiler job per CPU for the C files of one extension

        with ParallelCompile(), ThreadPoolExecutor(1) as pool:
            generated = pool.submit(compiled_extensions) if self.engine and not self.engine[0].sources else None
            everything, self.extensions = self.extensions, [e for e in self.extensions if e not in self.engine]
            super().run()  # the C kernels, while mypyc's type pass runs
            if generated:
                made = {ext.name: ext for ext in generated.result()}
                if sorted(made) != sorted(ext.name for ext in self.engine):
                    raise RuntimeError(f"mypyc made the extensions {sorted(made)}, not those of COMPILED")
                for ext in self.engine:  # mypyc's sources and options; setuptools' bookkeeping stays
                    ext.__dict__.update({k: v for k, v in vars(made[ext.name]).items() if not k.startswith("_")})
                self.extensions, self.compiler = self.engine, None  # run() wants a compiler's name, not the last
                super().run()
            self.extensions = everything


setup(packages=PACKAGES, cffi_modules=["native/build_native.py:ffibuilder"], cmdclass={"build_ext": BuildExt},
      options={"build_ext": {"parallel": os.cpu_count() or 1}})
