"""Directories tfa-sim writes into — a run's ``--out``, ``gen-data --out`` — and how it writes there.

The rules (docs/guide/safety.md):

* **Atomic files.** A file is written under a fresh name made by ``mkstemp`` in the same directory
  (``O_EXCL``: an existing file or symlink there is never opened) and renamed over its final name
  when complete; a reader never sees half a file under a final name.
* **Only its own files.** ``.tfa-sim-files.json`` lists every file tfa-sim wrote into the directory.
  A command deletes or replaces only listed files; if a name it would write exists and is not listed
  (the user's ``summary.json``, a ``dumps/`` folder of their own) it refuses with exit 2 naming it.
  A name is listed *before* its file appears, so a crash never leaves an unlisted file of tfa-sim's.
* **Nothing left by a failure.** A command that fails after it started writing (an error, an interrupt) takes
  back what it wrote: every listed file it created or replaced is deleted, and the file list with it when the
  command made it, so the directory holds what it held before, less the earlier files the command had already
  replaced; a directory it made is removed.  Only files a command can resume from (``resumable``: the tuner's
  results) stay.
* **One command at a time.** ``.tfa-sim.lock`` is created with ``O_EXCL`` and holds the PID, host and
  command; a second command fails with exit 2 naming the holder.  A lock whose process is gone (same
  host) is taken over with a one-line notice.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from tfa_sim.rundir.lock import Lock
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import check_path, is_name, os_problem, read_bytes

FILE_LIST = ".tfa-sim-files.json"
STAGE_PREFIX = ".tfa-sim-stage."
#: Runs with more instruction groups than this skip timeline.svg (draw one with tfa-sim timeline --cores/--tiles).
TIMELINE_MAX_EVENTS = 20_000
#: Runs with more events than this skip events.csv unless --events-csv asks for it (events.npz holds them all:
#: the CSV takes ~100 bytes and ~3 µs per row to write).
EVENTS_CSV_MAX = 200_000
#: Runs with more events than this write trace.json for a window of cores only (Perfetto struggles beyond a few
#: hundred thousand events); ``tfa-sim trace RUN --cores a:b`` exports any other window from events.npz.
TRACE_MAX_EVENTS = 300_000
#: The cores of that window unless --trace-window says otherwise (a ≤ core < b).
TRACE_WINDOW = (0, 4)


def created_mode(directory: bool = False) -> int:
    """The permissions ``open``/``mkdir`` would give under the process umask (mkstemp and mkdtemp make their
    files private, 0600/0700; a finished run is as readable as any file the user writes)."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` through a fresh temporary file in its directory, renamed into place when complete."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    except OSError as exc:
        raise InputError(f"cannot write {path} ({os_problem(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            os.fchmod(fh.fileno(), created_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write {path} ({os_problem(exc)})") from None
        raise


def atomic_write_via(path: Path, produce: Callable[[Path], Any]) -> None:
    """Like :func:`atomic_write` for writers that want a path (matplotlib, plotly): ``produce`` writes into a
    private temporary directory next to ``path``; the result is renamed into place."""
    try:
        tmpdir = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial"))
    except OSError as exc:
        raise InputError(f"cannot write {path} ({os_problem(exc)})") from None
    try:
        produce(tmpdir / path.name)
        os.replace(tmpdir / path.name, path)
    except OSError as exc:
        raise InputError(f"cannot write {path} ({os_problem(exc)})") from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _valid_entry(rel: Any) -> bool:
    """A file-list entry: ``name``, ``dir/`` or ``dir/name`` of names (tfa_sim.spec.safety) — never a path out."""
    if not isinstance(rel, str):
        return False
    parts = rel[:-1].split("/") if rel.endswith("/") else rel.split("/")
    return 1 <= len(parts) <= 2 and all(is_name(p) for p in parts)


def _make_dir(path: Path, what: str) -> bool:
    """Create ``path`` (and parents) if needed; True if it was created here."""
    try:
        path.mkdir(parents=True)
        return True
    except FileExistsError:
        if not path.is_dir():
            raise InputError(f"{what} {path} exists and is not a directory; give a directory") from None
        return False
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be created ({os_problem(exc)})") from None


class RunDir:
    """A directory claimed for writing (a context manager): locked, with the list of tfa-sim's own files."""

    def __init__(self, path: str | Path, what: str = "--out", command: str = "run", create: bool = True,
                 fresh: bool = False, resumable: Iterable[str] = ()) -> None:
        self.path, self.what, self.command, self.create = check_path(path, what), what, command, create
        self.created = fresh  # made by the caller for this command (new_run_dir)
        self.files: set[str] = set()
        self.resumable = frozenset(resumable)  # kept when the command fails: a later one resumes from them
        self._lock = Lock(self.path, what, command)
        self._found: dict[str, tuple[int, int, int]] = {}  # each listed file as it was on entry
        self._had_list = False

    def __enter__(self) -> RunDir:
        if self.create:
            self.created |= _make_dir(self.path, self.what)
        elif not self.path.is_dir():
            raise InputError(f"{self.what} {self.path} is not a directory; give the --out of a tfa-sim run")
        self._lock.acquire()
        try:
            self.files = self._read_list()
            self._had_list = os.path.lexists(self.path / FILE_LIST)
            self._found = {rel: found for rel in self.files if (found := self._identity(rel)) is not None}
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is not None:
                self._take_back()
        finally:
            self._lock.release()
        if self.created and exc[0] is not None:
            with contextlib.suppress(OSError):
                self.path.rmdir()  # only if still empty: a failed command leaves no empty directory behind

    def _identity(self, rel: str) -> tuple[int, int, int] | None:
        """The listed file ``rel`` as it is now (inode, modification time, size), None when it does not exist."""
        try:
            st = os.lstat(self.path / rel.rstrip("/"))
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _take_back(self) -> None:
        """After a failure: delete the listed files this command created or replaced (all but the resumable ones),
        and the file list if this command made it and nothing is left to list.  Best effort: the failure itself
        is what the user is told about."""
        written = {rel for rel in self.files
                   if rel not in self.resumable and self._identity(rel) not in (None, self._found.get(rel))}
        with contextlib.suppress(OSError, InputError):
            self.remove(lambda rel: rel in written and not rel.endswith("/"))
            self.remove(lambda rel: rel in written and rel.endswith("/") and os.path.isdir(self.path / rel)
                        and not os.listdir(self.path / rel))
            if not self._had_list and not any(self._identity(rel) for rel in self.files):
                os.unlink(self.path / FILE_LIST)

    def _read_list(self) -> set[str]:
        path = self.path / FILE_LIST
        if not os.path.lexists(path):
            return set()
        try:
            data = json.loads(read_bytes(path, "file list", max_bytes=1 << 28))
            entries = data["files"]
            if not isinstance(entries, list) or not all(_valid_entry(e) for e in entries):
                raise ValueError("an entry is not a file name")
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path} is damaged ({type(exc).__name__}); it lists the files tfa-sim may replace "
                             f"in {self.path}: choose another {self.what}, or remove tfa-sim's files and it") from None
        return set(entries)

    def _save_list(self) -> None:
        data = json.dumps({"written_by": "tfa-sim", "files": sorted(self.files)}, indent=1) + "\n"
        atomic_write(self.path / FILE_LIST, lambda fh: fh.write(data.encode()))

    def _foreign(self, rel: str) -> str | None:
        """Why ``rel`` (which exists) may not be replaced, or None if tfa-sim wrote it."""
        st = os.lstat(self.path / rel)
        if rel.endswith("/"):
            if rel not in self.files or not stat.S_ISDIR(st.st_mode):
                return f"{rel} (not made by tfa-sim)"
            inside = sorted(f"{rel}{n}" for n in os.listdir(self.path / rel))
            stray = [r for r in inside if r not in self.files or not stat.S_ISREG(os.lstat(self.path / r).st_mode)]
            return f"{stray[0]} (not written by tfa-sim)" if stray else None
        if rel not in self.files:
            return f"{rel} (not written by tfa-sim)"
        return None if stat.S_ISREG(st.st_mode) else f"{rel} (no longer the file tfa-sim wrote)"

    def refuse_foreign(self, names: Iterable[str], fix: str = "") -> None:
        """InputError naming the first of ``names`` (``dir/`` for a directory) that exists but is not tfa-sim's;
        ``fix`` is the way out besides moving it (default: another directory)."""
        for rel in names:
            if os.path.lexists(self.path / rel.rstrip("/")):
                why = self._foreign(rel)
                if why:
                    raise InputError(f"{self.what} {self.path} holds {why}; tfa-sim replaces only its own files: "
                                     f"move it away or {fix or f'choose another {self.what}'}")

    def remove(self, select: Callable[[str], bool]) -> None:
        """Delete the listed files ``select`` picks (deepest first; directories once empty) — nothing else."""
        for rel in sorted((r for r in self.files if select(r)), key=lambda r: (-r.count("/"), r.endswith("/"))):
            target = self.path / rel.rstrip("/")
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(target)
                if rel.endswith("/") and stat.S_ISDIR(st.st_mode):
                    target.rmdir()
                elif not rel.endswith("/") and stat.S_ISREG(st.st_mode):
                    target.unlink()
            self.files.discard(rel)
        self._save_list()

    def file(self, name: str) -> Path:
        """The path of ``name`` in this directory, listed as tfa-sim's before anything is written there."""
        self.add([name])
        return self.path / name

    def add(self, names: Iterable[str]) -> None:
        self.files.update(names)
        self._save_list()

    @contextlib.contextmanager
    def stage(self) -> Iterator[Path]:
        """A private temporary directory inside this one (removed afterwards) to assemble files in."""
        try:
            tmp = Path(tempfile.mkdtemp(dir=self.path, prefix=STAGE_PREFIX))
        except OSError as exc:
            raise InputError(f"cannot write in {self.path} ({os_problem(exc)})") from None
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def commit(self, staged: Path, into: str | None = None) -> list[str]:
        """Move the files assembled in ``staged`` into place: as directory ``into`` (which must not exist), or
        each file to the top level (replacing only tfa-sim's files).  Returns the names moved."""
        names = sorted(os.listdir(staged))
        try:
            if into is not None:
                self.add([f"{into}/", *(f"{into}/{n}" for n in names)])
                os.chmod(staged, created_mode(directory=True))
                os.rename(staged, self.path / into)
                return names
            self.refuse_foreign(names)
            self.add(names)
            for n in names:
                os.replace(staged / n, self.path / n)
        except OSError as exc:
            raise InputError(f"cannot write in {self.path} ({os_problem(exc)})") from None
        return names
