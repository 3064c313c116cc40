"""``tfa-sim tune``: from a case to its best legal schedule — legality, screen, finalists — into a directory.

The stages (package docstring) run before anything is written, so bad input (a malformed space, an unknown
knob, a budget ≤ 0, a space without a legal point) leaves nothing behind.  Then the output directory is
claimed by the rules of every directory tfa-sim writes (tfa_sim.rundir.directory: a lock, a list of its own
files, every finished file written whole and renamed into place): ``space.json`` records which space made
it (resuming with another is refused), ``results.jsonl`` gets a line per simulation as it finishes (a rerun
skips those), and ``tune.json``, ``best.toml``, ``report.txt`` and ``landscape.png`` are written last, so a
directory without them is a tune that did not finish.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.execute import Executor, check_executor, progress_bar, resumed, run_points
from tfa_sim.explore.sweep.results import RESULTS
from tfa_sim.explore.tune.report import config_toml, format_report, landscape_png, summarise
from tfa_sim.explore.tune.screen import Screen
from tfa_sim.explore.tune.search import Search
from tfa_sim.explore.tune.space import Candidate, Space, legal_candidates, load_space, no_legal_candidate
from tfa_sim.rundir.directory import RunDir, atomic_write
from tfa_sim.rundir.outputs import new_run_dir
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError, ScheduleError
from tfa_sim.spec.extras import missing
from tfa_sim.spec.load import build_config, parse_config

SPACE_RECORD, TUNE_JSON, BEST, REPORT, LANDSCAPE = "space.json", "tune.json", "best.toml", "report.txt", "landscape.png"
FILES = (SPACE_RECORD, RESULTS, TUNE_JSON, BEST, REPORT, LANDSCAPE)


def check_options(budget_s: float | None, top: int, jobs: int, executor: str) -> None:
    """One line for a budget that is not a positive number of seconds, a --top below 1, bad --jobs/--executor."""
    if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))
                                 or not math.isfinite(budget_s) or budget_s <= 0):
        raise InputError(f"--budget-s {budget_s!r}: give a number of seconds > 0 (or leave it out: no limit)")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"--top {top!r}: give at least 1")
    check_executor(jobs, executor)


def screen(space: Space, candidates: list[Candidate], progress: bool) -> dict[str, Any]:
    """Stage 2 on the legal candidates: each ``screened`` with its estimate (in the metric's unit) or a
    ``schedule_error``; twins (the same blocks and programs as a better-estimated candidate) marked."""
    legal = [c for c in candidates if c.status == "legal"]
    configs = [c.config for c in legal if c.config is not None]  # legal candidates have their config
    started = time.monotonic()
    scr = Screen(configs[0])
    bar = progress_bar(len(legal), 0, progress, "screen")
    try:
        found = scr.estimate(configs, bar.update)
    finally:
        bar.close()
    for c, config, est in zip(legal, configs, found):
        c.stage = "screen"
        if "error" in est:
            c.status, c.message = "schedule_error", est["error"]
            continue
        hw, cycles = scr.hw(config), est["estimate_cycles"]
        c.estimate = {"total_cycles": cycles, "time_us": cycles / hw.clock_mhz,
                      "launch_period_us": (cycles + hw.launch.gap(config.hardware.host)) / hw.clock_mhz,
                      "host_sync_us": (cycles + hw.launch.host_sync) / hw.clock_mhz}[space.sweep.metric]
        c.status, c.screen_bound, c.fingerprint = "screened", est["screen_bound"], est["fingerprint"]
    leads: dict[Any, Candidate] = {}
    for c in ranked(candidates):
        lead = leads.setdefault(c.fingerprint, c)
        if lead is not c:
            c.status, c.message = "twin", f"issues the same blocks and programs as candidate {lead.index} " \
                                          f"{lead.overrides}: simulated once, as that one"
    return {"estimated": sum(c.estimate is not None for c in candidates), "probes": len(scr.probes) +
            len(scr.combines), "layouts": len(scr.layouts), "seconds": round(time.monotonic() - started, 3),
            "schedule_errors": sum(c.status == "schedule_error" for c in candidates),
            "twins": sum(c.status == "twin" for c in candidates)}


def ranked(candidates: list[Candidate]) -> list[Candidate]:
    """The screened candidates (twins left out), by estimate."""
    return sorted((c for c in candidates if c.status == "screened"), key=lambda c: (c.estimate, c.index))


def _reference(space: Space) -> dict[str, Any] | None:
    """The kernel's defaults for the case as a full config, None when they are illegal for it."""
    try:
        return build_config(space.reference()).to_dict()
    except InputError:
        return None


def _claim(rd: RunDir, space: Space) -> None:
    """Record the space in ``space.json``, or refuse a directory that another space's tune made."""
    rd.refuse_foreign(FILES)
    record = rd.path / SPACE_RECORD
    digest = space.sweep.digest()
    if record.exists():
        try:
            known = json.loads(record.read_bytes()).get("digest")
        except (OSError, ValueError, AttributeError):
            known = None
        if known != digest:
            raise InputError(f"{record} records another tune (another case, config or space) than this one; "
                             f"--out a new directory for it (or delete {rd.path} to start over)")
    elif (rd.path / RESULTS).exists():
        raise InputError(f"{rd.path} has {RESULTS} but no {SPACE_RECORD}; --out a new directory")
    text = json.dumps({"digest": digest, "space": space.source, "definition": space.sweep.definition()}, indent=1)
    atomic_write(rd.file(SPACE_RECORD), lambda fh: fh.write(text.encode()))


def tune(config: Config, space_source: str | Path | Mapping[str, Any] | None = None, *,
         budget_s: float | None = None, jobs: int = 1, executor: str = "local", scheduler: str | None = None,
         out: str | Path | None = None, top: int = 5, progress: bool = True,
         echo: Callable[[str], None] | None = None) -> tuple[dict[str, Any], Path]:
    """Tune ``config``'s schedule over ``space_source`` (None: the default space) into ``out`` (None: a new
    ``runs/tune-<case>-<time>``); returns the summary (tune.json's content) and the directory."""
    started = time.monotonic()
    check_options(budget_s, top, jobs, executor)
    space = load_space(config, space_source)
    candidates = legal_candidates(space)
    if not any(c.status == "legal" for c in candidates):
        raise no_legal_candidate(space, candidates)
    shape = parse_config(space.base)
    info: dict[str, Any] = {"screen": screen(space, candidates, progress), "case": shape.name,
                            "hardware": shape.hardware.file or shape.hardware.preset}
    order = ranked(candidates)
    if not order:
        errors = [c for c in candidates if c.status == "schedule_error"]
        raise ScheduleError(f"every one of the {len(errors)} legal candidates fails to run; the first: "
                            f"{errors[0].message}")
    if echo:
        echo(f"tfa-sim tune: {len(order)} candidates screened; simulating the finalists…")
    directory = Path(out) if out is not None else new_run_dir(f"tune-{shape.name}")
    with RunDir(directory, "--out", "tune", fresh=out is None, resumable=(RESULTS, SPACE_RECORD)) as rd:
        _claim(rd, space)
        results = rd.file(RESULTS)
        deadline = started + budget_s if budget_s is not None else None
        search = Search(order, _reference(space), space.sweep.metric, {r["key"]: r for r in resumed(results)},
                        deadline)
        searching = time.monotonic()
        bar = progress_bar(None, len(search.rows), progress, "tune")
        try:
            run_points(search.tasks(), {False: results, True: results},
                       Executor(jobs, executor, scheduler, space.sweep.point_timeout, window=jobs), bar,
                       search.record)
        finally:
            bar.close()
        search.settle()
        info["search"] = {"seconds": round(time.monotonic() - searching, 3)}
        info["seconds"] = round(time.monotonic() - started, 3)
        summary = summarise(space, candidates, search, info, top)
        _write(rd, summary)
    return summary, directory


def _write(rd: RunDir, summary: dict[str, Any]) -> None:
    """tune.json, report.txt, landscape.png and best.toml, each whole."""
    if summary["best"] is None:
        raise ScheduleError(f"no finalist ran: {summary['search']['stop']}; see {rd.path / RESULTS}")
    summary["landscape_skipped"] = missing(LANDSCAPE, "matplotlib")  # the tune stands without its picture
    text = json.dumps(summary, indent=1, default=str) + "\n"
    atomic_write(rd.file(TUNE_JSON), lambda fh: fh.write(text.encode()))
    report = format_report(summary) + "\n"
    atomic_write(rd.file(REPORT), lambda fh: fh.write(report.encode()))
    png = None if summary["landscape_skipped"] else landscape_png(summary)
    if png is not None:
        atomic_write(rd.file(LANDSCAPE), lambda fh: fh.write(png))
    best, metric = summary["best"], summary["metric"]
    value = f"time_us {best['time_us']}" + (f", {metric} {best['metric']}" if metric != "time_us" else "")
    comment = (f"tfa-sim tune: the best of {summary['points']} points for {summary['case']} on "
               f"{summary['hardware']} ({summary['space']}): {value}; timing only, as tuned: tfa-sim run "
               f"{rd.path / BEST}")
    config = {s: dict(v) for s, v in best["config"].items()}
    for section, key in (("case", "mask"), ("hardware", "file")):
        if config[section][key]:  # a file named relative to where the tune ran: absolute, for any directory
            config[section][key] = str(Path(config[section][key]).resolve())
    toml = config_toml(config, comment)
    atomic_write(rd.file(BEST), lambda fh: fh.write(toml.encode()))
