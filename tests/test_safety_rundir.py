"""The user's files: tfa-sim deletes and replaces only what it wrote, never writes through a symlink, and
lets one command at a time own a directory (issue 12, class 4)."""
from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_hostile_cli import assert_refused, tfa

from tfa_sim.api.runner import compute
from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.rundir.outputs import read_events
from tfa_sim.spec.load import load_config

SMALL = ["--set", "case.s1=256"]


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file (its bytes) and symlink (its target) under ``root``."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(dirpath) / name
            if path.is_symlink():
                out[str(path.relative_to(root))] = f"-> {os.readlink(path)}"
            elif path.is_file():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def users_dumps(out: Path) -> dict[str, bytes | str]:
    (out / "dumps" / "sub").mkdir(parents=True)
    (out / "dumps" / "notes.txt").write_text("my notes")
    (out / "dumps" / "sub" / "data.npy").write_bytes(b"precious")
    return tree(out / "dumps")


@pytest.mark.parametrize("extra", [[], ["--intermediate-check"]], ids=["plain", "intermediate-check"])
def test_a_dumps_folder_of_the_user_is_left_alone(tmp_path, extra):
    out = tmp_path / "out"
    before = users_dumps(out)
    r = tfa("run", *SMALL, *extra, "--out", str(out))
    assert_refused(r, "dumps/", "not made by tfa-sim")
    assert tree(out / "dumps") == before


def test_tfa_sims_own_dumps_are_replaced_and_the_users_files_beside_them_kept(tmp_path):
    out = tmp_path / "out"
    assert tfa("run", *SMALL, "--intermediate-check", "--no-event-log", "--out", str(out)).code == 0
    (out / "notes.txt").write_text("mine")
    assert tfa("run", *SMALL, "--no-numerics", "--no-event-log", "--out", str(out)).code == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / "dumps").exists() and not (out / "o.npy").exists()  # the first run's, now stale
    assert json.loads((out / "summary.json").read_text())["config"]["numerics"]["enabled"] is False


def test_a_tfa_sim_dumps_folder_with_a_users_file_inside_is_refused(tmp_path):
    out = tmp_path / "out"
    assert tfa("run", *SMALL, "--intermediate-check", "--no-event-log", "--out", str(out)).code == 0
    (out / "dumps" / "mine.txt").write_text("mine")
    assert_refused(tfa("run", *SMALL, "--no-event-log", "--out", str(out)), "dumps/mine.txt")
    assert (out / "dumps" / "mine.txt").read_text() == "mine" and (out / "dumps" / "manifest.json").exists()


@pytest.mark.parametrize("name", ["summary.json", "o.npy", "check.json"])
def test_a_users_file_under_an_output_name_is_not_overwritten(tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("the user's")
    assert_refused(tfa("run", *SMALL, "--out", str(out)), name, "not written by tfa-sim")
    assert (out / name).read_text() == "the user's"


PARTIALS = [".summary.json.partial", ".o.npy.partial", ".events.csv.partial", ".trace.json.partial",
            ".timeline.partial.svg", ".dumps.partial", ".check.json.partial"]


def test_partial_names_that_are_symlinks_are_never_followed(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    for i, name in enumerate(PARTIALS):
        (outside / f"victim{i}").write_text(f"victim {i}")
        (out / name).symlink_to(outside / f"victim{i}")
    (outside / "victim_dir").mkdir()
    before = tree(outside)
    r = tfa("run", *SMALL, "--intermediate-check", "--out", str(out))
    assert r.code == 0, r.err
    r = tfa("check", str(out))
    assert r.code == 0, r.err
    r = tfa("timeline", str(out), "-o", str(out / "timeline.svg"))
    assert r.code == 0, r.err
    assert tree(outside) == before
    assert all((out / name).is_symlink() for name in PARTIALS)  # the user's symlinks themselves are untouched


def test_a_file_list_naming_paths_outside_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "victim").write_text("victim")
    (out / ".tfa-sim-files.json").write_text(json.dumps({"files": ["../victim", "summary.json"]}))
    assert_refused(tfa("run", *SMALL, "--no-numerics", "--out", str(out)), ".tfa-sim-files.json", "damaged")
    assert (tmp_path / "victim").read_text() == "victim"


def test_a_failed_write_leaves_no_complete_looking_run_and_can_be_rerun(tmp_path, monkeypatch):
    out = tmp_path / "out"

    def disk_full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tfa_sim.api.runner.write_trace", disk_full)
    assert_refused(tfa("run", *SMALL, "--out", str(out)), "No space left on device")
    assert not (out / "summary.json").exists()
    monkeypatch.undo()
    r = tfa("run", *SMALL, "--out", str(out))
    assert r.code == 0, r.err
    assert read_events(out / "events.csv")


def test_gen_data_replaces_its_own_files_only(tmp_path):
    out = tmp_path / "g"
    assert tfa("gen-data", "case_float_H_128_S0_128_S1_1024", "--out", str(out)).code == 0
    first = (out / "q.bin").read_bytes()
    assert tfa("gen-data", "case_float_H_128_S0_128_S1_1024", "--set", "numerics.seed=8", "--out",
               str(out)).code == 0
    assert (out / "q.bin").read_bytes() != first
    other = tmp_path / "h"
    other.mkdir()
    (other / "q.bin").write_text("the user's")
    assert_refused(tfa("gen-data", "case_float_H_128_S0_128_S1_1024", "--out", str(other)), "q.bin")
    assert (other / "q.bin").read_text() == "the user's"


def write_lock(directory: Path, pid: int, host: str | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".tfa-sim.lock").write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                                         "command": "run", "since": "earlier"}))


def test_a_directory_locked_by_a_running_command_is_refused(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(tmp_path / "out", holder.pid)
        assert_refused(tfa("run", *SMALL, "--no-numerics", "--out", str(tmp_path / "out")), f"PID {holder.pid}",
                       "in use")
        assert_refused(tfa("check", str(tmp_path / "out")), f"PID {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_lock_on_another_host_names_it(tmp_path):
    write_lock(tmp_path / "out", 1, "elsewhere.example")
    assert_refused(tfa("run", *SMALL, "--no-numerics", "--out", str(tmp_path / "out")), "elsewhere.example",
                   ".tfa-sim.lock")


def test_a_stale_lock_is_taken_over_with_a_notice(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    write_lock(tmp_path / "out", gone.pid)
    r = tfa("run", *SMALL, "--no-numerics", "--out", str(tmp_path / "out"))
    assert r.code == 0, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "notice" in lines[0] and f"PID {gone.pid}" in lines[0], r.err
    assert not (tmp_path / "out" / ".tfa-sim.lock").exists()


def test_two_runs_into_one_directory_at_once(tmp_path):
    """Both start together: one owns the directory, the other is refused naming it; what is left is one run."""
    out = tmp_path / "out"
    argv = ["run", "--set", "case.s0=512", "--set", "case.s1=2048", "--out", str(out)]
    procs = [subprocess.Popen([sys.executable, "-m", "tfa_sim", *argv, "--set", f"numerics.seed={seed}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(code in (0, 2) for code, _ in results) and any(code == 0 for code, _ in results), results
    for code, err in results:
        if code == 2:
            assert "in use by tfa-sim" in err and len(err.strip().splitlines()) == 1, err
    summary = json.loads((out / "summary.json").read_text())
    seed = summary["config"]["numerics"]["seed"]
    config = load_config(overrides=["case.s0=512", "case.s1=2048", f"numerics.seed={seed}"])
    assert summary["input_hashes"] == generate_inputs(config).hashes
    expected = compute(config, event_log=False).numerics
    assert expected is not None and np.array_equal(np.load(out / "o.npy"), expected.out)
    events = read_events(out / "events.csv")
    assert max(e.end for e in events) <= summary["total_cycles"] + 5e-4  # the summary rounds to 3 decimals
    assert not list(out.glob(".*partial*")) and not (out / ".tfa-sim.lock").exists()


def test_a_failed_run_leaves_no_lock_and_no_empty_run_directory(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert_refused(tfa("run", *SMALL, "--inputs", str(tmp_path / "nosuch"), "--out", str(out)), "nosuch")
    assert list(out.iterdir()) == []
    assert_refused(tfa("run", *SMALL, "--inputs", str(tmp_path / "nosuch"), cwd=tmp_path), "nosuch")
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_timeline_into_a_run_directory_replaces_only_its_own_figure(tmp_path):
    out = tmp_path / "out"
    assert tfa("run", *SMALL, "--no-numerics", "--out", str(out)).code == 0
    assert tfa("timeline", str(out)).code == 0  # tfa-sim's own timeline.svg is replaced
    (out / ".tfa-sim-files.json").unlink()  # as a directory written by an earlier tfa-sim: nothing is known as its
    before = (out / "timeline.svg").read_bytes()
    assert_refused(tfa("timeline", str(out)), "timeline.svg", "-o FILE")
    assert (out / "timeline.svg").read_bytes() == before
    assert tfa("timeline", str(out), "-o", str(tmp_path / "t.svg")).code == 0 and (tmp_path / "t.svg").exists()


def test_a_runs_files_get_the_umask_permissions_not_private_ones(tmp_path):
    """mkstemp and mkdtemp make 0600 files and 0700 directories; a finished run is readable like any file
    the user writes (here umask 022: files 0644, dumps/ 0755)."""
    old = os.umask(0o022)
    try:
        r = tfa("run", *SMALL, "--intermediate-check", "--out", str(tmp_path / "out"))
    finally:
        os.umask(old)
    assert r.code == 0, r.err
    out = tmp_path / "out"
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert modes["dumps"] == 0o755 and modes["summary.json"] == 0o644 and modes["o.npy"] == 0o644, modes
    assert all(m == 0o644 for name, m in modes.items() if name != "dumps"), modes
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in (out / "dumps").iterdir())


# --- a command that fails after it started writing (issue 49) ------------------------------------------------------

PROFILE = Path(__file__).resolve().parent / "data" / "msprof" / "a2_op_single"
PROFILE_ARGS = ["--set", "case.s0=512", "--set", "case.s1=2048", "--set", "schedule.cv_fifo_cons_sync_period=1"]


def disk_full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def interrupted(*_args, **_kwargs):
    raise KeyboardInterrupt


#: command → the function that fails once the command has started writing, and its arguments (a run's trace.json
#: after its events.npz; its summary.json last, after the dumps/ folder).
FAILING = {"profile": ("tfa_sim.views.profile.figure", ["profile", str(PROFILE), *PROFILE_ARGS]),
           "run": ("tfa_sim.api.runner.write_trace", ["run", *SMALL]),
           "run with dumps": ("tfa_sim.api.runner.write_json", ["run", *SMALL, "--intermediate-check"])}


@pytest.mark.parametrize("failure", [disk_full, interrupted], ids=["disk full", "interrupted"])
@pytest.mark.parametrize("command", sorted(FAILING))
@pytest.mark.parametrize("where", ["a new --out", "a new runs/ directory", "an --out of the user's"])
def test_a_command_failing_after_it_started_writing_leaves_no_file(tmp_path, monkeypatch, command, failure, where):
    """Before issue 49 a failed ``profile`` left .tfa-sim-files.json (and ``run`` its first files) behind."""
    target, argv = FAILING[command]
    out = tmp_path / "out"
    if where == "an --out of the user's":
        out.mkdir()
        (out / "mine.txt").write_text("keep")
    before = tree(tmp_path)
    monkeypatch.setattr(target, failure)
    r = tfa(*argv, *(["--out", str(out)] if where != "a new runs/ directory" else []), cwd=tmp_path)
    if failure is disk_full:
        assert_refused(r, "No space left on device")
    else:
        assert (r.code, r.err) == (130, "tfa-sim: interrupted\n")
    assert tree(tmp_path) == before
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_a_failing_command_takes_back_only_what_it_wrote(tmp_path, monkeypatch):
    """Into a run directory of its own: the run's files the failed command did not touch stay, listed."""
    out = tmp_path / "out"
    assert tfa("run", *SMALL, "--no-numerics", "--out", str(out)).code == 0
    before = tree(out)
    monkeypatch.setattr("tfa_sim.views.timeline.write_svg", disk_full)
    assert_refused(tfa("timeline", str(out)), "No space left on device")  # timeline.svg, replaced in place
    assert tree(out) == before
    monkeypatch.setattr("tfa_sim.views.profile.figure", disk_full)
    assert_refused(tfa("profile", str(PROFILE), *PROFILE_ARGS, "--out", str(out)), "No space left on device")
    assert tree(out) == before  # profile.json, profile.png, profile.svg were never there: none is left
