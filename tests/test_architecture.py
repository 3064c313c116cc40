"""The package's shape (docs/architecture.md): no import circle, imports down the flow, only the command on top."""
from __future__ import annotations

import ast
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


def test_the_layout_page_names_every_module_under_its_package():
    """docs/guide/layout.md's tree: each package of tfa_sim/ has its line, and names each of its modules (a module
    of a sub-package, explore/sweep/spec.py, under its top-level package's entry)."""
    text = (PACKAGE.parent / "docs" / "guide" / "layout.md").read_text(encoding="utf-8")
    tree = text.split("```\n", 2)[1]
    entries: dict[str, str] = {}
    package = "tfa_sim"
    for line in tree.splitlines():
        head = line[:20].strip()
        if line.startswith("  ") and head.endswith("/"):
            package = head.rstrip("/")
        elif head and not line.startswith(" "):
            package = head.rstrip("/")
        entries[package] = entries.get(package, "") + " " + line
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and len(rel.parts) > 1:
            continue
        top = rel.parts[0] if len(rel.parts) > 1 else "tfa_sim"
        if not re.search(rf"\b{re.escape(rel.name)}\b", entries.get(top, "")):
            missing.append(rel.as_posix())
    assert not missing, f"docs/guide/layout.md does not name {missing}"
