"""The documentation's pages are guides, not lab notes (issue 50):

* each guide page (the site's "Using tfa-sim", "The model in brief" and "Project" sections) opens with what it
  is for and a minimal example (a code block, or a quoted one) before its first section;
* no paragraph or list item of a guide page, the tutorial or the home page runs over ten lines: what would be
  a long paragraph is steps, a list or a table;
* no page of docs/ carries benchmark history — dates, commit hashes, times of day, load averages, "medians of
  alternated rounds" — except the design pages, whose measurements of the boards and sources are the record
  the model rests on (kernel.md, numerics.md, timing.md, calibration.md); the rest lives in
  benchmarks/README.md.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The nav sections whose pages are guides.
GUIDE_SECTIONS = ("Using tfa-sim", "The model in brief", "Project")
#: The design pages: a record of what the model rests on, measured boards and source commits included.
DESIGN = ("kernel.md", "numerics.md", "timing.md", "calibration.md")
MAX_LINES = 10

DATE = re.compile(r"(?<![\d-])20\d\d-[01]\d-[0-3]\d(?!\d)")
#: A commit hash: 7 to 40 hex digits with a letter and a digit, standing alone.
HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")
NOTES = re.compile(r"\b(?:load average|load (?:was|of|at) \d|alternated|medians? of|\d\d:\d\d–\d\d:\d\d)\b", re.I)


def nav() -> dict[str, list[str]]:
    """The site's sections and their pages (paths under docs/)."""
    sections: dict[str, list[str]] = {}
    for entry in yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]:
        for title, value in entry.items():
            sections[title] = [p for item in value for p in item.values()] if isinstance(value, list) else [value]
    return sections


def guide_pages() -> list[str]:
    return [p for s in GUIDE_SECTIONS for p in nav()[s] if p.endswith(".md")]


def test_the_guide_sections_hold_the_guides():
    pages = guide_pages()
    assert "guide/tuning.md" in pages and "guide/extending.md" in pages and "dependencies.md" in pages
    assert not set(pages) & {f for f in DESIGN}, "a design page among the guides"


@pytest.mark.parametrize("page", guide_pages())
def test_a_guide_opens_with_what_it_is_for_and_an_example(page):
    body = (DOCS / page).read_text(encoding="utf-8").split("\n", 1)[1]
    opening = body.split("\n## ", 1)[0]
    assert "What this page is for" in opening, f"{page} does not open with what it is for"
    assert "```" in opening or "--8<--" in opening, f"{page} shows no example before its first section"


def blocks(text: str) -> list[list[str]]:
    """The paragraphs and list items of a Markdown text (code blocks, tables, headings and comments left out)."""
    found = []
    for paragraph in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.S)):
        lines = [line for line in paragraph.strip("\n").split("\n") if line.strip()
                 and not line.lstrip().startswith("<!--")]
        if not lines or lines[0].startswith(("|", "#")):
            continue
        item: list[str] = []
        for line in lines:
            if re.match(r"\s*(?:[*-]|\d+\.)\s", line) and item:
                found.append(item)
                item = []
            item.append(line)
        found.append(item)
    return found


@pytest.mark.parametrize("page", [*guide_pages(), "tutorial.md", "index.md"])
def test_no_paragraph_of_a_guide_is_a_wall_of_text(page):
    long = [f"{len(b)} lines: {b[0][:60]}…" for b in blocks((DOCS / page).read_text(encoding="utf-8"))
            if len(b) > MAX_LINES]
    assert long == [], f"{page}: make these steps, a list or a table"


def test_the_wall_of_text_check_sees_one():
    wall = "\n".join(["word"] * (MAX_LINES + 1))
    assert [len(b) for b in blocks(f"# T\n\n{wall}\n\n* a\n  b\n* c\n\n| x |\n|---|\n")] == [MAX_LINES + 1, 2, 1]


@pytest.mark.parametrize("page", sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
                                        if str(p.relative_to(DOCS)) not in DESIGN))
def test_no_benchmark_history_outside_the_design_pages(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    found = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m[0]}" for rx in (DATE, HASH, NOTES)
             for m in rx.finditer(text)]
    assert found == [], f"docs/{page} carries measurement history: move it to benchmarks/README.md"


def test_the_history_check_sees_history():
    note = "took 60.6 s on 2026-11-28 (medians of three alternated rounds, load 2–6), against baa6ff9"
    assert DATE.search(note) and HASH.search(note) and NOTES.search(note)
    assert not HASH.search("runs/tune-case-20261126-204128/ and 1736413971558972.912")
    assert "Moved from the docs (issue 50)" in (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
