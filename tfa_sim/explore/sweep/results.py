"""The files of a sweep directory and the rules that keep them honest.

``sweep.json`` records which sweep made the directory (the digest of its
parsed definition): resuming with a different definition is refused.
``results.jsonl`` (the sweep's points) and ``references.jsonl`` (the
reference point of each shape the sweep does not contain itself) get one
complete line per finished point, appended with a single write; only the last
line can be cut short (a kill during that write) and :func:`repair_tail`
drops it.  Any other line that is not a valid row is refused with its line
number, never skipped silently.  A lock (``sweep.lock``, POSIX record lock,
released by the kernel when the sweep's process dies) keeps two sweeps from
writing one directory.  Derived files (``results.csv``, ``report.json``,
plots) are written to ``NAME.partial`` and renamed, so none is ever half
written under its real name.
"""
from __future__ import annotations

import csv
import errno
import fcntl
import io
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tfa_sim.explore.sweep.schema import filled, show
from tfa_sim.explore.sweep.spec import METRICS, Sweep
from tfa_sim.spec.errors import InputError

RESULTS, REFERENCES, META, LOCK = "results.jsonl", "references.jsonl", "sweep.json", "sweep.lock"
STATUSES = ("ok", "illegal", "excluded", "schedule_error", "timeout", "error")
CSV_COLUMNS = ("key", "status", "time_us", "launch_period_us", "host_sync_us", "total_cycles", "tflops",
               "normalized_tflops", "bound_pipe", "l1_bytes", "ub_bytes", "message")
#: Metrics rows of older sweeps lack (checked when present).
NEWER_METRICS = ("launch_period_us", "host_sync_us")


def check_row(row: Any) -> str | None:
    """What is wrong with a results row, or None."""
    if not isinstance(row, dict):
        return "not a JSON object"
    for key, kind in (("key", str), ("status", str), ("overrides", dict)):
        if not isinstance(row.get(key), kind):
            return f"key {key!r} missing or not a {kind.__name__}"
    if row["status"] not in STATUSES:
        return f"unknown status {row['status'][:40]!r}"
    if not all(isinstance(v, (bool, int, float, str)) for v in row["overrides"].values()):
        return "an axis value that is not a number, boolean or string"
    if row["status"] == "ok":
        for key, kinds in [(m, (int, float)) for m in METRICS] + [("l1_bytes", int), ("ub_bytes", int)]:
            if key in NEWER_METRICS and key not in row:
                continue
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
                return f"ok row without a finite number {key!r}"
        if not isinstance(row.get("bound_pipe"), str) or filled(row.get("config")) is None:
            return "ok row without bound_pipe or a full config"
    return None


def scan(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The rows of a results file and the length in bytes of its valid part."""
    try:
        data = path.read_bytes() if path.exists() else b""
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    rows: list[dict[str, Any]] = []
    keys: set[str] = set()
    size = 0
    for number, line in enumerate(lines, 1):
        last = number == len(lines)
        row = _parse(line)
        if last and (not line or row is None):
            break  # the file ends with a newline, or the last write was cut short
        problem = check_row(row) or ("recorded twice" if row["key"] in keys else None)
        if problem:
            raise InputError(f"{path} line {number}: {problem}; repair or delete that line, or --out a new "
                             f"directory")
        keys.add(row["key"])
        rows.append(row)
        size += len(line) + (0 if last else 1)
    return rows, size


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def read_results(path: Path) -> list[dict[str, Any]]:
    """The complete rows of a results file (read only; a cut-short last line is left out)."""
    return scan(Path(path))[0]


def repair_tail(path: Path, size: int) -> None:
    """Cut a results file to its valid ``size`` bytes, ending in a newline (call under the lock)."""
    if not path.exists():
        return
    with open(path, "rb+") as fh:
        fh.truncate(size)
        fh.seek(max(0, size - 1))
        if size and fh.read(1) != b"\n":
            fh.write(b"\n")


class ResultWriter:
    """Appends one JSON line per finished point with a single write, then fsync."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, row: dict[str, Any]) -> None:
        data = (json.dumps(row, sort_keys=True) + "\n").encode()
        try:
            if os.write(self.fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(self.fd)
        except OSError as exc:  # a short write leaves a partial last line, which a resume drops
            raise InputError(f"cannot write {self.path}: {exc.strerror or exc}; free some space, then rerun to "
                             f"resume") from None

    def close(self) -> None:
        os.close(self.fd)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole or not at all (``path.partial``, then rename)."""
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def results_table(rows: list[dict[str, Any]], missing: Any = "") -> tuple[list[str], list[list[Any]]]:
    """The rows as a table: the header (one column per axis, then :data:`CSV_COLUMNS`) and one list of values
    per row, ``missing`` where a row has no value."""
    axes = sorted({k for r in rows for k in r["overrides"]})
    return [*axes, *CSV_COLUMNS], [[r["overrides"].get(a, missing) for a in axes] +
                                   [r.get(c, missing) for c in CSV_COLUMNS] for r in rows]


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """``results.csv``: :func:`results_table` of the rows."""
    header, body = results_table(rows)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(body)
    write_atomic(path, buf.getvalue())


def read_meta(out: Path) -> dict[str, Any]:
    """``sweep.json`` of a sweep directory, checked (metric, axes)."""
    path = out / META
    if not path.is_file():
        raise InputError(f"{out} is not a sweep directory (no {META}); give the --out of tfa-sim sweep")
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        meta = None
    axes = meta.get("axes") if isinstance(meta, dict) else None
    if not (isinstance(axes, list) and all(isinstance(a, str) for a in axes)
            and isinstance(meta.get("metric"), str) and meta["metric"] in METRICS):
        raise InputError(f"{path} is not a sweep record (JSON with metric and axes); rerun tfa-sim sweep into a "
                         f"new --out")
    return meta


@contextmanager
def claimed(out: Path, sweep: Sweep, sweep_file: str) -> Iterator[None]:
    """Hold ``out`` for this sweep: locked, and recorded in ``sweep.json`` (refused if another sweep made it)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError(f"cannot use --out {out}: {exc.strerror or exc}; give a writable directory") from None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"another tfa-sim sweep is writing {out}; wait for it or use another --out") from None
        _check_owner(out, sweep, sweep_file)
        write_atomic(out / META, json.dumps({"file": str(sweep_file), "digest": sweep.digest(),
                                             "metric": sweep.metric, "axes": [k for k, _ in sweep.axes],
                                             "definition": sweep.definition()}, indent=2))
        yield
    finally:
        os.close(fd)


def _check_owner(out: Path, sweep: Sweep, sweep_file: str) -> None:
    if not (out / META).exists():
        if (out / RESULTS).exists() or (out / REFERENCES).exists():
            raise InputError(f"{out} has results but no {META}; --out a new directory for {sweep_file}")
        return
    meta = read_meta(out)
    if "digest" not in meta:
        raise InputError(f"{out / META} has no sweep digest (an older tfa-sim made it), so resuming it with "
                         f"{sweep_file} cannot be checked; --out a new directory")
    if meta["digest"] != sweep.digest():
        raise InputError(f"{out / META} records a different sweep ({show(meta.get('file'), 300)}) than {sweep_file}; "
                         f"--out a new directory for it (or delete {out} to start over)")
