"""Resuming: one sweep definition per directory, every point run and recorded once after any kind of stop,
bad result lines refused with their line number, workers that never outlive the sweep."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sweep import TINY, run_main, sweep_cli, write

from tfa_sim.explore.sweep import load_sweep, points, read_results
from tfa_sim.explore.sweep.execute import TEST_SIGNAL_ENV
from tfa_sim.explore.sweep.pool import WorkerPool


def _interruptible() -> None:
    """SIGINT as a terminal delivers it: a background job of a shell script (a CI runner, ``cmd &``) starts
    with SIGINT ignored, and the sweep would inherit that and never see its Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def killed_at(spec: Path, out: Path, signal_name: str, after: int, jobs: int) -> subprocess.Popen:
    """Start a sweep that sends itself ``signal_name`` right after writing its ``after``-th row."""
    env = {**os.environ, TEST_SIGNAL_ENV: f"{signal_name}:{after}"}
    return subprocess.Popen([sys.executable, "-m", "tfa_sim", "sweep", str(spec), "--out", str(out), "--jobs",
                             str(jobs), "--no-progress", "--no-plots"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_stopped_sweep_resumes_with_every_point_once(tmp_path, sig, jobs):
    spec, out = write(tmp_path / "tiny.toml", TINY), tmp_path / "out"
    expected = {p["key"] for p in points(load_sweep(spec))}
    proc = killed_at(spec, out, sig, 3, jobs)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (130 if sig == "SIGINT" else -signal.SIGKILL), err
    assert len(read_results(out / "results.jsonl")) == 3
    r = sweep_cli(spec, "--out", out, "--jobs", 2, "--no-progress", "--no-plots")
    assert r.returncode == 0, r.stderr
    keys = [row["key"] for row in read_results(out / "results.jsonl")]
    assert sorted(keys) == sorted(expected)
    r = sweep_cli(spec, "--out", out, "--jobs", 2, "--no-plots")  # a finished sweep: nothing left to run
    assert r.returncode == 0 and "12/12" in r.stderr and len(read_results(out / "results.jsonl")) == 12


def test_a_cut_short_last_line_is_dropped_and_its_point_rerun(tmp_path):
    spec, out = write(tmp_path / "tiny.toml", TINY), tmp_path / "out"
    assert run_main("sweep", spec, "--out", out, "--jobs", 1, "--no-progress", "--no-plots")[0] == 0
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:-1]) + lines[-1][:40])  # a write cut by a kill
    assert len(read_results(out / "results.jsonl")) == 11
    assert run_main("sweep", spec, "--out", out, "--jobs", 1, "--no-progress", "--no-plots")[0] == 0
    rows = read_results(out / "results.jsonl")
    assert len(rows) == 12 and {r["key"] for r in rows} == {p["key"] for p in points(load_sweep(spec))}
    assert (out / "results.jsonl").read_text().count("\n") == 12


BAD_LINES = {
    "garbage": (b"not json\n", "line 2: not a JSON object"),
    "array": (b"[1, 2]\n", "line 2: not a JSON object"),
    "no_status": (b'{"key": "abc", "overrides": {}}\n', "line 2: key 'status' missing"),
    "no_key": (b'{"status": "ok", "overrides": {}}\n', "line 2: key 'key' missing"),
    "ok_without_time": (b'{"key": "abc", "status": "ok", "overrides": {}}\n', "line 2: ok row without a finite"),
    "unknown_status": (b'{"key": "abc", "status": "great", "overrides": {}}\n', "line 2: unknown status 'great'"),
    "not_utf8": (b'\xff\xfe{"key": 1}\n', "line 2: not a JSON object"),
    "twice": (None, "line 2: recorded twice"),
}


@pytest.mark.parametrize("line, needle", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_bad_result_lines_are_refused_by_resume_and_report(tmp_path, line, needle):
    spec, out = write(tmp_path / "tiny.toml", TINY), tmp_path / "out"
    assert run_main("sweep", spec, "--out", out, "--jobs", 1, "--no-progress", "--no-plots")[0] == 0
    lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    (out / "results.jsonl").write_bytes(lines[0] + (line or lines[0]) + b"".join(lines[1:]))
    before = (out / "results.jsonl").read_bytes()
    for args in (("sweep", spec, "--out", out, "--no-progress", "--no-plots"), ("sweep-report", out)):
        code, _, err = run_main(*args)
        assert code == 2 and needle in err and "or --out a new directory" in err, err
        assert len(err.strip().splitlines()) == 1
    assert (out / "results.jsonl").read_bytes() == before  # refused, not "repaired"


def test_resuming_with_another_sweep_definition_is_refused(tmp_path):
    first, out = write(tmp_path / "first.toml", TINY), tmp_path / "out"
    assert run_main("sweep", first, "--out", out, "--jobs", 1, "--no-progress", "--no-plots")[0] == 0
    other = write(tmp_path / "other.toml", TINY.replace("[2, 3, 4]", "[2, 4]"))
    code, _, err = run_main("sweep", other, "--out", out, "--no-progress", "--no-plots")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{out / 'sweep.json'} records a different sweep ('{first}') than {other}" in err
    assert "--out a new directory" in err
    # the same definition written differently (a range for the list, comments, another file) resumes
    same = write(tmp_path / "same.toml", "# same sweep\n" + TINY.replace(
        '"schedule.qk_preload" = [2, 3, 4]', '"schedule.qk_preload" = {start = 2, stop = 4, step = 1}'))
    code, out_text, err = run_main("sweep", same, "--out", out, "--no-progress", "--no-plots")
    assert code == 0, err
    assert len(read_results(out / "results.jsonl")) == 12


def test_a_directory_with_results_but_no_record_is_refused(tmp_path):
    spec, out = write(tmp_path / "tiny.toml", TINY), tmp_path / "out"
    assert run_main("sweep", spec, "--out", out, "--jobs", 1, "--no-progress", "--no-plots")[0] == 0
    (out / "sweep.json").unlink()
    code, _, err = run_main("sweep", spec, "--out", out, "--no-progress", "--no-plots")
    assert code == 2 and "has results but no sweep.json" in err
    (out / "sweep.json").write_text('{"metric": "time_us", "axes": ["case.s1"]}')  # an older tfa-sim's record
    code, _, err = run_main("sweep", spec, "--out", out, "--no-progress", "--no-plots")
    assert code == 2 and "has no sweep digest (an older tfa-sim made it)" in err
    (out / "sweep.json").write_text('{"metric": 5}')
    for args in (("sweep", spec, "--out", out, "--no-progress", "--no-plots"), ("sweep-report", out)):
        code, _, err = run_main(*args)
        assert code == 2 and "is not a sweep record" in err and len(err.strip().splitlines()) == 1


def test_two_sweeps_cannot_write_one_directory(tmp_path):
    spec, out = write(tmp_path / "tiny.toml", TINY), tmp_path / "out"
    proc = killed_at(spec, out, "SIGSTOP", 2, 1)  # holds the directory, stopped
    try:
        _wait_until(lambda: _state(proc.pid) == "T", "the first sweep to stop itself")
        code, _, err = run_main("sweep", spec, "--out", out, "--no-progress", "--no-plots")
        assert code == 2 and f"another tfa-sim sweep is writing {out}" in err
    finally:
        proc.kill()
        proc.wait(30)
    assert run_main("sweep", spec, "--out", out, "--no-progress", "--no-plots")[0] == 0  # the kernel released the lock
    assert len(read_results(out / "results.jsonl")) == 12


def _state(pid: int) -> str | None:
    """The state letter of process ``pid`` (R, S, T, Z…), None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return out


def _wait_until(condition, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


#: two quick points, then two that take many seconds (CUBE_S0 16: 8× the blocks); the cost estimate that
#: orders the work sees one shape, so they run in this order
QUICK_THEN_SLOW = """
[base.case]
s0 = 2048
s1 = 16384
[base.tiling]
tile_s1 = 128
[axes]
"tiling.cube_s0" = [128, 16]
"schedule.qk_preload" = [2, 4]
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
def test_workers_die_with_a_killed_parent(tmp_path):
    """Stopped after its two quick rows, the sweep has one worker busy with a slow point: killing the
    parent must end it at once, not when its point is done."""
    spec, out = write(tmp_path / "slow.toml", QUICK_THEN_SLOW), tmp_path / "out"
    proc = killed_at(spec, out, "SIGSTOP", 2, 2)
    _wait_until(lambda: _state(proc.pid) == "T", "the sweep to stop itself after 2 rows")
    workers = _children(proc.pid)
    assert len(workers) == 2
    proc.kill()
    proc.wait(30)
    _wait_until(lambda: all(_state(w) in (None, "Z") for w in workers), f"workers {workers} to die", limit=5)


def test_the_portable_fallback_exits_when_the_parent_dies(tmp_path):
    """The watcher used where PR_SET_PDEATHSIG is not available: a child of a killed process exits."""
    script = ("import os, sys, time\nfrom tfa_sim.sim.parallel import watch_parent\nparent = os.getpid()\n"
              "child = os.fork()\nif child == 0:\n    watch_parent(parent, 0.02)\n"
              "print(child, flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    assert _state(child) not in (None, "Z")
    proc.kill()
    proc.wait(30)
    _wait_until(lambda: _state(child) in (None, "Z"), "the orphan to exit")


def test_a_point_over_its_time_limit_is_stopped_and_recorded(tmp_path):
    # The slow point is S0 = S1 = 131072 timing only, 1024 blocks: about 40 s on the two-core machine (65536², a
    # quarter of it, took 9.9 s on 2026-11-26), so no machine finishes it within the 1 s; it is stopped, so the
    # test costs about that second.  (S0 2048 × S1 131072 once served here: 16 blocks, 0.8 s, too close.)
    spec = write(tmp_path / "slow.toml", '[sweep]\npoint_timeout = 1.0\n'
                 'constraints = ["(case.s0 == 128) == (case.s1 == 256)"]\n'
                 '[axes]\n"case.s0" = [128, 131072]\n"case.s1" = [256, 131072]\n')
    code, _, err = run_main("sweep", spec, "--out", tmp_path / "o", "--jobs", 1, "--no-progress", "--no-plots")
    assert code == 0, err
    rows = {(r["overrides"]["case.s0"], r["overrides"]["case.s1"]): r
            for r in read_results(tmp_path / "o" / "results.jsonl")}
    assert rows[128, 256]["status"] == "ok"
    assert rows[131072, 131072]["status"] == "timeout"
    assert rows[131072, 131072]["message"] == "took longer than [sweep] point_timeout = 1 s and was stopped"


def test_unreachable_dask_scheduler_fails_fast_naming_it(tmp_path):
    spec = write(tmp_path / "tiny.toml", TINY)
    r = sweep_cli(spec, "--out", tmp_path / "o", "--executor", "dask", "--scheduler", "tcp://127.0.0.1:1",
                  "--no-progress", "--no-plots", timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("tfa-sim: error: --scheduler 'tcp://127.0.0.1:1': no dask scheduler reachable")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_references_are_run_once_for_shapes_the_sweep_does_not_contain(tmp_path):
    spec = write(tmp_path / "pre.toml", '[base.case]\ns0 = 128\n[axes]\n"case.s1" = [256, 512]\n'
                 '"schedule.qk_preload" = [2, 3]\n')
    out = tmp_path / "o"
    assert run_main("sweep", spec, "--out", out, "--jobs", 2, "--no-progress", "--no-plots")[0] == 0
    refs = read_results(out / "references.jsonl")
    assert sorted(r["config"]["case"]["s1"] for r in refs) == [256, 512]
    assert all(r["config"]["schedule"]["qk_preload"] == 4 and r["status"] == "ok" for r in refs)
    assert run_main("sweep", spec, "--out", out, "--jobs", 2, "--no-progress", "--no-plots")[0] == 0
    assert read_results(out / "references.jsonl") == refs
    report = json.loads((out / "report.json").read_text())
    for s, ref in zip(report["shapes"], sorted(refs, key=lambda r: r["config"]["case"]["s1"])):
        assert s["default_metric"] == ref["time_us"]


def _crash_on_two(x: int) -> int:
    if x == 2:
        os._exit(3)
    return 10 * x


def test_a_worker_that_dies_is_reported_and_replaced():
    with WorkerPool(_crash_on_two, 2) as pool:
        outcomes = dict(pool.imap_unordered([1, 2, 3, 4, 5]))
    assert outcomes == {1: ("done", 10), 2: ("died", 3), 3: ("done", 30), 4: ("done", 40), 5: ("done", 50)}
