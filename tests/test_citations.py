"""What the docs, the shipped configs' comments and the package's docstrings and comments cite exists (issue 50):
every repository path (``tfa_sim/sim/prediction.py``, ``configs/hw/910b2.toml``, ``docs/guide/run.md``; a
module path relative to the package, ``sim/fold.py``, too), every dotted name (``tfa_sim.spec.builds.change_build``;
relative ones, ``spec.config.kernel_choices``, where written as code), every section (``docs/timing.md, "Costs"``,
``README "Builds"``: a heading of that file, or the bold lead of one of its paragraphs) and every Markdown link's
anchor. A cited place that moves fails here, naming the citation, until the citation follows it.

Placeholders are not citations: a path with ``<…>``, ``{…}``, ``*`` or an upper-case word
(``configs/builds/NAME.toml``).
"""
from __future__ import annotations

import importlib
import io
import re
import tokenize
import unicodedata
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: The package's sub-packages: a path or dotted name starting with one is relative to tfa_sim/.
SUBPACKAGES = tuple(sorted(p.name for p in (ROOT / "tfa_sim").iterdir() if (p / "__init__.py").is_file()))
#: The config's sections, whose dotted keys (``numerics.enabled``) share a name with a sub-package.
CONFIG_SECTIONS = {"case", "tiling", "schedule", "numerics", "hardware", "kernel", "listings"}
#: What a dotted name's last part may be when it names a file, not an attribute (``api.md``).
EXTENSIONS = {"md", "py", "toml", "json", "jsonl", "csv", "svg", "png", "html", "txt", "npz", "npy", "yaml", "yml",
              "bin", "c", "h", "so", "gz", "db", "ipynb", "pftrace", "parquet"}

PATH = re.compile(r"(?<![\w./-])((?:tfa_sim|configs|docs|tests|benchmarks|native|\.ci)/[\w./-]*[\w/])")
SUBPACKAGE = "|".join(SUBPACKAGES)
RELATIVE = re.compile(rf"(?<![\w./-])((?:{SUBPACKAGE})/[\w/]*\w(?:\.py)?)")
DOTTED = re.compile(r"(?<![\w.])(tfa_sim(?:\.\w+)+)")
#: A relative dotted name written as code: `spec.config.kernel_choices` (a sub-package that is not a section).
NOT_A_SECTION = "|".join(s for s in SUBPACKAGES if s not in CONFIG_SECTIONS)
CODE_DOTTED = re.compile(rf"(?<=`)((?:{NOT_A_SECTION})(?:\.[A-Za-z_]\w*)+)(?=`)")
#: A section cited after its file: ``docs/x.md, "A"``, ``x.md "A"``, ``(guide/x.md), "A" and "B"``, ``README "A"``.
SECTION = re.compile(r"(?P<file>[\w/.-]*\w\.md|README)\)?,?\s*(?:\(|\[)?"
                     r"(?P<quotes>\"[^\"\n]+(?:\n[^\"\n]+)?\"(?:(?:,\s*|\s+and\s+)\"[^\"\n]+(?:\n[^\"\n]+)?\")*)")
#: A Markdown link with an anchor: its file (empty: the page itself) and the anchor.
ANCHOR = re.compile(r"\]\(((?:[\w./-]*\.md)?)#([\w-]+)\)")


def sources() -> Iterator[Path]:
    """Every file whose citations are checked: the docs and the README, the shipped configs' text files, the
    package's source."""
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))
    yield from sorted(p for p in (ROOT / "configs").rglob("*") if p.suffix in (".toml", ".md", ".yaml", ".yml"))
    yield from sorted((ROOT / "tfa_sim").rglob("*.py"))


@cache
def prose(path: Path) -> str:
    """The text a reader reads: a Markdown or TOML file whole; of a Python module its comments and string
    literals (without quotes), each on its own line, so code (``sim.total_cycles``) is never taken for a
    citation."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    lines = [""] * (text.count("\n") + 2)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            words = re.sub(r"^[rRbBuUfF]*(\"\"\"|'''|\"|')|(\"\"\"|'''|\"|')$", "", token.string)
            for k, part in enumerate(words.split("\n")):
                lines[token.start[0] - 1 + k] += " " + part
    return "\n".join(lines)


def placeholder(path: str, after: str = "") -> bool:
    return (any(c in path + after[:1] for c in "<{*…") or "XXX" in path
            or any(len(w) > 1 and w.isupper() for w in re.split(r"[/._-]", path)))


def citations(kind: re.Pattern[str]) -> Iterator[tuple[str, int, re.Match[str]]]:
    for path in sources():
        text = prose(path)
        for match in kind.finditer(text):
            yield str(path.relative_to(ROOT)), text.count("\n", 0, match.start()) + 1, match


def resolves(dotted: str) -> bool:
    """Whether ``tfa_sim.a.b.c`` names a module and, after it, attributes (or annotated fields) that exist."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
            break
        except ImportError:
            continue
    else:
        return False
    for name in parts[cut:]:
        if hasattr(found, name):
            found = getattr(found, name)
        else:
            fields = {**getattr(found, "__annotations__", {}), **getattr(found, "__dataclass_fields__", {})}
            return name in fields
    return True


def test_every_cited_path_exists():
    missing = []
    for where, line, match in citations(PATH):
        path = match[1].rstrip(".")
        if placeholder(path, match.string[match.end():]):
            continue
        shipped = re.sub(r"^tfa_sim/configs(?=/|$)", "configs", path)  # installed inside the package
        if not (ROOT / shipped).exists():
            missing.append(f"{where}:{line} {path}")
    for where, line, match in citations(RELATIVE):
        path = match[1]
        if placeholder(path, match.string[match.end():]):
            continue
        if not ((ROOT / "tfa_sim" / path).exists() or (ROOT / "tfa_sim" / f"{path}.py").exists()):
            missing.append(f"{where}:{line} {path} (under tfa_sim/)")
    assert missing == [], "cited paths that do not exist:\n" + "\n".join(missing)


def test_every_cited_module_and_name_exists():
    missing = []
    for kind, prefix in ((DOTTED, ""), (CODE_DOTTED, "tfa_sim.")):
        for where, line, match in citations(kind):
            parts = match[1].split(".")
            name = prefix + ".".join(parts[:-1] if parts[-1] in EXTENSIONS else parts)
            if name.count(".") and not resolves(name):
                missing.append(f"{where}:{line} {match[1]}")
    assert missing == [], "cited modules or names that do not exist:\n" + "\n".join(missing)


def normal(heading: str) -> str:
    return re.sub(r"\s+", " ", heading.replace("`", "").replace("*", "")).strip().lower()


@cache
def sections(path: Path) -> tuple[str, ...]:
    """A Markdown file's headings and the bold leads of its paragraphs and list items, normalised."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    found = []
    for line in text.splitlines():
        if heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
            found.append(normal(heading[1]))
        elif lead := re.match(r"\s*(?:[*-]\s+)?\*\*([^*]+)\*\*", line):
            found.append(normal(lead[1]).rstrip(".:"))
    return tuple(found)


def cited_file(where: str, name: str) -> Path | None:
    """The file a citation in ``where`` names: README, a path from the top, or one relative to the citing file
    or to docs/."""
    if name == "README":
        return ROOT / "README.md"
    for base in (ROOT, (ROOT / where).parent, ROOT / "docs", ROOT / "docs" / "guide"):
        if (base / name).is_file():
            return base / name
    return None


def quotes(match: re.Match[str]) -> list[str]:
    """The sections a citation names, each on one line (a comment's ``#`` where it was wrapped left out)."""
    return [re.sub(r"\s*\n\s*#?\s*", " ", q) for q in re.findall(r"\"([^\"]+)\"", match["quotes"])]


def test_every_cited_section_exists():
    missing = []
    for where, line, match in citations(SECTION):
        target = cited_file(where, match["file"])
        if target is None:
            missing.append(f"{where}:{line} {match['file']} (no such file)")
            continue
        for quote in quotes(match):
            wanted = normal(quote)
            if any(s == wanted or (s.startswith(wanted) and s[len(wanted)] in " (:—,.") for s in sections(target)):
                continue
            missing.append(f'{where}:{line} {match["file"]} "{quote}"')
    assert missing == [], "cited sections that do not exist (a heading or a paragraph's bold lead):\n" + \
        "\n".join(missing)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default ``slugify``), after its code and emphasis."""
    text = unicodedata.normalize("NFKD", re.sub(r"[`*]", "", heading)).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M)}


@pytest.mark.parametrize("document", ["README.md", *sorted(str(p.relative_to(ROOT))
                                                          for p in (ROOT / "docs").rglob("*.md"))])
def test_every_anchor_a_page_links_to_exists(document):
    page = ROOT / document
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = [f"{name}#{anchor}" for name, anchor in ANCHOR.findall(text)
              if (target := (page.parent / name) if name else page).is_file() and anchor not in anchors(target)]
    assert broken == [], f"{document} links to anchors that do not exist"


def test_the_checks_see_what_they_check():
    """Each kind of citation is found where it is known to be (so a pattern that stops matching fails here)."""
    seen = {kind: [f"{w}:{m[0]}" for w, _, m in citations(kind)] for kind in (PATH, RELATIVE, DOTTED, SECTION)}
    assert any(s.startswith("configs/hw/910b2.toml:") and "tfa_sim/sim/prediction.py" in s for s in seen[PATH])
    assert any(s.startswith("docs/architecture.md:") and "sim/fold.py" in s for s in seen[RELATIVE])
    assert any(s.startswith("tfa_sim/spec/load.py:") and "tfa_sim.spec.builds.change_build" in s
               for s in seen[DOTTED])
    assert any(s.startswith("configs/sweeps/decode.toml:") for s in seen[SECTION])
    assert not resolves("tfa_sim.spec.config.change_build") and resolves("tfa_sim.spec.builds.change_build")
    assert not placeholder("configs/hw/910b2.toml") and placeholder("configs/builds/NAME.toml")


def test_the_site_navigation_titles_are_unique():
    def titles(entries: list) -> Iterator[str]:
        for entry in entries:
            for title, value in entry.items():
                yield from titles(value) if isinstance(value, list) else [title]

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    every = list(titles(nav))
    assert len(every) > 20 and sorted(t for t in set(every) if every.count(t) > 1) == []
