"""Hostile command lines and config values: each ends in one line on stderr and exit 2, never a traceback.

Issue 12, classes 1 (tracebacks instead of exit 2), 3 (limits that are not finite or not positive) and
5 (names used as paths).  ``tfa`` drives the CLI in-process; ``tfa_subprocess`` is used where the
old behaviour was a hang (the timeout turns it into a failure instead of a stuck test run).
"""
from __future__ import annotations

import contextlib
import io
import os
import resource
import subprocess
import sys
import traceback
from pathlib import Path
from typing import NamedTuple

import pytest

from tfa_sim import cli

SMALL = ["--set", "case.s0=128", "--set", "case.s1=256", "--no-numerics", "--no-event-log"]


class Outcome(NamedTuple):
    code: int | None
    out: str
    err: str


def tfa(*argv: str, cwd: Path | None = None) -> Outcome:
    """``tfa-sim ARGV`` in this process: exit code, stdout, stderr (an escaping exception is a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    code: int | None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(cwd or os.getcwd()):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - reported as the traceback the user would see
            code = None
            err.write(traceback.format_exc())
    return Outcome(code, out.getvalue(), err.getvalue())


#: Address space a subprocess may use: an old bug that allocates without bound fails instead of exhausting
#: the machine running the tests.
AS_LIMIT = 8 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def tfa_subprocess(*argv: str, cwd: Path | None = None, timeout: float = 60) -> Outcome:
    """``python -m tfa_sim ARGV`` with a timeout (a hang fails the test) and a memory limit."""
    r = subprocess.run([sys.executable, "-m", "tfa_sim", *argv], capture_output=True, text=True, cwd=cwd,
                       timeout=timeout, preexec_fn=_limit_memory)
    return Outcome(r.returncode, r.stdout, r.stderr)


def assert_refused(r: Outcome, *needles: str) -> str:
    """Exit 2, exactly one line on stderr containing every needle, no traceback; returns the line."""
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1 and "Traceback" not in r.err, f"exit {r.code}: {r.err}"
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


# --- config values (a file, or --set) -------------------------------------------------------------------

@pytest.mark.parametrize("suffix, text, needles", [
    (".yaml", "case: {1: 2}\n", ["[case]", "1"]),
    (".yaml", "7: {}\n", ["section", "7"]),
    (".yaml", "case:\n  causal: 2020-01-01\n", ["case.causal", "true or false"]),
    (".toml", "[numerics]\nseed = -1\n", ["numerics.seed", "4294967295"]),
    (".toml", "[numerics]\nseed = 4294967296\n", ["numerics.seed", "4294967295"]),
    (".toml", "[numerics]\ndump_limit_gib = nan\n", ["numerics.dump_limit_gib", "finite"]),
    (".toml", "[numerics]\ndump_limit_gib = inf\n", ["numerics.dump_limit_gib", "finite"]),
    (".toml", "[numerics]\ndump_limit_gib = -1.0\n", ["numerics.dump_limit_gib", "> 0"]),
    (".toml", "[numerics]\ndump_limit_gib = 0\n", ["numerics.dump_limit_gib", "> 0"]),
    (".toml", "[numerics]\nmem_limit_gib = nan\n", ["numerics.mem_limit_gib", "finite"]),
    (".toml", "[numerics]\ndump_tiles = \"1:x\"\n", ["numerics.dump_tiles", "a:b"]),
    (".toml", "[case]\nname = \"a/b\"\n", ["case.name", "A-Z"]),
    (".toml", "[case]\nname = \"/tmp/abs\"\n", ["case.name"]),
    (".toml", "[case]\nname = \"..\"\n", ["case.name"]),
    (".toml", "[case]\nname = \".hidden\"\n", ["case.name", "dot"]),
    (".toml", "[case]\nname = \"a\\u0000b\"\n", ["case.name"]),
    (".toml", "[case]\nname = \"" + "n" * 255 + "\"\n", ["case.name", "100"]),
    (".toml", "[case]\nname = \"caf\u00e9\"\n", ["case.name"]),
    (".toml", "[hardware]\npreset = \"../hw/910b2\"\n", ["hardware.preset"]),
    (".toml", "[hardware]\nfile = \"a\\u0000b.toml\"\n", ["hardware.file"]),
])
def test_bad_config_values_exit_2(tmp_path, suffix, text, needles):
    path = tmp_path / f"c{suffix}"
    path.write_text(text, encoding="utf-8")
    timing_only = ["--no-numerics", "--no-event-log"]  # no --set case.…: that would drop the file's case.name
    assert_refused(tfa("run", str(path), *timing_only, "--out", str(tmp_path / "out")), *needles)
    assert not (tmp_path / "out" / "summary.json").exists()


def test_config_that_is_not_utf8_exits_2(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xff\xfe[case]\ns0 = 128\n")
    assert_refused(tfa("run", str(path), *SMALL), str(path), "UTF-8")


#: File names whose opening fails with EACCES while a test runs (see ``_deny_open``).
DENIED: set[str] = set()


def _deny_open(event: str, args: tuple) -> None:
    """Audit hook: every open of a file named in DENIED fails as an unreadable file does (tests here run as
    root, so permissions cannot make a file unreadable)."""
    if event == "open" and DENIED and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if Path(path).name in DENIED:
            raise PermissionError(13, "Permission denied", path)


sys.addaudithook(_deny_open)


def test_unreadable_config_and_input_files_exit_2(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[case]\ns0 = 128\n")
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name, rows in (("q", 128), ("kt", 1024), ("v", 1024)):
        (inputs / f"{name}.bin").write_bytes(bytes(rows * 128 * 2))  # the default case's fp16 shapes
    DENIED.update({"c.toml", "q.bin"})
    try:
        first = tfa("run", str(config), *SMALL)
        second = tfa("run", "--inputs", str(inputs), "--out", str(tmp_path / "o"))
    finally:
        DENIED.clear()
    assert_refused(first, "c.toml", "Permission denied")
    assert_refused(second, "q.bin", "Permission denied")


@pytest.mark.parametrize("argv, needles", [
    (["--set", "numerics.seed=-1"], ["numerics.seed"]),
    (["--set", "case.s0=" + "9" * 5000], ["case.s0"]),
    (["--set", "numerics.dump_limit_gib=nan"], ["numerics.dump_limit_gib"]),
    (["--set", "numerics.mem_limit_gib=-3"], ["numerics.mem_limit_gib"]),
    (["--set", 'case.name="a\u0000b"'], ["case.name"]),
    (["--set", "case.name=../../x"], ["case.name"]),
    (["--hw", ""], ["--hw"]),
    (["--hw", "../hw/910b2"], ["--hw"]),
    (["--hw", 'x" y'], ["--hw"]),
    (["--hw", "a\x00b.toml"], ["--hw"]),
    (["--case", "../cases/case_float_H_128_S0_128_S1_1024"], ["--case"]),
    (["--intermediate-check", "--tiles", '1:2"'], ["--tiles"]),
    (["--intermediate-check", "--blocks", "x"], ["--blocks"]),
    (["--out", "o\x00x"], ["--out"]),
    (["--out", "o/" + "x" * 300], ["--out"]),
    (["--inputs", "i\x00n"], ["--inputs"]),
    (["--backend", "cuda"], ["--backend"]),
])
def test_bad_run_arguments_exit_2(tmp_path, argv, needles):
    numerics = [] if "--inputs" in argv or "--intermediate-check" in argv else ["--no-numerics"]
    assert_refused(tfa("run", "--set", "case.s1=256", *numerics, "--no-event-log", *argv, cwd=tmp_path), *needles)


def test_out_that_is_a_file_exits_2(tmp_path):
    (tmp_path / "f").write_text("mine")
    assert_refused(tfa("run", *SMALL, "--out", str(tmp_path / "f")), "--out", str(tmp_path / "f"))
    assert (tmp_path / "f").read_text() == "mine"


def test_case_name_cannot_place_the_run_directory(tmp_path):
    """Without --out the run directory is runs/<case>-<time>: a name with a path in it is refused."""
    outside = tmp_path / "elsewhere"
    assert_refused(tfa("run", *SMALL, "--set", f'case.name="{outside}"', cwd=tmp_path), "case.name")
    assert not list(tmp_path.glob("elsewhere*")) and not (tmp_path / "runs").exists()


def test_case_and_gen_data_names_cannot_reach_files_outside_the_shipped_configs(tmp_path):
    from tfa_sim.spec.config import CONFIG_DIR

    evil = tmp_path / "evil.toml"
    evil.write_text("[case]\ns0 = 128\ns1 = 256\n")
    rel = os.path.relpath(evil.with_suffix(""), CONFIG_DIR / "cases")
    assert_refused(tfa("run", "--case", rel, "--no-numerics", "--out", str(tmp_path / "o")), "--case")
    assert not (tmp_path / "o").exists()
    assert_refused(tfa("gen-data", rel, "--out", str(tmp_path / "g")), "gen-data")
    assert not (tmp_path / "g").exists()


# --- options of check, timeline and plan ----------------------------------------------------------------

@pytest.mark.parametrize("argv, needles", [
    (["check", "{run}", "--eps", "nan"], ["--eps"]),
    (["check", "{run}", "--eps", "-1"], ["--eps"]),
    (["check", "{run}", "--eps", "0"], ["--eps"]),
    (["check", "{run}", "--atol", "inf"], ["--atol"]),
    (["check", "{run}", "--rtol", "-0.5"], ["--rtol"]),
    (["check", "{run}", "--eps", "x"], ["--eps"]),
    (["check", "{run}", "--stage", "nosuch"], ["--stage"]),
    (["timeline", "{run}", "--cores", "5-2", "-o", "{tmp}/t.svg"], ["--cores"]),
    (["timeline", "{run}", "--cores", "\u00b2", "-o", "{tmp}/t.svg"], ["--cores"]),
    (["timeline", "{run}", "--tiles", "1:2:3", "-o", "{tmp}/t.svg"], ["--tiles"]),
    (["timeline", "{run}", "-o", "{tmp}/nosuchdir/t.svg"], ["nosuchdir"]),
    (["timeline", "{run}", "-o", "{tmp}/t.pdf"], ["-o"]),
    (["plan", "{run}", "--resources", "pipes", "--units", "cube.M=\u00b2"], ["--units"]),
    (["plan", "{run}", "--resources", "pipes", "--units", "cube.Q=2"], ["--units", "cube.Q"]),
    (["plan", "{run}", "--resources", "nosuch"], ["--resources"]),
    (["timeline"], ["RUN_DIR"]),
])
def test_bad_options_of_check_timeline_plan_exit_2(small_run, tmp_path, argv, needles):
    argv = [a.format(run=small_run, tmp=tmp_path) for a in argv]
    assert_refused(tfa(*argv), *needles)
    assert not (tmp_path / "t.svg").exists()


def test_huge_values_are_refused_not_hung(tmp_path, small_run):
    """These hung or exhausted memory before: a divisor search over 10^22 values, a set of 10^20 core
    numbers, a list of 10^11 plan servers."""
    assert_refused(tfa_subprocess("run", "--no-numerics", "--set", "case.s0=99999999999999999999999",
                                  cwd=tmp_path), "case.s0")
    assert_refused(tfa_subprocess("timeline", str(small_run), "--cores", "0-99999999999999999999", "-o",
                                  str(tmp_path / "t.svg")), "--cores")
    assert_refused(tfa_subprocess("plan", str(small_run), "--resources", "pipes", "--units",
                                  "cube.M=99999999999"), "--units")


@pytest.mark.parametrize("argv, needle", [
    (["run", "--set", "numerics.seed=-1", "--no-numerics"], "numerics.seed"),
    (["run", "--set", "numerics.dump_limit_gib=nan"], "numerics.dump_limit_gib"),
    (["nosuchcommand"], "nosuchcommand"),
    (["run", "--tiles"], "--tiles"),
])
def test_exit_codes_and_one_line_in_a_real_process(tmp_path, argv, needle):
    assert_refused(tfa_subprocess(*argv, cwd=tmp_path), needle)


def test_a_reader_that_left_ends_the_command_quietly_with_141(tmp_path):
    """``tfa-sim … | head -1``: the pipe's reader is gone before the output is written.  No "Broken pipe" error
    and no exit 2 as for bad input: nothing on stderr and 128 + SIGPIPE, as a shell reports for ``yes | head``."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first write: every write to the pipe fails with EPIPE
    try:
        r = subprocess.run([sys.executable, "-m", "tfa_sim", "listing", "compute_p"], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=60)
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (cli.BROKEN_PIPE, "")
    assert cli.BROKEN_PIPE == 128 + 13  # SIGPIPE is signal 13 on Linux and macOS
