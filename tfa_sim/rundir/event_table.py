"""The event log as one table for the data tools: an Arrow table (pandas makes its DataFrame from it) and a
Parquet file, which pandas, polars, DuckDB or pyarrow read without tfa-sim.

One row per event (instruction group or dispatch span) with the columns of ``events.csv`` but the
dependencies and slots: ``id``, ``unit``, ``pipe``, ``stage``, ``block``, ``tile``, ``sub``, ``kind``,
``start``, ``end`` (cycles), ``bytes``, ``flops``; the names are strings, decoded from the log's codes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.rundir.directory import atomic_write
from tfa_sim.rundir.events import EVENT_DTYPES, EventLog

#: The log's columns as the table names them (``nbytes`` is ``bytes``, as in events.csv).
COLUMNS = {name: "bytes" if name == "nbytes" else name for name in EVENT_DTYPES}
#: Columns that hold codes into the log's string tables.
NAMED = {"unit": "units", "pipe": "pipes", "stage": "stages", "kind": "kinds"}


def event_table(log: EventLog, rows: np.ndarray | None = None) -> Any:
    """A ``pyarrow.Table`` of the log's events (all, or the indices ``rows``), in log order."""
    import pyarrow as pa

    columns = log.events.view()
    arrays = {}
    for name, label in COLUMNS.items():
        values = columns[name] if rows is None else columns[name][rows]
        if name in NAMED:
            names = pa.array(log.names(NAMED[name]), pa.string())
            arrays[label] = names.take(pa.array(values)) if len(names) else pa.array([], pa.string())
        else:
            arrays[label] = pa.array(values)
    return pa.table(arrays)


def write_parquet(path: Path, log: EventLog, rows: np.ndarray | None = None) -> None:
    """The events (all, or the indices ``rows``) as a Parquet file at ``path``, written atomically
    (``tfa-sim trace --format parquet``)."""
    import pyarrow.parquet as pq

    table = event_table(log, rows)
    atomic_write(path, lambda fh: pq.write_table(table, fh))
