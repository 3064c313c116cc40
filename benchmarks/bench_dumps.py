"""Intermediate-dump speed for H128 S0=512 S1=8192 (issue 5 target: dumps written in under 5 s).

Run: ``python benchmarks/bench_dumps.py``.  Prints the run time with and without
``--intermediate-check``, the time spent writing dumps, and the check's time.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import tfa_sim.api.runner as runner
from tfa_sim.api.runner import run
from tfa_sim.rundir.dumps import write_dumps
from tfa_sim.spec.load import load_config
from tfa_sim.views.check import check_run


def main() -> None:
    name = "case_float_H_128_S0_512_S1_8192"
    spent = {}

    def timed_write(*args, **kwargs):
        start = time.perf_counter()
        try:
            return write_dumps(*args, **kwargs)
        finally:
            spent["write"] = time.perf_counter() - start

    runner.write_dumps = timed_write
    with tempfile.TemporaryDirectory() as tmp:
        for check in (False, True):
            config = load_config(case=name, overrides=[f"numerics.intermediate_check={str(check).lower()}"])
            start = time.perf_counter()
            result = run(config, out_dir=str(Path(tmp) / str(check)), event_log=False)
            label = "with dumps   " if check else "without dumps"
            print(f"{name} run {label}: {time.perf_counter() - start:.2f} s")
        print(f"  dumps: {result.summary['dumps']['bytes'] / 2 ** 20:.0f} MiB in {result.summary['dumps']['tiles']} "
              f"tiles, written in {spent['write']:.2f} s")
        start = time.perf_counter()
        report = check_run(Path(tmp) / "True")
        print(f"  tfa-sim check (model, bit-exact): {'PASS' if report['passed'] else 'FAIL'} in "
              f"{time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
