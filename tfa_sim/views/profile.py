"""A board's profile (msprof's or torch_npu's) beside the model, pipe by pipe: ``tfa-sim profile``
(docs/profiles.md).

The board's task duration (one launch's, or the mean of many, their spread given beside it) stands against the
model's kernel time (docs/timing.md, "What msprof's Task Duration is"), and every pipe's busy time per core — the
mean over the cores (a vector pipe's over the vector cores) and its spread — against the model's, ``ratio`` =
board / model.  The board's blocks go to cores as the model's do (block b on core b mod cores): a core's figure is
the sum over its blocks.  The scalar pipes are not simulated: their board figures stand alone.  The disagreements
are ranked by how far the ratio is from 1 in either direction, ``|log(ratio)|`` (twice and half as far), and the
largest are put in words with the model's stall figures.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfa_sim.rundir.msprof import CORE_TIME, PIPE_COLUMNS, SIMULATED, BoardProfile
from tfa_sim.rundir.profiles.table import Damaged
from tfa_sim.spec.config import HardwareConfig
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.extras import require
from tfa_sim.spec.geometry import Dispatch
from tfa_sim.spec.hardware import Hardware, load_hardware, preset_names
from tfa_sim.spec.units import LANES, parse_unit
from tfa_sim.views.figures import bars, finite, label
from tfa_sim.views.roofline_board import beside_board, format_board

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: What ``tfa-sim profile`` writes into its directory.
PROFILE_FILES = ("profile.json", "profile.png", "profile.svg", "roofline.svg")
#: A board clock within this share of the preset's is the preset's (msprof gives whole MHz).
CLOCK_TOLERANCE = 0.01
#: Disagreements put in words.
FINDINGS = 3
CORE_WORD = {"cube": "cube core", "vec": "vector core"}
#: Damaged rows named in the notes (profile.json lists them all).
DAMAGED_SHOWN = 5


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= CLOCK_TOLERANCE * b


def check_clock(board: BoardProfile, hw: Hardware) -> None:
    """The profile's chip is one the presets know (its Rated Freq is a preset's clock) and it ran at the clock
    the model runs at (its Current Freq is the config's preset's)."""
    where = f"profile {board.source}"
    for what, mhz in (("Rated Freq", board.rated_mhz), ("the clock it ran at", board.current_mhz)):
        if mhz is not None and not mhz > 0:
            raise InputError(f"{where}: {what} is {mhz:g} MHz, no clock: the profile is damaged; collect it again")
    if board.rated_mhz is not None:
        known = {name: load_hardware(HardwareConfig(preset=name)).clock_mhz for name in preset_names()}
        if not any(_near(board.rated_mhz, clock) for clock in [*known.values(), hw.clock_mhz]):
            listed = ", ".join(f"{n} {c:g}" for n, c in known.items())
            raise InputError(f"{where}: Rated Freq {board.rated_mhz:g} MHz is no preset's clock ({listed} MHz): a "
                             f"chip tfa-sim does not know; describe it in a preset file of your own "
                             f"(configs/hw/*.toml, clock_mhz = {board.rated_mhz:g}) and give it with --hw FILE")
    if board.current_mhz is not None and not _near(board.current_mhz, hw.clock_mhz):
        same = [n for n in preset_names() if _near(board.current_mhz, load_hardware(HardwareConfig(preset=n))
                                                   .clock_mhz)]
        raise InputError(f"{where}: the board ran at {board.current_mhz:g} MHz, the model's {hw.name} "
                         f"at {hw.clock_mhz:g} MHz; give --hw "
                         + (f"{' or '.join(same)}" if same else f"a preset file with clock_mhz = {board.current_mhz:g}")
                         + ", or profile the board at its rated clock")


def check_launch(board: BoardProfile, case: str, blocks: int, launches: int) -> None:
    """The profile is of the config's launch: one launch, Block Dim its grid (``blocks``: its blocks, or the
    persistent cores of ``kernel.launch_grid = "persistent"``; not checked where the profile has no Block Dim,
    which :func:`notes` says), Mix Block Dim two vector cores per block."""
    where = f"profile {board.source}"
    if launches != 1:
        raise InputError(f"{where} holds one kernel launch, {case} runs {launches} (split-S1 and its combine): "
                         f"profile and compare an unsplit run (--set schedule.s1_split=1)")
    if board.block_dim is not None and board.block_dim != blocks:
        raise InputError(f"{where}: Block Dim {board.block_dim}, but {case} launches {blocks} blocks; give the config "
                         f"the board ran (its S0, CUBE_S0, batch and heads make the blocks)")
    if board.mix_block_dim is not None and board.mix_block_dim != LANES * blocks:
        raise InputError(f"{where}: Mix Block Dim {board.mix_block_dim} is not {LANES} vector cores for each of the "
                         f"{blocks} blocks: not the TFA kernel's launch; give the kernel's profile (--op NAME)")


def _spread(values: list[float]) -> dict[str, Any]:
    return {"min_us": min(values), "max_us": max(values), "per_core_us": values} if values else {}


def board_figures(board: BoardProfile, launch: Dispatch) -> dict[str, dict[str, Any]]:
    """Per pipe (and ``cube.time``/``vec.time``, a core's whole time): the board's busy µs per core, ``mean_us``
    and, from msprof op's per-block rows, the spread across cores and each core's value (in core order, a core's
    vector cores one after the other).  ``launch``: the config's launch (its plan's), whose cores ran the board's
    blocks (a block of a persistent grid is a core)."""
    cores = launch.cores
    out: dict[str, dict[str, Any]] = {}
    if board.units is None:  # a per-task table: one launch block's figures (Block Dim of them: a persistent grid's
        # block is a core) spread over the cores; without Block Dim they cannot be (the table has no pipes then)
        blocks = board.block_dim or 0
        return {name: {"mean_us": value * blocks / cores} for name, value in board.means.items() if blocks}
    per_core: dict[str, dict[tuple[int, int], float]] = defaultdict(lambda: defaultdict(float))
    for unit in board.units:
        for name, value in unit.values.items():
            per_core[name][(launch.core_of(unit.block), unit.lane)] += value
    for name, values in per_core.items():
        ordered = [values[key] for key in sorted(values)]
        out[name] = {"mean_us": math.fsum(ordered) / len(ordered), **_spread(ordered)}
    return out


def model_figures(summary: dict[str, Any]) -> dict[str, list[float]]:
    """Per pipe kind (``vec.V``), the model's busy µs of each unit in core order."""
    out: dict[str, list[float]] = defaultdict(list)
    scale = summary["total_cycles"] / summary["clock_mhz"]
    for core in sorted(summary["pipes"], key=lambda c: int(c[4:])):
        for name, fraction in sorted(summary["pipes"][core].items()):
            out[f"{parse_unit(f'{core}.{name}').kind}.{name.rsplit('.', 1)[1]}"].append(fraction * scale)
    return out


def waits(bubbles: list[dict[str, Any]]) -> dict[str, tuple[float, str]]:
    """Per pipe kind, the share of its time the model's pipe waits and for what, most (from the bubbles)."""
    out: dict[str, tuple[float, str]] = {}
    for row in sorted(bubbles, key=lambda r: -r["fraction"]):
        total, what = out.get(row["pipe"], (0.0, row["text"].split("waiting for ", 1)[-1]))
        out[row["pipe"]] = (total + row["fraction"], what)
    return out


def _pipe_row(name: str, board: dict[str, Any] | None, model: list[float] | None, column: str | None,
              wait: tuple[float, str] | None) -> dict[str, Any]:
    """One pipe's entry of profile.json."""
    simulated = name in SIMULATED
    row: dict[str, Any] = {"simulated": simulated, "column": column, "board_us": None, "board_min_us": None,
                           "board_max_us": None, "board_per_core_us": None, "model_us": None, "model_min_us": None,
                           "model_max_us": None, "ratio": None, "model_wait_fraction": None,
                           "model_waiting_for": None, "note": ""}
    if board is not None:
        row.update(board_us=board["mean_us"], board_min_us=board.get("min_us"), board_max_us=board.get("max_us"),
                   board_per_core_us=board.get("per_core_us"))
    if simulated and model:
        row.update(model_us=math.fsum(model) / len(model), model_min_us=min(model), model_max_us=max(model),
                   model_wait_fraction=round(wait[0], 4) if wait else 0.0, model_waiting_for=wait[1] if wait else None)
    if not simulated:
        row["note"] = "not simulated"
    elif board is None:
        row["note"] = "not in the profile"
    elif row["model_us"]:
        row["ratio"] = row["board_us"] / row["model_us"]
    else:
        row["note"] = "the model never uses it"
    return row


def side_by_side(board: BoardProfile, summary: dict[str, Any], bubbles: list[dict[str, Any]], launch: Dispatch
                 ) -> dict[str, dict[str, Any]]:
    """Every pipe's entry of profile.json: the board's figures beside the model's run (``summary``'s timing
    keys: blocks, cores_used, pipes, total_cycles, clock_mhz), its stalls (``bubbles``) and its ``launch``."""
    boards = board_figures(board, launch)
    models, stalls = model_figures(summary), waits(bubbles)
    return {name: _pipe_row(name, boards.get(name), models.get(name), board.columns.get(name), stalls.get(name))
            for name in PIPE_COLUMNS}


def compare(board: BoardProfile, summary: dict[str, Any], bubbles: list[dict[str, Any]], launch: Dispatch
            ) -> dict[str, Any]:
    """profile.json: the board's task and pipes beside the model's run of the config (``summary``, its
    ``launch``), the pipes ordered by disagreement (``largest``) and the largest put in words (``findings``)."""
    cores = summary["cores_used"]
    boards = board_figures(board, launch)
    pipes = side_by_side(board, summary, bubbles, launch)
    compared = [n for n, p in pipes.items() if p["ratio"]]
    report: dict[str, Any] = {
        "case": summary["case"], "hardware": summary["hardware"], "clock_mhz": summary["clock_mhz"],
        "source": str(board.source), "layout": board.layout, "files": board.files, "op_name": board.op_name,
        "op_type": board.op_type, "launches": board.launches, "launch": board.launch,
        **launch_spread(board.launch_task_us), "block_dim": board.block_dim, "mix_block_dim": board.mix_block_dim,
        "current_freq_mhz": board.current_mhz, "rated_freq_mhz": board.rated_mhz, "cores": cores,
        "task_duration_us": board.task_us, "task_column": board.columns.get("task", "Task Duration(us)"),
        "model_us": summary["time_us"], "model_interval_us": summary["time_interval_us"],
        "task_ratio": board.task_us / summary["time_us"],
        "model_measure": "time_us: the kernel time, first block's start to last block's end, block set-up included",
        "board_core_us": {kind: boards.get(f"{kind}.time", {}).get("mean_us") for kind in CORE_TIME},
        "pipes": pipes,
        "largest": sorted(compared, key=lambda n: -abs(math.log(pipes[n]["ratio"]))),
        "missing_columns": board.missing, "collect": board.collect or None, "also_found": board.others,
        "skipped_tasks": board.skipped, "skipped_lines": [damaged_entry(d) for d in board.damaged],
        "config": summary.get("config")}
    report["roofline"] = beside_board(summary.get("roofline"), board.task_us, pipes)
    report["findings"] = [finding(name, report) for name in report["largest"][:FINDINGS]]
    report["notes"] = notes(report)
    return report


def damaged_entry(row: Damaged) -> dict[str, Any]:
    """profile.json's record of a row left out: its file, the lines it begins and ends on, its cell count, the
    file's rows' and the header's (a row one longer when every line ends in a comma)."""
    return {"file": str(row.path), "line": row.line, "last_line": row.last, "cells": len(row.cells),
            "row_cells": row.width, "header_cells": row.header}


def launch_spread(task_us: list[float]) -> dict[str, Any]:
    """Every launch's task µs (in start-time order) and their min, median and max."""
    return {"launch_task_us": task_us, "task_min_us": min(task_us), "task_median_us": statistics.median(task_us),
            "task_max_us": max(task_us)}


def notes(report: dict[str, Any]) -> list[str]:
    """What the reading leaves to say: the launches read and their spread, what could not be checked or
    compared and why, which layout was read where a directory held several, the rows skipped (of other task types,
    and damaged ones)."""
    out = [launches_note(report)] if report["launches"] > 1 else []
    if report["block_dim"] is None:
        out.append("Block Dim: not in the profile (torch_npu's Level0 writes none), so the launch's blocks were not "
                   "checked against the config")
    if report["missing_columns"]:
        alone = not any(p["board_us"] is not None for name, p in report["pipes"].items() if p["simulated"])
        out.append(f"pipes: the profile has no column {', '.join(report['missing_columns'])}, so "
                   f"{'the task alone is' if alone else 'those pipes are not'} compared; {report['collect']}")
    if report["also_found"]:
        out.append(f"read {report['layout']} {', '.join(report['files'][:2])}; also there, not read: "
                   f"{'; '.join(report['also_found'])}")
    if report["skipped_tasks"]:
        out.append(f"skipped {sum(report['skipped_tasks'].values())} rows of other task types ("
                   + ", ".join(f"{kind} {n}" for kind, n in report["skipped_tasks"].items()) + ")")
    if report["skipped_lines"]:
        out.append(damaged_note(report["skipped_lines"]))
    return out


def damaged_note(rows: list[dict[str, Any]]) -> str:
    """The damaged rows left out, in words: which lines of which file, and why."""
    shown = "; ".join(f"{_lines(r)} of {r['file']} ({r['cells']} cells where its rows have {r['row_cells']})"
                      for r in rows[:DAMAGED_SHOWN])
    more = f" and {len(rows) - DAMAGED_SHOWN} more" if len(rows) > DAMAGED_SHOWN else ""
    return (f"skipped {len(rows)} damaged row{'s' if len(rows) > 1 else ''}: {shown}{more} — a cell missing or one "
            f"too many, so the row is left out, not realigned; the whole rows are compared")


def _lines(row: dict[str, Any]) -> str:
    """Where a damaged row lies: a line, or the lines a quote left open took into it."""
    if row["last_line"] == row["line"]:
        return f"line {row['line']}"
    return f"lines {row['line']}–{row['last_line']} (a quote left open)"


def launches_note(report: dict[str, Any]) -> str:
    """How many launches were read (several), which is compared, and their spread."""
    n, name = report["launches"], report["op_name"]
    spread = (f"min {report['task_min_us']:.2f}, median {report['task_median_us']:.2f}, max "
              f"{report['task_max_us']:.2f} µs")
    if report["launch"] is not None:
        return (f"launches: launch {report['launch']} of the {n} of {name} compared (--launch, 0-based in "
                f"start-time order); all {n}: {spread}")
    return (f"launches: {n} of {name} read, {spread}; their mean {report['task_duration_us']:.2f} µs is "
            f"compared (--launch N, 0-based in start-time order, compares one)")


def finding(name: str, report: dict[str, Any]) -> str:
    """One disagreement in words: how much busier the board is, and what the model's pipe does meanwhile."""
    p, (kind, pipe) = report["pipes"][name], name.split(".")
    core = CORE_WORD[kind]
    text = (f"{name}: the board is busy {p['ratio']:.2f}× the model's time ({p['board_us']:.2f} against "
            f"{p['model_us']:.2f} µs per {core}); the model's {pipe} pipe is busy "
            f"{p['model_us'] / report['model_us']:.0%} of the kernel")
    if p["model_wait_fraction"]:
        text += f" and waits {p['model_wait_fraction']:.0%} of it, most for {p['model_waiting_for']}"
    board_core = report["board_core_us"].get(kind)
    if board_core:
        text += f"; the board's is busy {p['board_us'] / board_core:.0%} of its {core}'s time"
    return text


def _figure_text(mean: float | None, low: float | None, high: float | None) -> str:
    if mean is None:
        return "—"
    return f"{mean:.2f}" + (f" ({low:.2f}–{high:.2f})" if low is not None and high is not None else "")


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side table, the task first, then a row per pipe (for pandas, notebooks and the console)."""
    low, high = report["model_interval_us"]
    several = report["launches"] > 1 and report["launch"] is None
    rows = [{"pipe": "task", "board_us": report["task_duration_us"],
             "board_min_us": report["task_min_us"] if several else None,
             "board_max_us": report["task_max_us"] if several else None,
             "model_us": report["model_us"], "model_min_us": low, "model_max_us": high,
             "ratio": report["task_ratio"], "simulated": True, "column": report["task_column"],
             "note": "model: kernel time, 90 % interval"}]
    for name, p in report["pipes"].items():
        rows.append({"pipe": name, **{k: p[k] for k in ("board_us", "board_min_us", "board_max_us", "model_us",
                                                          "model_min_us", "model_max_us", "ratio", "simulated",
                                                          "column", "note")}})
    return rows


def format_profile(report: dict[str, Any]) -> str:
    """What ``tfa-sim profile`` prints: the profile, the table, the notes, the largest disagreements in words."""
    launches = f"{report['launches']} launch{'es' if report['launches'] > 1 else ''}"
    clock = f" at {report['current_freq_mhz']:g} MHz" if report["current_freq_mhz"] else ""
    blocks = f"{report['block_dim']} blocks" if report["block_dim"] is not None else "unknown blocks"
    lines = [f"tfa-sim profile: {report['op_name']}, {report['layout']} profile of {blocks}{clock} ({launches}) "
             f"against {report['case']} on {report['hardware']}",
             f"  {'':12s} {'board µs per core (min–max)':>30s} {'model µs per core (min–max)':>30s} "
             f"{'board/model':>12s}"]
    for row in table_rows(report):
        ratio = f"{row['ratio']:.2f}" if row["ratio"] else row["note"]
        board = _figure_text(row["board_us"], row["board_min_us"], row["board_max_us"])
        model = _figure_text(row["model_us"], row["model_min_us"], row["model_max_us"])
        lines.append(f"  {row['pipe']:12s} {board:>30s} {model:>30s} {ratio:>12s}")
    lines.append(f"  task: the board's {report['task_column']} (device dispatch, execution and completion of the "
                 f"task) against the model's kernel time and its 90 % interval")
    lines += [f"  {text}" for text in report["notes"]]
    if report["largest"]:
        lines.append("  furthest from 1 (|log board/model|): " + ", ".join(
            f"{n} {report['pipes'][n]['ratio']:.2f}" for n in report["largest"]))
    lines += [f"  {text}" for text in report["findings"]]
    lines += format_board(report.get("roofline") or {})
    return "\n".join(lines)


def html(report: dict[str, Any]) -> str:
    """The table and the findings as HTML, for notebooks."""
    def cell(value: Any) -> str:
        text = "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
        return f"<td style='text-align:right'>{escape(text)}</td>"

    heads = ("pipe", "board µs", "min", "max", "model µs", "min", "max", "board/model", "note")
    keys = ("board_us", "board_min_us", "board_max_us", "model_us", "model_min_us", "model_max_us", "ratio", "note")
    body = "".join(f"<tr><th style='text-align:left'>{escape(r['pipe'])}</th>{''.join(cell(r[k]) for k in keys)}</tr>"
                   for r in table_rows(report))
    head = "".join(f"<th>{escape(h)}</th>" for h in heads)
    items = "".join(f"<li>{escape(t)}</li>" for t in [*report["notes"], *report["findings"]])
    return (f"<p><b>{escape(report['op_name'])}</b>: {escape(report['layout'])} profile of {report['block_dim']} "
            f"blocks against {escape(report['case'])} on {escape(report['hardware'])}</p>"
            f"<table><tr>{head}</tr>{body}</table><ul>{items}</ul>")


def figure(report: dict[str, Any]) -> Figure:
    """Per pipe, the board's and the model's busy µs per core side by side, the spread across cores as whiskers;
    the pipes the model does not simulate with the board's bar alone.  Every number goes through
    :mod:`tfa_sim.views.figures`: an absent one draws no bar, a whisker is never negative."""
    from matplotlib.figure import Figure

    names = list(report["pipes"])
    fig = Figure(figsize=(8, 0.5 * len(names) + 1.4))
    ax = fig.add_subplot()
    for offset, side, color in ((-0.2, "board", "tab:orange"), (0.2, "model", "tab:blue")):
        ys, widths, errs = bars((i + offset, p[f"{side}_us"], p[f"{side}_min_us"], p[f"{side}_max_us"])
                                for i, p in enumerate(report["pipes"][n] for n in names))
        ax.barh(ys, widths, height=0.38, color=color, xerr=errs, capsize=2, label=side)
    ax.set_yticks(range(len(names)), [f"{n} ({label(p['ratio'])}×)" if finite(p["ratio"]) else f"{n} ({p['note']})"
                                      for n, p in ((n, report["pipes"][n]) for n in names)])
    ax.invert_yaxis()
    ax.set_xlabel("busy µs per core (mean; whiskers: min–max over cores)")
    ax.set_title(f"{report['op_name']} on the board against the model of {report['case']} on {report['hardware']}\n"
                 f"task duration {label(report['task_duration_us'])} µs, model kernel time "
                 f"{label(report['model_us'])} µs", fontsize=9)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def write_roofline(path: Path, report: dict[str, Any]) -> None:
    """roofline.svg: the model's run and its stages, and the board's point at its task duration
    (:mod:`tfa_sim.views.roofline_board`)."""
    from tfa_sim.rundir.directory import atomic_write_via
    from tfa_sim.views.roofline_chart import chart, render

    table = (report.get("roofline") or {}).get("table")
    runs = [("model", table)] if table else []
    boards = [("board", table, report["roofline"]["board_cycles"])] if table else []
    atomic_write_via(path, lambda tmp: render(chart(runs, boards), tmp))


def check_charts() -> None:
    """profile.png and profile.svg are drawn by matplotlib (the ``plots`` extra): one line if it is missing."""
    require("writing profile.png and profile.svg", "matplotlib")


def write_profile(report: dict[str, Any], out: str | Path | None) -> Path:
    """profile.json, profile.png and profile.svg into ``out`` (None: a new ``runs/profile-<case>-<time>``), by
    the rules of every directory tfa-sim writes (docs/guide/safety.md)."""
    check_charts()
    from tfa_sim.rundir.directory import RunDir, atomic_write_via
    from tfa_sim.rundir.outputs import new_run_dir, write_json

    rd = (RunDir(out, "--out", "profile") if out is not None
          else RunDir(new_run_dir(f"profile-{report['case']}"), "--out", "profile", fresh=True))
    with rd:
        rd.refuse_foreign(PROFILE_FILES)
        rd.remove(lambda rel: rel in PROFILE_FILES)
        fig = figure(report)
        for suffix in ("png", "svg"):
            atomic_write_via(rd.file(f"profile.{suffix}"),
                             lambda tmp: fig.savefig(tmp, dpi=110, metadata={"Date": None} if tmp.suffix == ".svg"
                                                     else None))
        write_roofline(rd.file("roofline.svg"), report)
        write_json(rd.file("profile.json"), report)
    return rd.path
