"""What each design choice is worth: each of the PTO-DSL port's settings carried alone onto the manual build, and
each of the manual build's onto the port, at 4096², 32768² and 131072² (one head, 910b2, timing only); then each
mechanism engineers changed in public (docs/kernel.md, "Mechanisms") set on each build, and any setting of one's
own (``--try KEY=VALUE``, a plugin's value with ``--plugin FILE``).

Run: ``python benchmarks/ablation.py [--shapes 4096 32768 131072] [--markdown FILE] [--plugin FILE] [--try
KEY=VALUE …]`` (about 8 minutes).  A
setting is a ``[kernel]`` design choice or a section default where the two bundles differ (configs/builds/
manual.toml, dsl.toml; a key one bundle leaves out has the schema's default there).  Each cell is the change of the
kernel time from the build as built (its time and 90 % interval, ``tfa-sim run``'s ``time_interval_us``, head the
columns), **bold** where the changed time lies outside that interval: a change inside it is smaller than the model's
stated error.  Launches from S = 32768 on are folded (``--fold``: bench_fold.py measures the fold within 0.2 % of
full runs there); 4096² runs in full.  A setting legality refuses on its own says so, with the rule's words, and
one the simulation stops (an exp ring overwritten: exit 3) says that.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tfa_sim
from tfa_sim.spec.builds import load_bundle
from tfa_sim.spec.config import SECTION_TYPES, parse_override
from tfa_sim.spec.errors import InputError, ScheduleError

SHAPES = (4096, 32768, 131072)
FOLD_FROM = 32768
#: The mechanisms' table folds from here only: the fold samples a persistent launch with unit flags too short
#: (2.6 % at 32768², benchmarks/README.md "Issue 47"), so 32768² runs in full there.
MECHANISMS_FOLD_FROM = 131072
#: The mechanisms' settings, each set alone on a build as built (docs/kernel.md, "Mechanisms").
MECHANISMS: tuple[dict[str, Any], ...] = (
    {"kernel.cube_handoff": "unit_flag"},
    {"kernel.ub_union": False},
    {"schedule.ub_src": 1},
    {"kernel.ub_union": False, "schedule.ub_src": 1},
    {"schedule.local_slot_num": 1},
    {"schedule.local_slot_num": 3},
    {"kernel.exp_ring": 5},
    {"kernel.exp_ring": 3},
)


def differing(source: str, target: str, s1: int) -> list[tuple[str, Any]]:
    """(section.key, source's value) of every setting where the two builds differ for S1 = ``s1``."""
    a, b = load_bundle(source).defaults(s1), load_bundle(target).defaults(s1)

    def value(settings: dict, section: str, key: str) -> Any:
        return settings.get((section, key), getattr(SECTION_TYPES[section](), key))

    order = [*(k for k in a if k[0] == "kernel"), *sorted(k for k in {*a, *b} if k[0] != "kernel")]
    keys = list(dict.fromkeys([*order, *(k for k in b if k[0] == "kernel")]))
    return [(f"{s}.{k}", value(a, s, k)) for s, k in keys if value(a, s, k) != value(b, s, k)]


PLUGINS: list[str] = []  # --plugin: loaded into every run


def run(build: str, s: int, change: dict[str, Any], fold_from: int = FOLD_FROM) -> dict[str, Any]:
    """One timing-only run's kernel time and interval (folded from S = ``fold_from``), or the refusal (or the
    schedule error)."""
    overrides = {"kernel.build": build, "case.s0": s, "case.s1": s, "numerics.enabled": False, **change}
    try:
        summary = tfa_sim.run(overrides=overrides, hw="910b2", event_log=False, fold=s >= fold_from,
                              plugins=PLUGINS).summary
    except InputError as exc:
        return {"refused": str(exc).removeprefix("illegal config: ")}
    except ScheduleError as exc:
        return {"refused": f"stops with exit 3: {str(exc).split(': ', 1)[-1]}"}
    return {"time_us": summary["time_us"], "interval": summary["time_interval_us"]}


def shown(value: Any) -> str:
    """A setting's value as a config spells it; an absent count (None) as what stands for it."""
    if value is None:
        return "(local_slot_num)"
    return str(value).lower() if isinstance(value, bool) else str(value)


def cell(target: str, s: int, change: dict[str, Any], base: dict[str, Any], notes: dict[str, str],
         fold_from: int = FOLD_FROM) -> str:
    """The change of the kernel time when ``change`` is set on ``target`` at S = ``s``, **bold** outside the
    90 % interval of ``target`` as built (``base``, run alike); a refusal is a footnote."""
    got = run(target, s, change, fold_from)
    if "refused" in got:
        notes[f"`{setting(change)}` on {target}"] = got["refused"]
        return "refused¹"
    delta = f"{got['time_us'] / base['time_us'] - 1:+.1%}"
    low, high = base["interval"]
    return delta if low <= got["time_us"] <= high else f"**{delta}**"


def setting(change: dict[str, Any]) -> str:
    return ", ".join(f"{key} = {shown(value)}" for key, value in change.items())


def column(source: str, target: str, s: int, key: str, base: dict[str, Any], notes: dict[str, str]) -> str:
    """One cell: ``source``'s value of ``key`` carried alone onto ``target`` at S = ``s`` (:func:`cell`); (same)
    where the builds agree there."""
    carried = dict(differing(source, target, s))
    if key not in carried:
        return "(same)"
    return cell(target, s, {key: carried[key]}, base, notes)


def builds_table(shapes: tuple[int, ...], base: dict[tuple[str, int], dict[str, Any]],
                 notes: dict[str, str]) -> list[str]:
    """The Markdown table: a row per setting where manual and dsl differ (manual's value ↔ dsl's), the port's value
    carried onto the manual build in the first columns, the manual's onto the port in the last."""
    sizes = " | ".join(f"{s}²" for s in shapes)
    lines = [f"| setting: manual ↔ dsl | dsl's onto manual: {sizes} | manual's onto dsl: {sizes} |",
             "|---|" + "---|" * 2 * len(shapes),
             "| as built: µs (90 % interval) | " + " | ".join(
                 f"{base[b, s]['time_us']:.1f} ({base[b, s]['interval'][0]:.1f}–{base[b, s]['interval'][1]:.1f})"
                 for b in ("manual", "dsl") for s in shapes) + " |"]
    keys = dict.fromkeys(k for s in shapes for k, _ in differing("dsl", "manual", s))
    for key in keys:
        values = {b: dict(differing(b, "dsl" if b == "manual" else "manual", max(shapes))).get(key) for b in
                  ("manual", "dsl")}
        cells = [column("dsl", "manual", s, key, base["manual", s], notes) for s in shapes] + \
            [column("manual", "dsl", s, key, base["dsl", s], notes) for s in shapes]
        lines.append(f"| `{key}`: {shown(values['manual'])} ↔ {shown(values['dsl'])} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    return lines


def settings_table(shapes: tuple[int, ...], changes: Sequence[dict[str, Any]], notes: dict[str, str]) -> list[str]:
    """The Markdown table of ``changes``: each set alone on the manual build and on the port, as built (folded
    from :data:`MECHANISMS_FOLD_FROM`)."""
    base = {(b, s): run(b, s, {}, MECHANISMS_FOLD_FROM) for b in ("manual", "dsl") for s in shapes}
    sizes = " | ".join(f"{s}²" for s in shapes)
    lines = [f"| setting | on manual: {sizes} | on dsl: {sizes} |", "|---|" + "---|" * 2 * len(shapes)]
    for change in changes:
        cells = [cell(b, s, change, base[b, s], notes, MECHANISMS_FOLD_FROM) for b in ("manual", "dsl")
                 for s in shapes]
        lines.append(f"| `{setting(change)}` | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    return lines


def table(shapes: tuple[int, ...], extra: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Both tables and their footnotes."""
    base = {(b, s): run(b, s, {}) for b in ("manual", "dsl") for s in shapes}
    notes: dict[str, str] = {}
    lines = builds_table(shapes, base, notes)
    lines += ["", f"**Mechanisms** (docs/kernel.md, \"Mechanisms\"), each set alone on a build as built (folded "
                  f"from {MECHANISMS_FOLD_FROM}²):", "", *settings_table(shapes, [*MECHANISMS, *extra], notes)]
    return [*lines, "", *(f"¹ {what}: {note}" for what, note in notes.items())]


def emit(lines: list[str], started: float, markdown: Path | None) -> None:
    """Print the tables and the seconds they took; write them to ``markdown`` too."""
    text = "\n".join(lines)
    print(text)
    print(f"({time.monotonic() - started:.0f} s)")
    if markdown:
        markdown.write_text(text + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=int, nargs="+", default=list(SHAPES), help="S0 = S1 of each column")
    p.add_argument("--markdown", type=Path, help="also write the tables to this file")
    p.add_argument("--plugin", action="append", default=[], metavar="FILE", help="a module adding values to the "
                   "choices (docs/guide/extending.md), loaded into every run")
    p.add_argument("--try", dest="tries", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of your own for the mechanisms' table, e.g. kernel.stage_order=gu_first")
    args = p.parse_args()
    started = time.monotonic()
    shapes = tuple(args.shapes)
    PLUGINS.extend(args.plugin)
    extra = [{f"{section}.{key}": value} for section, key, value in map(parse_override, args.tries)]
    emit(table(shapes, extra), started, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
