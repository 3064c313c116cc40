"""The quoted outputs of the README and the documentation pages are what the commands print today (issue 34): the
cheap ones are rerun here and compared line by line, so a change to the model or the report fails until the text
follows it.  A quoted line that is only ``…`` stands for lines left out.  And the README is a front page (issue 44):
at most 300 lines, every link it or a page of docs/ makes to a file of the repository resolves."""
from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tfa_sim.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: What differs from run to run: the time stamp in a default run directory's name.
STAMP = re.compile(r"-\d{8}-\d{6}/")
#: A quoted line standing for lines left out.
ELIDED = "…"
#: What else differs from run to run: wall-clock seconds in a report ("in 1.3 s", "took 0.4 s").
WALL = re.compile(r"\b(in|took) \d+(?:\.\d+)? s\b")
#: A fenced block's file name (```` ```toml title="knobs.toml" ````): a reader writes the block to that file.
TITLE = re.compile(r'title="([^"]+)"')


def quoted(command: str, document: str = "README.md") -> tuple[list[str], list[str]]:
    """The block of ``document`` (a path under the repository) that shows ``$ command``: every command of the
    block (continuation lines joined), and the lines printed after ``$ command`` up to the next command or the end
    of the block."""
    text = (ROOT / document).read_text(encoding="utf-8").replace("\\\n", " ")
    blocks = text.split("\n```")[1::2]  # the fenced blocks, each from its fence's language word on
    block = next(b for b in blocks if f"\n$ {command}\n" in b)
    commands = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    printed = block.split(f"$ {command}\n", 1)[1].split("\n$ ", 1)[0]
    return commands, printed.splitlines()


def run_quoted(command: str, capsys: pytest.CaptureFixture[str],
               document: str = "README.md") -> tuple[list[str], list[str]]:
    """Run the block's commands in-process (in the current directory) and return what ``command`` printed,
    time stamps masked, beside the document's lines."""
    commands, expected = quoted(command, document)
    printed = ""
    for line in commands:
        argv = shlex.split(line)
        assert argv[0] == "tfa-sim", line
        capsys.readouterr()
        main(argv[1:])
        if line == command:
            printed = capsys.readouterr().out
    return STAMP.sub("-…/", printed).splitlines(), [STAMP.sub("-…/", line) for line in expected]


def mask(line: str) -> str:
    """A printed or quoted line with what differs from run to run (time stamps, wall seconds) masked."""
    return WALL.sub(r"\1 … s", STAMP.sub("-…/", line))


@dataclass
class Step:
    """One ``$ command`` of a document: what it printed (masked; stderr after stdout when it failed), its exit
    code, and the lines the document quotes after it."""

    command: str
    got: list[str]
    code: int
    expected: list[str]


def run_document(document: str, capsys: pytest.CaptureFixture[str]) -> list[Step]:
    """Follow ``document`` (a path under the repository) in the current directory as a reader would, block by
    block: a fenced block whose fence carries ``title="FILE"`` is written to FILE; each ``$ command`` line is run,
    ``tfa-sim`` in-process and anything else (``cp``, ``sed``) by the shell. Blocks without either (an install
    line, Python) are left to their own tests."""
    text = (ROOT / document).read_text(encoding="utf-8").replace("\\\n", " ")
    steps = []
    for block in text.split("\n```")[1::2]:
        fence, _, body = block.partition("\n")
        title = TITLE.search(fence)
        if title:
            Path(title[1]).write_text(body if body.endswith("\n") else body + "\n", encoding="utf-8")
            continue
        for command in (line[2:] for line in body.splitlines() if line.startswith("$ ")):
            after = ("\n" + body + "\n").split(f"\n$ {command}\n", 1)[1]  # up to the next command
            expected = ("\n" + after).split("\n$ ", 1)[0].splitlines()[1:]
            argv = shlex.split(command)
            if argv[0] == "tfa-sim":
                capsys.readouterr()
                code = main(argv[1:])
                out, err = capsys.readouterr()
            else:
                done = subprocess.run(command, shell=True, capture_output=True, text=True)
                code, out, err = done.returncode, done.stdout, done.stderr
            printed = out.splitlines() + (err.splitlines() if code else [])
            steps.append(Step(command, [mask(x) for x in printed], code, [mask(x) for x in expected]))
    return steps


def follows(got: list[str], expected: list[str]) -> bool:
    """Whether ``got`` is the quote ``expected`` with each of its ``…`` lines standing for a run of lines (none or
    more): the quote's first lines begin ``got``, its last lines end it, the runs between appear in order."""
    runs: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == ELIDED:
            runs.append([])
        else:
            runs[-1].append(line)
    if len(runs) == 1:
        return got == expected
    first, *middle, last = runs
    if got[:len(first)] != first:
        return False
    at = len(first)
    for run in middle:  # each at its first place after the one before: that leaves the most room for the rest
        at = next((k + len(run) for k in range(at, len(got) - len(run) + 1) if got[k:k + len(run)] == run), -1)
        if at < 0:
            return False
    return len(got) - len(last) >= at and got[len(got) - len(last):] == last


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


def test_a_quote_that_leaves_lines_out_matches_only_the_output_with_those_lines():
    printed = ["head", "a", "b", "middle", "c", "tail"]
    assert follows(printed, printed) and follows(printed, ["head", "…", "middle", "  …", "tail"])
    assert follows(printed, ["head", "…", "tail"]) and follows(printed, ["…", "middle", "…"])
    assert follows(printed, ["head", "a", "…", "b", "middle", "c", "tail"])  # a … may stand for no line
    assert not follows(printed, ["head", "…", "middle", "…", "other"])  # a line that was not printed
    assert not follows(printed, ["head", "…", "c", "…", "middle"])  # out of order
    assert not follows(printed, ["a", "…", "tail"])  # the quote's first line is not the first printed
    assert not follows(printed, ["head", "…", "c"])  # nor its last the last
    assert not follows(printed, ["head", "a", "b", "middle", "c"])  # without a …, every line
    assert not follows(["x", "y"], ["x", "y", "…", "y"])  # the last lines after the runs before them


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"the README has {len(lines)} lines: move text into a page of docs/"
    headings = [line for line in lines if line.startswith("## ")]
    for heading in ("## Two commands", "## A tour of `tfa-sim run`", "## Where to read on"):
        assert heading in headings


#: A Markdown link or image: its target, up to a space, a ``#`` or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s#]+)[^)]*\)")


@pytest.mark.parametrize("document", ["README.md", *sorted(str(p.relative_to(ROOT))
                                                          for p in (ROOT / "docs").rglob("*.md"))])
def test_every_link_to_a_file_of_the_repository_resolves(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(re.sub(r"```.*?```", "", text, flags=re.S)) if "://" not in t]
    missing = [t for t in targets if not ((ROOT / document).parent / t).exists()]
    assert missing == [], f"{document} links to files that do not exist"
