"""The lock that gives one tfa-sim command a directory at a time: ``.tfa-sim.lock``.

The lock file is created with ``O_EXCL`` (and never through a symlink) and holds the PID, the host,
the command and the process's start time.  A second command finds it and fails naming the holder.
A lock left by a process that is gone — same host, and the PID is dead or now belongs to a process
started at another time — is stale: it is taken over with a one-line notice on stderr.  The
inspection and take-over run under ``flock`` on the directory, so two commands cannot both take
over the same stale lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import os_problem, read_bytes

LOCK_NAME = ".tfa-sim.lock"
#: How long to wait for another command's inspection of the lock (milliseconds in practice).
GUARD_SECONDS = 10.0


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (/proc/PID/stat field 22), if known."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _alive(holder: dict[str, Any]) -> bool | None:
    """Whether the holder's process still runs: True, False, or None when this host cannot tell."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    start = holder.get("start")
    return start is None or _start_time(pid) in (None, start)  # a different start time: the PID was reused


@contextlib.contextmanager
def _guard(directory: Path) -> Iterator[None]:
    """Exclusive ``flock`` on the directory while the lock file is inspected (skipped where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + GUARD_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InputError(f"{directory} stays locked by another process (flock); try again") from None
                time.sleep(0.02)
            except OSError:
                break  # no flock here (some network file systems): O_EXCL alone still guards the lock file
        yield
    finally:
        os.close(fd)


class Lock:
    """``.tfa-sim.lock`` in ``directory`` for one command; :meth:`acquire` or InputError, :meth:`release`."""

    def __init__(self, directory: Path, what: str, command: str) -> None:
        self.directory, self.what, self.path = directory, what, directory / LOCK_NAME
        pid = os.getpid()
        self.record = {"pid": pid, "host": socket.gethostname(), "command": command, "token": uuid.uuid4().hex,
                       "since": time.strftime("%Y-%m-%d %H:%M:%S"), "start": _start_time(pid)}
        self.held = False

    def acquire(self) -> None:
        with _guard(self.directory):
            try:
                self._create()
            except FileExistsError:
                holder = self._holder()
                if holder is None or _alive(holder) is not False:
                    raise InputError(self._in_use(holder)) from None
                print(f"tfa-sim: notice: {self.directory} was locked by PID {holder['pid']} "
                      f"({holder.get('command', '?')}), which is no longer running; taking the lock over",
                      file=sys.stderr)
                os.unlink(self.path)
                self._create()
        self.held = True

    def release(self) -> None:
        if self.held and self._holder() == self.record:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.held = False

    def _create(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise
        except OSError as exc:
            raise InputError(f"{self.what} {self.directory} cannot be locked ({os_problem(exc)})") from None
        with os.fdopen(fd, "w") as fh:
            json.dump(self.record, fh)

    def _holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(read_bytes(self.path, "lock file", max_bytes=1 << 16))
        except (InputError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _in_use(self, holder: dict[str, Any] | None) -> str:
        if holder is None:
            return (f"{self.what} {self.directory} holds a lock file tfa-sim cannot read ({self.path}); if no "
                    f"tfa-sim command is using the directory, delete it")
        who = f"PID {holder.get('pid')} on {holder.get('host')}, {holder.get('command')} since {holder.get('since')}"
        gone = "" if holder.get("host") == socket.gethostname() else \
            f"; if that command no longer runs, delete {self.path}"
        return f"{self.what} {self.directory} is in use by tfa-sim ({who}): wait for it or choose another " \
               f"{self.what}{gone}"
