"""A CSV file a profiler wrote (msprof, torch_npu): its header and whole rows as text, the damaged rows set aside and
named, and checked number reading (exact decimals for timestamps)."""
from __future__ import annotations

import csv
import io
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
    line: int  # where the row begins
    last: int  # where it ends: later than ``line`` when a quote left open takes the next lines into the row
    cells: tuple[str, ...]
    width: int  # the cell count of the file's whole rows
    header: int  # the header's (``width`` less a trailing empty cell every row ends with)

    def says(self) -> str:
        """The row in words, for notes and errors."""
        where = f"line {self.line}" if self.last == self.line else f"lines {self.line}–{self.last} (a quote left open)"
        return f"{where} of {self.path} has {len(self.cells)} cells where its rows have {self.width}"

    def names(self, op: str, whole: bool = False) -> bool:
        """True when a cell of the row is ``op`` or (``whole`` False) begins with it: the row may be a launch of
        it."""
        return any(cell.strip() == op or (not whole and cell.strip().startswith(op)) for cell in self.cells)


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
        numbered = _rows(text, path)
        if not numbered:
            raise InputError(f"profile file {path} is empty; {FIX_COLLECT}")
        self.header = _without_trailing_empty([h.strip() for h in numbered[0][2]], 0)
        width = _row_width(numbered[0][2], [r for _, _, r in numbered[1:]], len(self.header))
        self.rows: list[list[str]] = []
        self.lines: list[int] = []
        self.damaged: list[Damaged] = []
        for i, (first, n, row) in enumerate(numbered[1:], start=2):
            if len(row) == width and not any(cell.strip() for cell in row[len(self.header):]):
                self.rows.append(row[:len(self.header)])
                self.lines.append(n)
            elif i == len(numbered) and len(row) < width:
                raise InputError(f"profile file {path} line {n} has {len(row)} cells where its rows have {width}: "
                                 f"the file is cut in its last row; copy the whole file from the board again")
            else:
                self.damaged.append(Damaged(path, first, n, tuple(row), width, len(self.header)))
        self._index: dict[str, list[int]] = {}
        for i, h in enumerate(self.header):
            self._index.setdefault(key(h), []).append(i)

    def require_whole(self, what: str) -> None:
        """Refuse a damaged row where every row counts (``what`` each row is: msprof op's per-block rows)."""
        if self.damaged:
            row = self.damaged[0]
            raise InputError(f"profile file {self.path}: {row.says()} (a damaged row, not a cut file); each row is "
                             f"{what}, so none may be left out: collect the profile again")

    def column(self, names: tuple[str, ...], required: str = "") -> int | None:
        """The index of the first of ``names`` present; None, or with ``required`` (why it is needed) an error."""
        for name in names:
            found = self._index.get(key(name), [])
            if len(found) > 1:
                raise InputError(f"profile file {self.path} has the column {self.header[found[0]]} "
                                 f"{len(found)} times (columns {', '.join(str(i + 1) for i in found)}): which one "
                                 f"to read cannot be told; give the file as the profiler wrote it")
            if found:
                return found[0]
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


def _rows(text: str, path: Path) -> list[tuple[int, int, list[str]]]:
    """Each row that is not blank, with the lines it begins and ends on.  Lines end only at CR, LF or CRLF, as the
    CSV format's do: a form feed or U+2028 inside a cell is part of it (``str.splitlines`` would break there)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    out: list[tuple[int, int, list[str]]] = []
    try:
        while True:
            first = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                return out
            if any(cell.strip() for cell in row):
                out.append((first, reader.line_num, row))
    except csv.Error as exc:
        raise InputError(f"profile file {path} is not a CSV ({exc})") from None


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
