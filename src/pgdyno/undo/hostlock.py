"""One pgdyno command at a time changes a host's kernel and block-device settings.

Each work directory has its own journal, but sysctls and queue settings belong to the host: two
comparisons in two work directories changing vm.dirty_* at once would each journal the other's
value as the old one, and the last to restore would leave the host changed. So the first change
of a command takes an flock on one host-wide file, held until the command's changes are
restored (the kernel drops it if the command dies; the journal's rollback covers the rest).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pgdyno.errors import UsageError

LIVE_LOCK = Path("/run/lock/pgdyno-host-settings.lock")


def lock_path(proc_root: Path) -> Path:
    """The lock of the host behind `proc_root`: a recorded or test tree has its own.

    >>> lock_path(Path("/proc"))
    PosixPath('/run/lock/pgdyno-host-settings.lock')
    >>> lock_path(Path("/tmp/host/proc"))
    PosixPath('/tmp/host/pgdyno-host-settings.lock')
    """
    if proc_root == Path("/proc"):
        return LIVE_LOCK
    return proc_root.parent / LIVE_LOCK.name


class HostLock:
    """The host-wide lock, taken once and held until `release`."""

    def __init__(self, path: Path, journal: Path) -> None:
        self.path = path
        self.journal = journal
        self._fd: int | None = None
        self.previous_journal: Path | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise UsageError(
                f"cannot open the host-settings lock {self.path} ({exc.strerror}): run as root, "
                "or leave host settings out of the plan."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UsageError(
                f"another pgdyno command ({holder}) is changing this host's kernel settings: "
                "wait for it to finish, since two commands changing them at once would restore "
                "each other's values wrongly."
            ) from None
        # What a holder killed before releasing left: its journal may still hold changes.
        left = os.pread(fd, 4096, 0).decode(errors="replace")
        self.previous_journal = journal_named(left)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, journal {self.journal}".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.close(self._fd)  # drops the flock
        self._fd = None


def journal_named(text: str) -> Path | None:
    """The journal a lock file names (`pid 12, journal /w/host-journal.jsonl`), if any.

    >>> journal_named("pid 12, journal /w/host-journal.jsonl")
    PosixPath('/w/host-journal.jsonl')
    >>> journal_named("") is None
    True
    """
    _, found, path = text.partition(", journal ")
    return Path(path.strip()) if found and path.strip() else None
