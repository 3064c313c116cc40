"""The kernel-ordered golden's fp16 rounding of P: numpy's two casts against ``golden.fp16_values``.

Run: ``python benchmarks/bench_golden.py [S1]`` (S0 = 512, default S1 = 8192).
Times ``kernel_golden`` with each, alternated, 5 rounds, and prints the
medians and their ratio, on the reference generator's data and on the same
data with Q scaled by 3 (a peaked P, most of it below fp16's normal range,
where numpy's casts are slowest).  Both give the same output bits (checked).
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from tfa_sim.numerics import golden
from tfa_sim.numerics.inputs import Inputs, generate_inputs
from tfa_sim.spec.load import load_config

CASTS = {"numpy astype": lambda e: e.astype(np.float16).astype(np.float32), "bit arithmetic": golden.fp16_values}


def main() -> None:
    s1 = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    config = load_config(overrides=["case.s0=512", f"case.s1={s1}"])
    base = generate_inputs(config)
    for label, scale in (("generator data", 1.0), ("Q x3 (peaked P)", 3.0)):
        inputs = Inputs((base.q.astype(np.float32) * np.float32(scale)).astype(np.float16), base.k, base.v)
        times: dict[str, list[float]] = {name: [] for name in CASTS}
        outputs = {}
        for _ in range(5):
            for name, cast in CASTS.items():
                golden.fp16_values = cast
                start = time.perf_counter()
                outputs[name] = golden.kernel_golden(inputs, config).o
                times[name].append(time.perf_counter() - start)
        golden.fp16_values = CASTS["bit arithmetic"]
        same = np.array_equal(*(o.view(np.uint32) for o in outputs.values()))
        slow, fast = (statistics.median(t) for t in times.values())
        print(f"S0=512 S1={s1}, {label}: kernel_golden with numpy astype {slow:.3f} s, with the bit arithmetic "
              f"{fast:.3f} s ({slow / fast:.2f}x); output bits {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
