"""Build hook: compiles the native C stage kernels with cffi and the engine's hot path with mypyc during
``pip install``.

Everything else lives in pyproject.toml; setuptools needs ``cffi_modules`` and ``ext_modules`` here, and the
packages are found here because pyproject's ``packages.find`` cannot add the top-level configs/ beside them.
mypyc turns the listed modules — what runs once or more per instruction group: the pipes, issue streams,
GM, slot/flag pools, FIFOs, the SimPy adapter, the stage programs and the event log — into C extensions
from the same typed source (README "The compiled hot path"); the source is what runs when
``TFA_SIM_PURE_PYTHON=1`` is set at install time (same results, slower).
"""
import os

from setuptools import find_packages, setup

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

ext_modules = []
if os.environ.get("TFA_SIM_PURE_PYTHON", "") != "1":
    from mypyc.build import mypycify

    # one shared library inside the package (tfa_sim/_engine__mypyc…so), so editable installs find it too.
    # --no-site-packages: mypy reads no installed package's types (none is compiled; their imports are Any, as in
    # pip's isolated build env before the dependencies are installed). Following numpy's, pandas' and scipy's types
    # took a rebuild in a venv that holds them from 37 s to 149 s (benchmarks/README.md, "Install time").
    ext_modules = mypycify(["--no-site-packages", *COMPILED], group_name="tfa_sim._engine", opt_level="3")

setup(packages=PACKAGES, cffi_modules=["native/build_native.py:ffibuilder"], ext_modules=ext_modules)
