"""Run directories: naming, files written atomically (``directory.atomic_write``), and reading them back.

The readers check what they read: a damaged or foreign ``summary.json``, ``events.npz`` or ``events.csv`` is
one :class:`InputError` line naming the file and what is wrong, never a traceback deeper in.
"""
from __future__ import annotations

import csv
import io
import json
import re
import time
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.rundir.directory import atomic_write as _atomic
from tfa_sim.rundir.event_file import load_log
from tfa_sim.rundir.events import CAUSES, DISPATCH, EventLog, Record
from tfa_sim.rundir.memory import require
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import decode_text, os_problem, read_bytes, require_fields, show
from tfa_sim.spec.units import LANES, TRACKS, parse_unit
from tfa_sim.stages import LOGGED_STAGES


def new_run_dir(case_name: str, root: str | Path = "runs") -> Path:
    """A fresh ``runs/<case>-<timestamp>[-n]`` directory (``case_name`` is a checked name)."""
    base = Path(root) / f"{case_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:  # another run of the same case started in the same second
            path, n = Path(f"{base}-{n}"), n + 1
        except OSError as exc:
            raise InputError(f"cannot create the run directory {path} ({os_problem(exc)}); give --out DIR") from None


def write_json(path: Path, data: Any) -> None:
    _atomic(path, lambda fh: fh.write((json.dumps(data, indent=2, default=json_default) + "\n").encode()))


def write_npy(path: Path, array: np.ndarray) -> None:
    _atomic(path, lambda fh: np.save(fh, array, allow_pickle=False))


def json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


EVENT_COLUMNS = ("id", "unit", "pipe", "stage", "block", "tile", "sub", "kind", "start", "end", "bytes", "flops",
                 "slots", "deps")


#: The columnar event log of a run (tfa_sim.rundir.events), and its CSV rendering (small runs, or --events-csv).
EVENTS_NPZ, EVENTS_CSV = "events.npz", "events.csv"


def write_log(path: Path, log: EventLog) -> None:
    """The columnar event log as one uncompressed ``.npz``."""
    _atomic(path, log.save)


def write_events(path: Path, log: EventLog) -> None:
    """The run's instruction log as CSV, one row per instruction group (cycles), derived from the columnar log.

    ``slots`` as ``name=index;…``; ``deps`` as ``id:cause:latency:via;…`` — the instructions
    whose completion, slot release or flag (``via``) released this one.
    """
    def write(fh) -> None:
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        w = csv.writer(text)
        w.writerow(EVENT_COLUMNS)
        slots = {i: ";".join(f"{k}={v}" for k, v in held.items()) for i, held in log.slot_dicts().items()}
        deps = {i: ";".join(f"{p}:{cause}:{lat!r}:{via}" for p, cause, lat, via in d)
                for i, d in log.dep_tuples().items()}
        w.writerows((*row, slots.get(row[0], ""), deps.get(row[0], "")) for row in log.decoded())
        text.flush()
        text.detach()

    _atomic(path, write)


#: The fields of summary.json that check, timeline and plan read, with their kinds (safety.require_fields).
SUMMARY_FIELDS = {"case": "str", "hardware": "str", "clock_mhz": "positive", "total_cycles": "positive",
                  "time_us": "number", "config": "table", "overhead.core_stagger": "number",
                  "overhead.block_dispatch": "number", "config.schedule.qk_preload": "int",
                  "config.schedule.cv_fifo_size": "int", "config.schedule.cv_fifo_cons_sync_period": "int",
                  "config.tiling.cube_s0": "int", "config.tiling.tile_s1": "int", "inputs": "str?",
                  "backend": "str?", "input_hashes": "table?"}
#: Bytes one event-log row takes once read (record, and the views and graphs built from it).
EVENT_ROW_BYTES = 4096
_INT = re.compile(r"-?[0-9]{1,18}")


def read_summary(run_dir: Path) -> dict:
    """``RUN_DIR/summary.json``, with the fields readers use checked."""
    path = Path(run_dir) / "summary.json"
    data = read_bytes(path, "summary", "give the --out of a tfa-sim run", max_bytes=1 << 26)
    try:
        summary = json.loads(decode_text(data, path, "summary"))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not valid JSON ({str(exc).splitlines()[0][:80]}); rerun tfa-sim run") from None
    require_fields(summary, SUMMARY_FIELDS, f"{path} is not a tfa-sim summary; rerun tfa-sim run")
    return summary


def events_file(run_dir: Path) -> Path:
    """The event log of a run directory: ``events.npz``, or ``events.csv`` of runs written before it existed."""
    npz = Path(run_dir) / EVENTS_NPZ
    return npz if npz.exists() or not (Path(run_dir) / EVENTS_CSV).exists() else Path(run_dir) / EVENTS_CSV


#: Bytes a loaded log holds per event row beyond its file (the Record views built from it), and the bytes a row
#: takes in events.npz with its edges, slots and counter samples (measured: 165 on a 910b2 16k² run).
RECORD_BYTES, FILE_ROW_BYTES = 1024, 160


def read_log(path: Path) -> EventLog:
    """``events.npz`` checked as it is read: one InputError line naming it when it is damaged."""
    hint = "the run was made with --no-event-log or is not a run directory"
    try:
        size = Path(path).stat().st_size
    except (OSError, ValueError):
        size = 0  # read_bytes reports it
    require({"event log": 2 * size + size // FILE_ROW_BYTES * RECORD_BYTES}, 0, "read")
    data = read_bytes(path, "event log", hint)
    try:
        return load_log(data)
    except (ValueError, TypeError) as exc:
        text = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise InputError(f"{path} is damaged ({text}); rerun tfa-sim run") from None


def read_events(path: Path, cores: set[int] | None = None, tiles: tuple[int, int] | None = None) -> list[Record]:
    """A run's event log as :class:`~tfa_sim.rundir.events.Record` rows, every field and every dependency
    checked: ``path`` a run directory (its :func:`events_file`), an ``events.npz`` or an ``events.csv``.
    From ``events.npz`` only the rows of ``cores`` and ``tiles`` (a ≤ tile < b) become records (a large run's
    log is read whole but viewed in part); events.csv gives every row."""
    path = Path(path)
    if path.is_dir():
        path = events_file(path)
    if path.suffix == ".npz":
        log = read_log(path)
        return log.records(log.window(cores, tiles) if cores is not None or tiles is not None else None)
    return _read_csv(path)


def _read_csv(path: Path) -> list[Record]:
    """The CSV event log written by :func:`write_events`."""
    hint = "the run was made with --no-event-log or is not a run directory"
    size = _file_size(path)
    require({"event log": 3 * size + size // 60 * EVENT_ROW_BYTES}, 0, "read")
    text = decode_text(read_bytes(path, "event log", hint), path, "event log")
    if text and not text.endswith("\n"):  # write_events ends every row, the last one too
        raise InputError(f"{path} ends in the middle of a row: it was cut short; rerun tfa-sim run")
    try:
        rows = csv.reader(io.StringIO(text, newline=""))
        if tuple(next(rows, ())) != EVENT_COLUMNS:
            raise InputError(f"{path} is not a tfa-sim event log (header differs); rerun tfa-sim run")
        events = [_record(row) for row in rows]
        _check_deps(events)
    except (ValueError, csv.Error) as exc:
        line = getattr(rows, "line_num", "?")
        raise InputError(f"{path} line {line} is damaged ({exc}); rerun tfa-sim run") from None
    return events


def _file_size(path: Path) -> int:
    try:
        return Path(path).stat().st_size
    except (OSError, ValueError):
        return 0  # read_bytes reports it


def _int(text: str, low: int = 0) -> int:
    if not _INT.fullmatch(text) or int(text) < low:
        raise ValueError(f"{show(text)} is not an integer ≥ {low}")
    return int(text)


def _cycles(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1e15:  # also false for NaN
        raise ValueError(f"{show(text)} is not a cycle count")
    return value


def _record(row: list[str]) -> Record:
    if len(row) != len(EVENT_COLUMNS):
        raise ValueError(f"{len(row)} fields, expected {len(EVENT_COLUMNS)}")
    unit = re.fullmatch(r"core([0-9]{1,6})\.(cubecore0|veccore([0-9]))", row[1])
    if unit is None or int(unit[3] or 0) >= LANES or row[2] not in TRACKS[parse_unit(row[1]).kind]:
        raise ValueError(f"unit/pipe {show(row[1])} {show(row[2])} is not one of a chip's")
    if row[3] not in (*LOGGED_STAGES, DISPATCH):
        raise ValueError(f"stage {show(row[3])} unknown")
    slots = {k: _int(v) for k, _, v in (kv.partition("=") for kv in row[12].split(";") if kv)}
    deps = []
    for dep in filter(None, row[13].split(";")):
        i, cause, lat, via = (dep.split(":", 3) + ["", "", ""])[:4]
        if cause not in CAUSES:
            raise ValueError(f"dependency {show(dep)} has no cause among {', '.join(CAUSES)}")
        deps.append((_int(i), cause, _cycles(lat), via))
    start, end = _cycles(row[8]), _cycles(row[9])
    if end < start:
        raise ValueError(f"instruction {row[0]} ends before it starts")
    return Record(_int(row[0]), row[1], row[2], row[3], _int(row[4]), _int(row[5], -1), _int(row[6]), row[7],
                  start, end, _int(row[10]), _int(row[11]), slots, tuple(deps))


def _check_deps(events: list) -> None:
    """Instruction ids are unique, and dependencies name logged instructions without a cycle."""
    ids = {e.id for e in events}
    if len(ids) != len(events):
        raise ValueError("an instruction id appears twice")
    graph = {}
    for e in events:
        preds = [d[0] for d in e.deps]
        missing = [p for p in preds if p not in ids]
        if missing:
            raise ValueError(f"instruction {e.id} depends on {missing[0]}, which is not in the log")
        graph[e.id] = preds
    try:
        TopologicalSorter(graph).prepare()
    except CycleError:
        raise ValueError("the dependencies form a cycle") from None
