"""A CSV file a profiler wrote (msprof, torch_npu): its header and whole rows as text, the damaged rows set aside and
named, and checked number reading (exact decimals for timestamps)."""
from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from tfa_sim.rundir.profiles.columns import LARGEST, MISSING
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import read_bytes, show

MAX_BYTES = 1 << 28
FIX_COLLECT = "collect with msprof op (its default --aic-metrics include PipeUtilization) or msprof --application"
#: A unit written after a number (``1800 MHz``, ``12.5us``), set aside before the number is read.
UNIT = re.compile(r"\s*(mhz|us|μs|µs)$", re.IGNORECASE)


def key(name: str) -> str:
    """A column name as it is matched: without spaces, lower case."""
    return re.sub(r"\s+", "", name).lower()


@dataclass(frozen=True)
class Damaged:
    """A row whose cell count is not its file's: where it is and what it holds (its cells are never realigned to
    the header, only searched for an operator's name)."""

    path: Path
    line: int
    cells: tuple[str, ...]
    width: int  # the header's cell count

    def says(self) -> str:
        """The row in words, for notes and errors."""
        return f"line {self.line} of {self.path} has {len(self.cells)} cells, its header {self.width}"

    def names(self, op: str) -> bool:
        """True when a cell of the row is ``op`` or begins with it (the row may be a launch of it)."""
        return any(cell.strip().startswith(op) for cell in self.cells)


class Table:
    """A CSV file msprof or torch_npu wrote.  Rows have the cell count most of them have: the header's, or the
    header's and a trailing empty cell (a comma ending every line, or only the header's or only the rows').  A row
    of another count is damaged: in the middle of the file it is set aside (``damaged``) and never realigned; the
    last row short of the count is the file cut, refused."""

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
        width = _row_width(numbered[0][1], [r for _, r in numbered[1:]], len(self.header))
        self.rows: list[list[str]] = []
        self.lines: list[int] = []
        self.damaged: list[Damaged] = []
        for i, (n, row) in enumerate(numbered[1:], start=2):
            if len(row) == width and not any(cell.strip() for cell in row[len(self.header):]):
                self.rows.append(row[:len(self.header)])
                self.lines.append(n)
            elif i == len(numbered) and len(row) < width:
                raise InputError(f"profile file {path} line {n} has {len(row)} cells, its header "
                                 f"{len(self.header)}: the file is cut in its last row; copy the whole file from "
                                 f"the board again")
            else:
                self.damaged.append(Damaged(path, n, tuple(row), len(self.header)))
        self._index = {key(h): i for i, h in enumerate(self.header)}

    def require_whole(self, what: str) -> None:
        """Refuse a damaged row where every row counts (``what`` each row is: msprof op's per-block rows)."""
        if self.damaged:
            row = self.damaged[0]
            raise InputError(f"profile file {self.path}: {row.says()} (a damaged row, not a cut file); each row is "
                             f"{what}, so none may be left out: collect the profile again")

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

    def exact(self, row: int, col: int) -> Decimal | None:
        """The cell as the exact decimal it writes, finite and ≥ 0 (a unit written after it, ``1800 MHz``,
        ``12.5us``, aside): a timestamp of 16 digits and more keeps every digit, where a float keeps 0.25 µs.
        None when msprof marks it missing (empty, NA, N/A)."""
        text = UNIT.sub("", self.rows[row][col].strip())
        if text.lower() in MISSING:
            return None
        where = f"profile file {self.path} line {self.lines[row]}, column {self.header[col]}"
        try:
            value = Decimal(text)
        except InvalidOperation:
            raise InputError(f"{where}: {show(text)} is not a number") from None
        if not value.is_finite() or value < 0:
            raise InputError(f"{where}: {text} is not a time or count (NaN, infinite or negative); the profile is "
                             f"damaged: collect it again")
        return value

    def number(self, row: int, col: int) -> float | None:
        """The cell as a number from 0 to :data:`LARGEST` (as :meth:`exact`), None when it is missing."""
        value = self.exact(row, col)
        if value is None:
            return None
        number = float(value)
        if not number <= LARGEST:
            raise InputError(f"profile file {self.path} line {self.lines[row]}, column {self.header[col]}: "
                             f"{value:.6g} is larger than any time or count of a kernel's launch (at most "
                             f"{LARGEST:g}); the profile is damaged: collect it again")
        return number

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


def _row_width(header: list[str], rows: list[list[str]], named: int) -> int:
    """The cell count of a whole row: the most common among the rows that hold the ``named`` columns and nothing
    past them (on a tie the header's own count, else the smallest); ``named`` when no row does."""
    counts = Counter(len(r) for r in rows if len(r) >= named and not any(c.strip() for c in r[named:]))
    if not counts:
        return named
    most = max(counts.values())
    tied = sorted(width for width, n in counts.items() if n == most)
    return len(header) if len(header) in tied else tied[0]
