"""What each PIPE_V barrier of the shipped listings is worth: every ``pipe_barrier(PIPE_V)`` of compute_p's manual
listing (on the manual build) and of the port's (on the dsl build, its ``sync auto`` barriers spelled out) taken
away alone, at 4096², 32768² and 131072² (one head, 910b2, timing only, every launch in full); the combine's on a
split-S1 decode launch.  compute_gu, compute_qk, compute_pv and the epilogue ship no PIPE_V barrier.

Run: ``python benchmarks/ablation_barriers.py [--shapes 4096 32768 131072] [--markdown FILE]`` (about 25
minutes: 131072² runs in full).
A cell is the change of the kernel time from the build as built, **bold** outside its 90 % interval.  A barrier
the race rules keep (docs/kernel.md, "Race rules") is refused before it runs: the row names the rule and the
two lines.  A barrier inside a branch these runs never take (a mask, the softcap; the first tile's, where the
column says so) changes nothing here: the row says which calls reach it.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ablation import emit, run

from tfa_sim.listings.library import LISTINGS_DIR, PROVIDERS, load
from tfa_sim.listings.races import RaceError, contexts
from tfa_sim.listings.resolve import flatten, is_barrier
from tfa_sim.listings.syntax import read
from tfa_sim.listings.vocabulary import VOCABULARIES
from tfa_sim.spec.choices import resolve
from tfa_sim.spec.load import build_config

SHAPES = (4096, 32768, 131072)
#: Never folded: the fold samples short units, and a barrier of the first tile moves its estimate of a 131072²
#: launch by up to 1.8 % where the full run moves 0.05 % (benchmarks/README.md, "Issue 48").
NO_FOLD = 1 << 62
#: (stage, shipped listing, the build that runs it).
LISTINGS = (("compute_p", "manual", "manual"), ("compute_p", "port", "dsl"))
#: The combine's launch: a decode step split over S1 (docs/guide/decode.md).
DECODE = {"case.s0": 1, "case.s1": 16384, "case.heads": 8, "schedule.s1_split": "auto"}
#: A race's diagnosis: its first line's number and text, the second's, the tile and the rule.
RACE = re.compile(r":(\d+): (.*?) and .*?:(\d+): (.*?): (\S+): ([A-Z]\d),")
#: The calls these runs make: no mask, no softcap (the other names take every value).
RUN = {"mask": "none", "softcap": False}


def spelled(text: str, stage: str, choices: dict[str, Any]) -> str:
    """``text`` with its ``sync auto`` barriers written out where the rule puts them in some call (and the
    ``sync auto`` lines made ``sync spelled``): the listing a kernel engineer edits barrier by barrier."""
    listing = read(text, stage)
    before: set[int] = set()
    for names in contexts(VOCABULARIES[stage], choices):
        before |= {ln.call.where.line for ln in flatten(listing, names, "") if ln.inserted}
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("sync auto"):
            line = line.replace("sync auto", "sync spelled", 1)
        if number in before:
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}pipe_barrier(PIPE_V)                    # sync auto's, before line {number}")
        out.append(line)
    return "\n".join(out) + "\n"


def barriers(text: str, stage: str, choices: dict[str, Any]) -> list[tuple[int, str | None, dict[str, Any]]]:
    """Each ``pipe_barrier(PIPE_V)`` line of ``text`` (its number) with the calls of these runs that reach it
    (None: none) and one of them."""
    listing = read(text, stage)
    reached: dict[int, list[dict[str, Any]]] = {}
    for names in contexts(VOCABULARIES[stage], choices):
        if any(names.get(k, v) != v for k, v in RUN.items()):
            continue
        for ln in flatten(listing, names, ""):
            if is_barrier(ln, "V") and not ln.inserted:
                reached.setdefault(ln.call.where.line, []).append(names)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("pipe_barrier(PIPE_V)"):
            calls = reached.get(number, [])
            firsts = {c.get("first") for c in calls}
            reach = None if not calls else "first tile" if firsts == {True} else "later tiles" if firsts == {False} \
                else "every call"
            out.append((number, reach, calls[0] if calls else {}))
    return out


def without(text: str, number: int) -> str:
    """``text`` with line ``number`` taken away (a blank line keeps the others' numbers)."""
    lines = text.splitlines()
    lines[number - 1] = ""
    return "\n".join(lines) + "\n"


def cell(got: dict[str, Any], base: dict[str, Any]) -> str:
    if "refused" in got:
        return "refused"
    delta = f"{got['time_us'] / base['time_us'] - 1:+.2%}"  # a barrier moves a launch by tenths of a percent
    low, high = base["interval"]
    return delta if low <= got["time_us"] <= high else f"**{delta}**"


def refusal(message: str) -> str:
    """A race's diagnosis in a cell: the rule and the tile (the row names the two instructions)."""
    m = RACE.search(message)
    return message if m is None else f"refused: {m[6]} on `{m[5]}`"


def between(text: str, stage: str, number: int, names: dict[str, Any]) -> str:
    """The barrier on line ``number`` as the two vector instructions it stands between in a call (``names``)
    that reaches it (``TROWMAX ▸ TMAX``)."""
    lines = flatten(read(text, stage), names, "")
    at = next(k for k, ln in enumerate(lines) if ln.call.where.line == number and is_barrier(ln, "V"))
    before = next(ln.name for ln in reversed(lines[:at]) if ln.op.vector)
    after = next(ln.name for ln in lines[at + 1:] if ln.op.vector)
    return f"`{before}` ▸ `{after}` (line {number})"


def runs(build: str, cases: list[tuple[str, int, dict[str, Any]]], change: dict[str, Any]) -> list[dict[str, Any]]:
    return [run(build, s, {**case, **change}, NO_FOLD) for _, s, case in cases]


def rows(stage: str, name: str, build: str, cases: list[tuple[str, int, dict[str, Any]]], tmp: Path) -> list[str]:
    """The table's rows of one listing: its base (as built, and the spelled copy's), then each barrier."""
    choices = {k: v.name for k, v in resolve(build_config({"kernel": {"build": build}}).kernel).items()}
    shipped = (LISTINGS_DIR / stage / f"{name}.lst").read_text(encoding="utf-8")
    text = spelled(shipped, stage, choices)
    copy = tmp / f"{stage}_{name}.lst"
    copy.write_text(text)
    base = runs(build, cases, {})
    mine = runs(build, cases, {f"listings.{stage}": str(copy)})
    same = all(a.get("time_us") == b.get("time_us") for a, b in zip(base, mine))
    spell = "" if text == shipped else ", its `sync auto` spelled out (the spelled copy's line numbers)"
    out = [f"| **`{name}`** on {build}{spell}: µs as built (90 % interval)"
           f"{'' if same else ' — THE SPELLED COPY DIFFERS'} | | " + " | ".join(
               f"{b['time_us']:.1f} ({b['interval'][0]:.1f}–{b['interval'][1]:.1f})" for b in base) + " |"]
    print(out[-1], flush=True)
    never = []
    for number, reach, names in barriers(text, stage, choices):
        if reach is None:
            never.append(str(number))
            continue
        path = tmp / f"{stage}_{name}_{number}.lst"
        path.write_text(without(text, number))
        try:
            load(stage, str(path), choices)
        except RaceError as exc:
            cells = f"{refusal(str(exc))} |" + " |" * (len(cases) - 1)
        else:
            got = runs(build, cases, {f"listings.{stage}": str(path)})
            cells = " | ".join(cell(g, b) for g, b in zip(got, base)) + " |"
        out.append(f"| {between(text, stage, number, names)} | {reach} | {cells}")
        print(out[-1], flush=True)
    if never:
        out.append(f"| {len(never)} more, in the mask and softcap prefixes (lines {never[0]}–{never[-1]}) | none of "
                   f"these runs | |" + " |" * (len(cases) - 1))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=int, nargs="+", default=list(SHAPES), help="S0 = S1 of each column")
    p.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = p.parse_args()
    started = time.monotonic()
    for module in PROVIDERS:
        importlib.import_module(module)
    cases: list[tuple[str, int, dict[str, Any]]] = [(f"{s}²", s, {}) for s in args.shapes]
    with tempfile.TemporaryDirectory() as tmp:
        lines = ["| barrier taken away | reached by | " + " | ".join(label for label, _, _ in cases) + " |",
                 "|---|---|" + "---|" * len(cases)]
        for stage, name, build in LISTINGS:
            lines += rows(stage, name, build, cases, Path(tmp))
        lines += ["", "The combine (decode S0 = 1, S1 = 16384, 8 heads, `s1_split = auto`, manual build):", "",
                  "| barrier taken away | reached by | decode |", "|---|---|---|",
                  *rows("combine", "manual", "manual", [("decode", 1, DECODE)], Path(tmp))]
    emit(lines, started, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
