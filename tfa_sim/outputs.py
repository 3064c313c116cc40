"""Run directories: naming, and writes that never leave a partial file under its final name."""
from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np


def new_run_dir(case_name: str, root: str | Path = "runs") -> Path:
    """A fresh ``runs/<case>-<timestamp>[-n]`` directory."""
    base = Path(root) / f"{case_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        path, n = Path(f"{base}-{n}"), n + 1
    path.mkdir(parents=True)
    return path


def _atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "wb") as fh:
        write(fh)
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    _atomic(path, lambda fh: fh.write((json.dumps(data, indent=2, default=_json_default) + "\n").encode()))


def write_json_compact(path: Path, data: Any) -> None:
    """Large JSON (traces): no indentation."""
    _atomic(path, lambda fh: fh.write(json.dumps(data, separators=(",", ":"), default=_json_default).encode()))


def write_npy(path: Path, array: np.ndarray) -> None:
    _atomic(path, lambda fh: np.save(fh, array, allow_pickle=False))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


EVENT_COLUMNS = ("id", "unit", "pipe", "stage", "block", "tile", "sub", "kind", "start", "end", "bytes", "flops",
                 "slots", "deps")


def write_events(path: Path, events: list) -> None:
    """The run's instruction log, one row per instruction group (cycles).

    ``slots`` as ``name=index;…``; ``deps`` as ``id:cause:latency:via;…`` — the instructions
    whose completion, slot release or flag (``via``) released this one.
    """
    def write(fh) -> None:
        import io

        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        w = csv.writer(text)
        w.writerow(EVENT_COLUMNS)
        for e in events:
            w.writerow((*e[:12], ";".join(f"{k}={v}" for k, v in e.slots.items()),
                        ";".join(f"{i}:{cause}:{lat:g}:{via}" for i, cause, lat, via in e.deps)))
        text.flush()
        text.detach()

    _atomic(path, write)


def read_events(path: Path) -> list:
    """The event log written by :func:`write_events`, as :class:`~tfa_sim.engine.pipes.Record` rows."""
    from tfa_sim.engine.pipes import Record
    from tfa_sim.errors import InputError

    if not path.is_file():
        raise InputError(f"{path} not found: the run was made with --no-event-log or is not a run directory")
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        if tuple(next(reader, ())) != EVENT_COLUMNS:
            raise InputError(f"{path} is not a tfa-sim event log (header differs); rerun tfa-sim run")
        for row in reader:
            slots = dict((k, int(v)) for k, v in (kv.split("=") for kv in row[12].split(";") if kv))
            deps = tuple((int(i), cause, float(lat), via) for i, cause, lat, via in
                         (d.split(":", 3) for d in row[13].split(";") if d))
            out.append(Record(int(row[0]), row[1], row[2], row[3], int(row[4]), int(row[5]), int(row[6]), row[7],
                              float(row[8]), float(row[9]), int(row[10]), int(row[11]), slots, deps))
    return out


def read_summary(run_dir: Path) -> dict:
    from tfa_sim.errors import InputError

    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise InputError(f"{run_dir} is not a run directory (no summary.json); give the --out of a tfa-sim run")
    return json.loads(path.read_text())
