"""Backend speed: numpy vs native end to end on the S0=512 reference cases, and one QK tile vs BLAS.

Run: ``python benchmarks/bench_backends.py``.  Targets (issue 2): native ≥ 10× faster
than numpy end to end; the bit-exact native QK tile ≥ 25 % of single-thread BLAS
float32 matmul GFLOP/s on 128×128×128.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: BLAS with one thread
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import time  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402

from tfa_sim.backends import get_backend  # noqa: E402
from tfa_sim.numerics.inputs import generate_inputs  # noqa: E402
from tfa_sim.sim.functional import run_functional  # noqa: E402
from tfa_sim.sim.simulation import simulate  # noqa: E402
from tfa_sim.spec.load import load_config  # noqa: E402
from tfa_sim.stages.block_kernel import Numerics  # noqa: E402
from tfa_sim.stages.plan import kernel_plan  # noqa: E402

CASES = ["case_float_H_128_S0_512_S1_1024", "case_float_H_128_S0_512_S1_2048", "case_float_H_128_S0_512_S1_8192"]


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    print("end to end (all stage kernels of the case, functional order), best of 3:")
    print(f"  {'case':38s} {'numpy s':>9s} {'native s':>9s} {'speed-up':>9s}")
    for name in CASES:
        config = load_config(case=name)
        inputs = generate_inputs(config)
        t = {b: best_of(partial(run_functional, get_backend(b), config, inputs), 3) for b in ("numpy", "native")}
        print(f"  {name:38s} {t['numpy']:9.3f} {t['native']:9.4f} {t['numpy'] / t['native']:8.1f}×")
    print("same, through the SimPy pipeline (simulate with numerics; includes the timing model), best of 3:")
    for name in CASES:
        config = load_config(case=name)
        inputs, plan = generate_inputs(config), kernel_plan(config)
        out = np.zeros((1, 1, config.case.s0, config.case.head), np.float32)
        t = {b: best_of(partial(simulate, plan, Numerics(get_backend(b), inputs, out), log_events=False), 3)
             for b in ("numpy", "native")}
        print(f"  {name:38s} {t['numpy']:9.3f} {t['native']:9.4f} {t['numpy'] / t['native']:8.1f}×")
    rng = np.random.default_rng(0)
    q = rng.standard_normal((128, 128)).astype(np.float16)
    k = rng.standard_normal((128, 128)).astype(np.float16)
    q32, kt32 = q.astype(np.float32), np.ascontiguousarray(k.T.astype(np.float32))
    flops = 2 * 128 ** 3
    native = get_backend("native")
    reps = 2000
    t_native = best_of(lambda: [native.compute_qk(q, k) for _ in range(reps)], 5) / reps
    t_blas = best_of(lambda: [q32 @ kt32 for _ in range(reps)], 5) / reps
    g_native, g_blas = flops / t_native / 1e9, flops / t_blas / 1e9
    print("128×128×128 QK tile (fp16 in, fp32 out):")
    print(f"  native bit-exact compute_qk  {t_native * 1e6:7.1f} µs  {g_native:6.1f} GFLOP/s")
    print(f"  numpy float32 matmul (BLAS, 1 thread) {t_blas * 1e6:7.1f} µs  {g_blas:6.1f} GFLOP/s")
    print(f"  native / BLAS = {g_native / g_blas:.0%}")


if __name__ == "__main__":
    main()
