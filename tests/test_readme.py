"""The README's quoted outputs are what the commands print today (issue 34): the cheap ones are rerun here and
compared line by line, so a change to the model or the report fails until the README follows it."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tfa_sim.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: What differs from run to run: the time stamp in a default run directory's name.
STAMP = re.compile(r"-\d{8}-\d{6}/")


def quoted(command: str) -> tuple[list[str], list[str]]:
    """The README block that shows ``$ command``: every command of the block (continuation lines joined), and
    the lines printed after ``$ command`` up to the next command or the end of the block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    blocks = text.split("\n```")[1::2]  # the fenced blocks, each from its fence's language word on
    block = next(b for b in blocks if f"\n$ {command}\n" in b)
    commands = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    printed = block.split(f"$ {command}\n", 1)[1].split("\n$ ", 1)[0]
    return commands, printed.splitlines()


def run_quoted(command: str, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], list[str]]:
    """Run the block's commands in-process (in the current directory) and return what ``command`` printed,
    time stamps masked, beside the README's lines."""
    commands, expected = quoted(command)
    printed = ""
    for line in commands:
        argv = shlex.split(line)
        assert argv[0] == "tfa-sim", line
        capsys.readouterr()
        main(argv[1:])
        if line == command:
            printed = capsys.readouterr().out
    return STAMP.sub("-…/", printed).splitlines(), [STAMP.sub("-…/", line) for line in expected]


def test_the_tour_of_tfa_sim_run_is_todays_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    got, expected = run_quoted("tfa-sim run", capsys)
    assert len(expected) > 10, "the README's tour of tfa-sim run"
    assert got == expected


def test_the_kernel_dumps_check_example_is_todays_output(tmp_path, monkeypatch, capsys):
    dumps = "tests/data/cpu_sim/H64_S0_128_S1_768_T256_seed2024"
    (tmp_path / dumps).parent.mkdir(parents=True)
    (tmp_path / dumps).symlink_to(ROOT / dumps)
    monkeypatch.chdir(tmp_path)
    got, expected = run_quoted(f"tfa-sim check runs/h64 --kernel-dumps {dumps} --exact", capsys)
    assert "  every compared element is bit-equal" in expected
    assert got == expected
