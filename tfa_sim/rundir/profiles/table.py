"""A CSV file a profiler wrote (msprof, torch_npu): its header and rows as text, and checked number reading."""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from tfa_sim.rundir.profiles.columns import MISSING
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import read_bytes, show

MAX_BYTES = 1 << 28
FIX_COLLECT = "collect with msprof op (its default --aic-metrics include PipeUtilization) or msprof --application"


def key(name: str) -> str:
    """A column name as it is matched: without spaces, lower case."""
    return re.sub(r"\s+", "", name).lower()


class Table:
    """A CSV file msprof or torch_npu wrote.  A trailing empty column (a comma ending every line, or only the
    header's or only the rows') is dropped; any other row whose cell count is not the header's is refused."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = read_bytes(path, "profile file", "give the files msprof wrote", max_bytes=MAX_BYTES)
        try:
            text = data.decode("utf-8-sig")
            bad = text.find("\0")
        except UnicodeDecodeError as exc:
            text, bad = "", exc.start
        if bad >= 0:
            raise InputError(f"profile file {path} is binary, not text (byte {bad} is 0x{data[bad]:02x}): not the CSV "
                             f"msprof writes; give the .csv files of msprof's output")
        reader = csv.reader(text.splitlines())
        try:  # each kept row with the file's line it ends on (blank lines are skipped, not renumbered)
            numbered = [(reader.line_num, r) for r in reader if any(cell.strip() for cell in r)]
        except csv.Error as exc:
            raise InputError(f"profile file {path} is not a CSV ({exc})") from None
        if not numbered:
            raise InputError(f"profile file {path} is empty; {FIX_COLLECT}")
        self.header = _without_trailing_empty([h.strip() for h in numbered[0][1]], 0)
        self.rows = [_without_trailing_empty(r, len(self.header)) for _, r in numbered[1:]]
        self.lines = [n for n, _ in numbered[1:]]
        for n, row in zip(self.lines, self.rows):
            if len(row) != len(self.header):
                raise InputError(f"profile file {path} line {n} has {len(row)} cells, its header {len(self.header)}: "
                                 f"the file is cut or damaged")
        self._index = {key(h): i for i, h in enumerate(self.header)}

    def column(self, names: tuple[str, ...], required: str = "") -> int | None:
        """The index of the first of ``names`` present; None, or with ``required`` (why it is needed) an error."""
        for name in names:
            if key(name) in self._index:
                return self._index[key(name)]
        if required:
            raise InputError(f"profile file {self.path} has no column {' or '.join(names)} ({required}); "
                             f"{FIX_COLLECT}")
        return None

    def text(self, row: int, col: int | None) -> str:
        """The cell stripped ('' without the column)."""
        return "" if col is None else self.rows[row][col].strip()

    def number(self, row: int, col: int) -> float | None:
        """The cell as a finite number ≥ 0 (a unit written after it, ``1800 MHz``, ``12.5us``, aside), None when
        msprof marks it missing (empty, NA, N/A)."""
        text = re.sub(r"\s*(mhz|us|μs|µs)$", "", self.rows[row][col].strip(), flags=re.IGNORECASE)
        if text.lower() in MISSING:
            return None
        where = f"profile file {self.path} line {self.lines[row]}, column {self.header[col]}"
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{where}: {show(text)} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise InputError(f"{where}: {text} is not a time or count (NaN, infinite or negative); the profile is "
                             f"damaged: collect it again")
        return value

    def count(self, row: int, col: int, what: str) -> int | None:
        """A whole number ≥ 1 (Block Dim, block_id + 1), or None when missing."""
        value = self.number(row, col)
        if value is not None and (value != int(value) or (value < 1 and what != "block_id")):
            raise InputError(f"profile file {self.path} line {self.lines[row]}: {what} {value:g} is not a count; "
                             f"collect with --task-time=l1")
        return None if value is None else int(value)


def _without_trailing_empty(cells: list[str], width: int) -> list[str]:
    """``cells`` less the empty cells past ``width`` (0: every trailing empty cell, for a header)."""
    end = len(cells)
    while end > width and not cells[end - 1].strip():
        end -= 1
    return cells[:end]
