"""Memory and work: a command that cannot fit is refused at once with its estimate (issue 12, class 2).

The refusals are checked in subprocesses with an address-space limit, so that code that allocates first
(as tfa-sim did) fails the test instead of exhausting the machine.  The time bounds are generous: they
assert that nothing was allocated or simulated before the refusal (a correctness property), not speed.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from test_hostile_cli import _limit_memory, assert_refused, tfa, tfa_subprocess

#: Output elements of the shape below: batch 8 · heads 64 · S0 8192 · HEAD 128.
HUGE = ["--set", "case.batch=8", "--set", "case.heads=64", "--set", "case.s0=8192", "--set", "case.s1=8192"]
HUGE_OUTPUT = 8 * 64 * 8192 * 128


def timed_refusal(*argv: str) -> tuple[str, float]:
    """Run ``tfa-sim ARGV`` in a memory-limited subprocess; (its stderr line, seconds main() took)."""
    code = ("import sys, time; from tfa_sim import cli; t = time.monotonic(); rc = cli.main(sys.argv[1:]); "
            "print(f'{time.monotonic() - t:.3f}'); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                       preexec_fn=_limit_memory)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return lines[0], float(r.stdout.strip().splitlines()[-1])


def estimate_gib(line: str) -> float:
    return float(re.search(r"would hold about ([0-9.]+) GiB", line)[1])


def test_numerics_of_tens_of_gib_are_refused_at_once(tmp_path):
    line, seconds = timed_refusal("run", *HUGE, "--out", str(tmp_path / "o"))
    assert seconds < 5, f"refused after {seconds} s: something was allocated or computed first"
    for needle in ("--no-numerics", "fewer batch/heads", "a smaller S0 or S1", "numerics.mem_limit_gib"):
        assert needle in line, line
    # independent floor: the fp32 output, its float64 reference and the fp32 kernel golden alone
    assert estimate_gib(line) >= HUGE_OUTPUT * (4 + 8 + 4) / 2 ** 30, line
    assert not (tmp_path / "o").exists()


def test_a_long_s1_is_refused_for_its_inputs(tmp_path):
    line, seconds = timed_refusal("run", "--set", "case.s1=16777216", "--no-event-log", "--out", str(tmp_path / "o"))
    assert seconds < 5
    inputs = re.search(r"inputs ([0-9.]+) GiB", line)
    assert inputs and float(inputs[1]) >= 2 * 2 ** 24 * 128 * 2 / 2 ** 30, line  # K and V in fp16: 8 GiB


def test_an_absurd_timing_only_run_is_refused_with_its_work(tmp_path):
    """2^30 query rows: 8 million blocks; this hung building the block list before."""
    line, seconds = timed_refusal("run", "--no-numerics", "--no-event-log", "--set", "case.s0=1073741824")
    assert seconds < 5
    groups = float(re.search(r"about ([0-9.e+]+) instruction groups", line)[1])
    assert groups >= 2 ** 30 // 128 * 4  # at least one group per issued tile: 8 M blocks × 4 tiles


def test_the_event_log_of_a_big_timing_only_run_is_counted(tmp_path):
    line, _ = timed_refusal("run", "--no-numerics", "--set", "case.heads=16", "--set", "case.s0=65536",
                            "--set", "case.s1=65536", "--out", str(tmp_path / "o"))
    assert "event log" in line and "--no-event-log" in line, line


def test_the_limit_setting(tmp_path):
    r = tfa("run", "--set", "case.s1=256", "--set", "numerics.mem_limit_gib=0.01", "--out", str(tmp_path / "a"))
    assert_refused(r, "numerics.mem_limit_gib = 0.01")
    r = tfa("run", "--set", "case.s1=256", "--set", "numerics.mem_limit_gib=2", "--no-event-log",
            "--out", str(tmp_path / "b"))
    assert r.code == 0, r.err
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["config"]["numerics"]["mem_limit_gib"] == 2


def test_check_refuses_a_run_whose_intermediates_cannot_fit(tmp_path):
    """The model reference of check holds every intermediate of the run: S0·S1 scores per head."""
    run = tmp_path / "run"
    assert tfa("run", "--set", "case.s1=256", "--intermediate-check", "--no-event-log", "--out", str(run)).code == 0
    summary = json.loads((run / "summary.json").read_text())
    summary["config"]["case"].update(heads=64, s1=4194304)  # 64·128·4 Mi scores of 6 bytes: 192 GiB
    (run / "summary.json").write_text(json.dumps(summary))
    line, seconds = timed_refusal("check", str(run))
    assert seconds < 5 and "--mem-limit-gib" in line and estimate_gib(line) >= 64 * 128 * 4194304 * 6 / 2 ** 30
    assert not (run / "check.json").exists()


def test_gen_data_refuses_what_cannot_fit(tmp_path):
    line, seconds = timed_refusal("gen-data", "case_float_H_128_S0_128_S1_1024", "--set", "case.heads=64",
                                  "--set", "case.s1=1048576", "--out", str(tmp_path / "g"))
    assert seconds < 5 and estimate_gib(line) >= 64 * 128 * 1048576 * 4 / 2 ** 30  # fp32 P alone: 32 GiB
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("argv", [["run", *HUGE]], ids=["huge"])
def test_refusal_exit_code_in_a_real_process(tmp_path, argv):
    assert_refused(tfa_subprocess(*argv, cwd=tmp_path), "GiB")
