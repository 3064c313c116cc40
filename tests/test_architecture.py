"""The package's shape (docs/architecture.md): no import circle, imports down the flow, only the command on top."""
from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import networkx as nx

import tfa_sim

PACKAGE = Path(tfa_sim.__file__).parent


def module_name(path: Path) -> str:
    """``tfa_sim/rundir/events.py`` → ``tfa_sim.rundir.events``; a package's ``__init__.py`` → the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (function-local imports included):
    ``from X import Y`` counts as importing X.Y when that is a module, else X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: ``from . import x`` in package p is p.x, ``from .. import x`` its parent's
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return {m for m in found if m in known and m != name}


def import_graph() -> nx.DiGraph:
    known = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    graph.add_edges_from((name, dep) for name, path in known.items() for dep in imported(name, path, known))
    return graph


def test_the_graph_sees_function_local_imports():
    graph = import_graph()
    assert graph.has_edge("tfa_sim.cli", "tfa_sim.api.runner"), "cli imports the runner inside cmd_run"
    assert len(graph) > 60 and graph.number_of_edges() > 150


def test_no_module_imports_itself_through_others():
    cycles = list(nx.simple_cycles(import_graph()))
    shortest = min(cycles, key=len, default=None)
    assert shortest is None, (f"{len(cycles)} import circle(s), e.g. " + " → ".join([*shortest, shortest[0]]))


#: The flow of docs/architecture.md, top to bottom: a module may import from its own package or an earlier one.
LAYERS = (("spec",), ("numerics",), ("backends",), ("clock",), ("buffers",), ("engine",), ("listings",), ("stages",),
          ("sim",),
          ("rundir",), ("views",), ("explore",), ("api",), ("cli", "__main__", ""))
#: The imports against the flow that docs/architecture.md ("Which way imports go") names.
UPSTREAM = {("tfa_sim.engine.pipes", "tfa_sim.rundir.events"), ("tfa_sim.engine.chip", "tfa_sim.rundir.events"),
            ("tfa_sim.spec.legality", "tfa_sim.buffers.capacity"),
            ("tfa_sim.numerics.shared_goldens", "tfa_sim.sim.parallel")}


def layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_imports_go_down_the_flow():
    against = {(a, b) for a, b in import_graph().edges if layer(b) > layer(a)}
    assert against == UPSTREAM, f"imports against the flow: {sorted(against - UPSTREAM)}; no longer: " \
                                f"{sorted(UPSTREAM - against)} (update docs/architecture.md)"


def test_the_top_level_holds_the_command_and_subpackages():
    top = {p.name for p in PACKAGE.iterdir() if p.suffix == ".py"}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert top == {"__init__.py", "__main__.py", "cli.py"}, f"modules at the top of tfa_sim/: {sorted(top)}"
    assert {"stages", "buffers", "engine", "backends"} <= packages, f"the design card's folders: {sorted(packages)}"


LAYOUT = PACKAGE.parent / "docs" / "guide" / "layout.md"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def layout_entries() -> tuple[dict[str, str], dict[str, str]]:
    """docs/guide/layout.md's tree: (the top level's entries by name, each package's text by its name; a
    sub-package's modules, explore/sweep/spec.py, are named under its top-level package's entry)."""
    tree = LAYOUT.read_text(encoding="utf-8").split("```\n", 2)[1]
    top: dict[str, str] = {}
    entries: dict[str, str] = {}
    package = "tfa_sim"
    for line in tree.splitlines():
        head = line[:20].strip()
        if line.startswith("  ") and head.endswith("/"):
            package = head.rstrip("/")
        elif head and not line.startswith(" "):
            package = head.rstrip("/")
            top[package] = line
        entries[package] = entries.get(package, "") + " " + line
    return top, entries


def test_the_layout_page_names_every_module_under_its_package():
    """Every module of tfa_sim/ is named in its package's entry of docs/guide/layout.md."""
    _, entries = layout_entries()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and len(rel.parts) > 1:
            continue
        top = rel.parts[0] if len(rel.parts) > 1 else "tfa_sim"
        if not re.search(rf"\b{re.escape(rel.name)}\b", entries.get(top, "")):
            missing.append(rel.as_posix())
    assert not missing, f"docs/guide/layout.md does not name {missing}"


def test_every_module_and_folder_the_layout_page_names_exists():
    """The other direction: each ``name.py`` and ``folder/`` an entry names is in that package (at any depth),
    and the page's packages are the package's."""
    _, entries = layout_entries()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    named = {name for name in entries if name in packages or (PACKAGE / name).is_dir()}
    assert named == packages, f"packages the page names {sorted(named)}, the package's {sorted(packages)}"
    gone = []
    for package in sorted(packages | {"tfa_sim"}):
        where = PACKAGE if package == "tfa_sim" else PACKAGE / package
        text = entries[package]
        for name in set(re.findall(r"(?<![\w./])(\w+\.py)\b", text)):
            if not any(where.rglob(name)):
                gone.append(f"{package}/: {name}")
        for name in set(re.findall(r"(?<![\w./])(\w+)/(?=[\s(,:]|$)", text)) - {package}:
            if name != "tfa_sim" and not any(p.is_dir() for p in where.rglob(name)):
                gone.append(f"{package}/: {name}/")
    assert gone == [], f"docs/guide/layout.md names modules or folders that do not exist: {gone}"


#: The top of the repository that is not its own: made by the build, the tests, the site or a venv (.gitignore).
NOT_TRACKED = ("*.egg-info", "build", "dist", ".venv", "runs", "site", ".hypothesis", ".pytest_cache", ".cache",
               ".mypy_cache", ".ruff_cache", "__pycache__", ".git", ".gitignore")


def test_the_layout_page_lists_the_top_of_the_repository():
    top, _ = layout_entries()
    listed = {name.rstrip("/") for name in top}
    there = {p.name for p in PACKAGE.parent.iterdir() if not any(fnmatch.fnmatch(p.name, n) for n in NOT_TRACKED)}
    assert listed == there, f"listed but absent: {sorted(listed - there)}; present but not listed: " \
                            f"{sorted(there - listed)}"


def architecture_section(title: str) -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_architecture_page_shows_the_flow_the_tests_enforce():
    """docs/architecture.md's picture and table list the packages in LAYERS' order, each once (the picture draws
    api/ beside the flow, where the command and the API enter it)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    picture = text.split("```\n", 2)[1]
    drawn = re.findall(r"^  (\w+)/ ", picture, flags=re.M)
    table = re.findall(r"^\| `(\w+)/` \|", architecture_section("Packages"), flags=re.M)
    flow = [names[0] for names in LAYERS[:-1]]
    assert drawn == flow[:-1] and "api/ " in picture, f"the picture's packages {drawn}, the flow {flow}"
    assert table == flow, f"the table's packages {table}, the flow {flow}"


NUMBERS = {"no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def test_the_architecture_page_names_each_import_against_the_flow():
    """"Which way imports go" names every pair of UPSTREAM in one bullet, and as many exceptions as targets."""
    section = architecture_section("Which way imports go")
    bullets = re.findall(r"^\* (.*(?:\n  .*)*)", section, flags=re.M)
    path = lambda module: module.removeprefix("tfa_sim.").replace(".", "/") + ".py"  # noqa: E731
    for importer, imported in sorted(UPSTREAM):
        assert any(path(importer) in b and path(imported) in b for b in bullets), (importer, imported)
    said = re.search(r"with (\w+) exceptions?", section)
    assert said and NUMBERS[said[1]] == len({b for _, b in UPSTREAM}) == len(bullets), said


def test_the_architecture_page_states_the_function_length_rule_as_tested():
    """"Function size" gives the test's limit and exempts no file the test does not (it exempts only marked hot
    paths)."""
    from test_function_length import HOT_PATH, MAX_LINES

    section = architecture_section("Function size")
    assert f"longer than {MAX_LINES} lines" in section
    marked = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
              if any(HOT_PATH.search(line) for line in p.read_text(encoding="utf-8").splitlines()
                     if line.lstrip().startswith("def "))}
    named = {p for p in re.findall(r"(?<![\w/])(\w+/\w+\.py)", section) if (PACKAGE / p).is_file()}
    assert named == marked, f"the page names {sorted(named)}; hot paths marked in the code: {sorted(marked)}"
