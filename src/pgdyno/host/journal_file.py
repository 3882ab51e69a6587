"""The host journal file: opening it safely, the flock that makes one writer, fsynced appends.

Journal first: a record is appended and fsynced before the change it describes is made, and
the directory is fsynced when the journal is created, so a record that never reached the disk
is for a change that was never made. Whoever changes or restores settings holds an exclusive
flock on the journal, so `rollback` cannot race a running comparison; the kernel drops the
lock of a killed process.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.host.journal_format import Change, Contents, JournalError, parse
from pgdyno.textsafe import strict_json


def in_use(path: Path) -> UsageError:
    return UsageError(
        f"another pgdyno process is changing host settings with the journal {path}: "
        "wait for it to finish (stopping it restores its changes)."
    )


def unclean(path: Path, count: int) -> UsageError:
    changes = "change" if count == 1 else "changes"
    return UsageError(
        f"the host journal {path} holds {count} {changes} not restored (left by an interrupted "
        "run or by `pgdyno tune --apply`): run `pgdyno rollback` first."
    )


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _open_existing(path: Path, flags: int) -> int | None:
    try:
        # O_NOFOLLOW: root appends to this file, so a symlink planted in its place is refused.
        return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise JournalError(
            f"cannot open the host journal {path} ({error.strerror}): "
            "check the work directory and its permissions."
        ) from None


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pending(journal_path: Path, *, proc_root: Path, sys_root: Path) -> list[Change]:
    """Changes not yet restored, in the order they were made; [] when there is no journal."""
    fd = _open_existing(journal_path, os.O_RDONLY)
    if fd is None:
        return []
    try:
        return parse(_read_all(fd), journal_path, proc_root, sys_root).pending
    finally:
        os.close(fd)


def ensure_clean(journal_path: Path, *, proc_root: Path, sys_root: Path) -> None:
    """UsageError unless the journal is free and every change in it has been restored."""
    fd = _open_existing(journal_path, os.O_RDONLY)
    if fd is None:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise in_use(journal_path) from None
        count = len(parse(_read_all(fd), journal_path, proc_root, sys_root).pending)
    finally:
        os.close(fd)
    if count:
        raise unclean(journal_path, count)


class JournalFile:
    """The journal file, open for appending under an exclusive flock."""

    def __init__(self, path: Path, fd: int, proc_root: Path, sys_root: Path) -> None:
        self.path = path
        self.fd = fd
        self.proc_root = proc_root
        self.sys_root = sys_root

    @classmethod
    def open(
        cls, path: Path, *, create: bool, proc_root: Path, sys_root: Path
    ) -> JournalFile | None:
        flags = os.O_RDWR | os.O_APPEND
        fd = _open_existing(path, flags)
        if fd is None and create:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                _fsync_directory(path.parent)  # so the new file survives a power loss
            except FileExistsError:
                fd = _open_existing(path, flags)
            except OSError as error:
                raise JournalError(
                    f"cannot create the host journal {path} ({error.strerror}): "
                    "check the work directory and its permissions."
                ) from None
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise in_use(path) from None
        journal = cls(path, fd, proc_root, sys_root)
        try:
            journal._repair()
        except BaseException:
            journal.close()
            raise
        return journal

    def _repair(self) -> None:
        """Drop a torn last record and end the file with a newline, so appends stay whole."""
        contents = self.read()
        if not (contents.torn or contents.newline_missing):
            return
        try:
            os.ftruncate(self.fd, contents.good_size)
            if contents.newline_missing:
                os.write(self.fd, b"\n")
            os.fsync(self.fd)
        except OSError as error:
            raise self._write_error(error) from None

    def _write_error(self, error: OSError) -> JournalError:
        return JournalError(
            f"cannot write the host journal {self.path} ({error.strerror}): "
            "free disk space or fix permissions; the host setting was not changed."
        )

    def read(self) -> Contents:
        return parse(_read_all(self.fd), self.path, self.proc_root, self.sys_root)

    def append(self, record: dict[str, object]) -> None:
        line = (strict_json(record, indent=None) + "\n").encode()
        try:
            if os.write(self.fd, line) != len(line):
                raise OSError(0, "short write")
            os.fsync(self.fd)
        except OSError as error:
            raise self._write_error(error) from None

    def compact(self) -> None:
        """Empty the journal once nothing in it is pending."""
        if not self.read().pending:
            try:
                os.ftruncate(self.fd, 0)
                os.fsync(self.fd)
            except OSError:
                pass  # a longer journal is still correct

    def close(self) -> None:
        os.close(self.fd)  # releases the lock
