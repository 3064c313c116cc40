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

    ``slots`` as ``name=index;…``; ``deps`` as ``id:kind:latency;…`` — the instructions
    whose completion, slot release or flag released this one.
    """
    def write(fh) -> None:
        import io

        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        w = csv.writer(text)
        w.writerow(EVENT_COLUMNS)
        for e in events:
            w.writerow((*e[:12], ";".join(f"{k}={v}" for k, v in e.slots.items()),
                        ";".join(f"{i}:{kind}:{lat:g}" for i, kind, lat in e.deps)))
        text.flush()
        text.detach()

    _atomic(path, write)
