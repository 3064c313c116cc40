"""The install measured cold, as a new user gets it (issue 44): the whole commands, the install by part, the venv's
size; trees side by side.

    python benchmarks/bench_install.py [--rounds N] [--parts] [--skip-readme] TREE [TREE …]

Each TREE is a git work tree whose HEAD is installed (e.g. this checkout and an older one beside it); its committed
files are copied anew for every install, into a fresh venv (pip upgraded first, not timed), with an empty pip cache
(``PIP_NO_CACHE_DIR=1``: every download is a download).  The trees are alternated round by round; the medians and
each tree's ratio to the first are printed.  Wall seconds and CPU seconds (user + sys of every process) are given:
the machine is shared, and CPU seconds move less.

Whole commands, every round: ``pip install .`` (then the venv's size and ``tfa-sim run`` from an empty directory)
and, unless --skip-readme, the README's ``pip install -e ".[test]" && tfa-sim run`` in the copied checkout.
With --parts, once per tree at the end: the core dependencies downloaded (``pip download``) and installed from
those files, the build requirements installed into a venv (what pip's isolated build env does), the package alone
(``pip install --no-deps .``) with ``TFA_SIM_PURE_PYTHON=1`` (build env + C kernels) and without (+ mypyc), the
``test`` extra's dependencies downloaded and installed.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ENV = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PIP_CACHE_DIR")},
       "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def timed(cmd: list[str], cwd: Path, **env: str) -> tuple[float, float]:
    """Run ``cmd`` (it must succeed); its wall and CPU seconds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env={**ENV, **env}, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"bench_install: {' '.join(cmd)} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def source(tree: Path, into: Path) -> Path:
    """A fresh copy of ``tree``'s committed files (its HEAD), as a clone would have them."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(tree), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def venv(path: Path) -> Path:
    """A fresh venv with an upgraded pip; its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=ENV)
    subprocess.run([str(path / "bin" / "pip"), "install", "-q", "--upgrade", "pip"], check=True, env=ENV)
    return path / "bin"


def megabytes(path: Path) -> float:
    """What ``du -sb`` says, in MB."""
    du = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(du.stdout.split()[0]) / 1e6


def requirements(src: Path, extra: str | None) -> list[str]:
    """The core dependencies (``extra`` None) or an extra's, the project's own extras (``tfa-sim[all]``) expanded."""
    project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    todo, out = list(project["dependencies"] if extra is None else extras[extra]), []
    while todo:
        req = todo.pop(0)
        own = re.fullmatch(r"tfa-sim\[([a-z0-9_,-]+)\]", req.replace(" ", ""))
        if own:
            todo += [r for name in own[1].split(",") for r in extras[name]]
        elif req not in out:
            out.append(req)
    return out


def whole(tree: Path, work: Path, readme: bool) -> dict[str, tuple[float, float]]:
    """One round of the whole commands for ``tree``."""
    found: dict[str, tuple[float, float]] = {}
    src, bin_ = source(tree, work / "core-src"), venv(work / "core-venv")
    found["pip install ."] = timed([str(bin_ / "pip"), "install", "-q", "."], src)
    found["venv size MB (core)"] = (megabytes(work / "core-venv"), 0.0)
    (work / "empty").mkdir()
    found["tfa-sim run (core)"] = timed([str(bin_ / "tfa-sim"), "run"], work / "empty")
    if readme:
        src, bin_ = source(tree, work / "readme-src"), venv(work / "readme-venv")
        found['pip install -e ".[test]"'] = timed([str(bin_ / "pip"), "install", "-q", "-e", ".[test]"], src)
        found["tfa-sim run (readme)"] = timed([str(bin_ / "tfa-sim"), "run"], src)
        found["venv size MB (test)"] = (megabytes(work / "readme-venv"), 0.0)
    return found


def parts(tree: Path, work: Path) -> dict[str, tuple[float, float]]:
    """The install of ``tree`` by part (module docstring)."""
    found: dict[str, tuple[float, float]] = {}
    src = source(tree, work / "src")
    core, test = requirements(src, None), requirements(src, "test")
    bin_ = venv(work / "venv")
    for name, reqs in (("core dependencies", core), ("test extra's dependencies", test)):
        files = work / name.replace(" ", "-").replace("'", "")
        found[f"download the {name}"] = timed([str(bin_ / "pip"), "download", "-q", "-d", str(files), *reqs], work)
        found[f"  ({name}: MB downloaded)"] = (megabytes(files), 0.0)
        found[f"install the {name}"] = timed([str(bin_ / "pip"), "install", "-q", "--no-index", "--find-links",
                                              str(files), *reqs], work)
        if name == "core dependencies":
            found["  (venv size MB with the core dependencies)"] = (megabytes(work / "venv"), 0.0)
            build = tomllib.loads((src / "pyproject.toml").read_text())["build-system"]["requires"]
            found["build requirements into a fresh venv (pip's build env)"] = timed(
                [str(venv(work / "build-env") / "pip"), "install", "-q", *build], work)
            found["pip install --no-deps . (TFA_SIM_PURE_PYTHON=1)"] = timed(
                [str(bin_ / "pip"), "install", "-q", "--no-deps", "."], source(tree, work / "src-pure"),
                TFA_SIM_PURE_PYTHON="1")
            found["pip install --no-deps ."] = timed([str(bin_ / "pip"), "install", "-q", "--no-deps",
                                                      "--force-reinstall", "."], source(tree, work / "src-mypyc"))
    return found


def report(title: str, by_tree: dict[str, list[dict[str, tuple[float, float]]]]) -> None:
    """Per measure: each tree's values, their median, its ratio to the first tree's."""
    print(f"\n{title}")
    trees = list(by_tree)
    for measure in by_tree[trees[0]][0]:
        cells, first = [], None
        for tree in trees:
            walls = [r[measure][0] for r in by_tree[tree] if measure in r]
            cpus = [r[measure][1] for r in by_tree[tree] if measure in r]
            if not walls:
                cells.append(f"{tree}: -")
                continue
            med = statistics.median(walls)
            first = med if first is None else first
            cpu = f", CPU {statistics.median(cpus):.1f}" if any(cpus) else ""
            ratio = f" ({med / first:.2f}×)" if tree != trees[0] and first else ""
            cells.append(f"{tree}: {', '.join(f'{w:.1f}' for w in walls)} → {med:.1f}{cpu}{ratio}")
        print(f"  {measure:58s} " + "; ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", action="store_true", help="also the install by part, once per tree")
    parser.add_argument("--skip-readme", action="store_true", help="only pip install . of the whole commands")
    args = parser.parse_args()
    names = {str(t): t.resolve() for t in args.trees}
    heads = {n: subprocess.run(["git", "-C", str(t), "rev-parse", "--short", "HEAD"], text=True,
                               capture_output=True).stdout.strip() for n, t in names.items()}
    print(f"bench_install: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          + ", ".join(f"{n} at {h}" for n, h in heads.items()))
    rounds: dict[str, list] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in (list(names) if r % 2 == 0 else list(names)[::-1]):
            with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
                rounds[name].append(whole(names[name], Path(tmp), not args.skip_readme))
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v[0]:.1f}" for k, v in rounds[name][-1].items()),
                  flush=True)
    report("Whole commands (wall s per round → median, CPU s median; MB for sizes):", rounds)
    if args.parts:
        by_part: dict[str, list] = {}
        for name, tree in names.items():
            with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
                by_part[name] = [parts(tree, Path(tmp))]
        report("By part (one run per tree; wall s, CPU s; MB):", by_part)


if __name__ == "__main__":
    main()
