"""docs/tutorial.md is followed as a reader would follow it (issue 50): every block in order in one directory,
every ``$ command`` run, what each prints compared with the page's quote (time stamps and wall seconds masked,
``…`` for lines left out), and every figure the page shows is the file its command drew, byte for byte.
``python tests/test_tutorial.py`` rewrites the figures (docs/img/tutorial/) from a fresh run."""
from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from pathlib import Path

from test_readme import ROOT, follows, run_document

PAGE = "docs/tutorial.md"
FIGURES = ROOT / "docs" / "img" / "tutorial"
#: An image of the page, by its path under docs/img/tutorial/.
IMAGE = re.compile(r"!\[[^\]]*\]\(img/tutorial/([^)\s]+)\)")
#: What the tutorial must walk through, by subcommand (the issue's list: run, timeline and trace, sweep, tune,
#: the best beside the default, an intermediate check, a board's profile).
SUBCOMMANDS = ("run", "timeline", "trace", "sweep", "tune", "roofline", "check", "profile")


def images() -> list[str]:
    return IMAGE.findall((ROOT / PAGE).read_text(encoding="utf-8"))


def follow(where: Path, capsys) -> list:
    """The page followed in ``where``, beside the checkout's configs/ (step 9 reads a shipped profile there)."""
    (where / "configs").symlink_to(ROOT / "configs")
    os.chdir(where)
    return run_document(PAGE, capsys)


def test_the_tutorial_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    steps = follow(tmp_path, capsys)
    ran = {s.command.split()[1] for s in steps if s.command.startswith("tfa-sim ")}
    assert set(SUBCOMMANDS) <= ran, f"the tutorial no longer runs tfa-sim {sorted(set(SUBCOMMANDS) - ran)}"
    for step in steps:
        assert step.code == 0, f"$ {step.command} exited {step.code}: {step.got[-3:]}"
        assert step.expected, f"$ {step.command}: the page quotes nothing of what it prints"
        assert follows(step.got, step.expected), f"$ {step.command} now prints:\n" + "\n".join(step.got)
    assert images(), "the tutorial shows no figure"
    for name in images():
        drawn = tmp_path / name
        assert drawn.is_file(), f"no command of the tutorial draws {name}"
        assert drawn.read_bytes() == (FIGURES / name).read_bytes(), \
            f"docs/img/tutorial/{name} is not what the tutorial draws today: python tests/test_tutorial.py"


def test_every_figure_of_the_tutorial_is_shown():
    assert sorted(p.name for p in FIGURES.iterdir()) == sorted(images())


def test_the_tutorial_installs_as_the_readme_and_ci_do():
    page = (ROOT / PAGE).read_text(encoding="utf-8")
    install = 'pip install -e ".[test]"'
    assert f"```bash\n{install}\n```" in page
    assert install in (ROOT / "README.md").read_text(encoding="utf-8")
    assert install in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


class _Capture:
    """What capsys offers run_document, outside pytest: the output since the last read."""

    def __init__(self, out: io.StringIO, err: io.StringIO) -> None:
        self.out, self.err = out, err

    def readouterr(self) -> tuple[str, str]:
        got = self.out.getvalue(), self.err.getvalue()
        for stream in (self.out, self.err):
            stream.seek(0)
            stream.truncate()
        return got


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            follow(Path(tmp), _Capture(out, err))
        FIGURES.mkdir(parents=True, exist_ok=True)
        for name in images():
            (FIGURES / name).write_bytes((Path(tmp) / name).read_bytes())
            print(f"wrote {FIGURES / name}")
