"""The PostgreSQL journal: each `ALTER SYSTEM` pgdyno runs can be undone exactly, after a crash too.

Like the host journal (pgdyno.host.journal), a "change" record is appended and fsynced before
the statement runs, and a "restored" record after the old state is back. The old state is what
postgresql.auto.conf held for that setting (its value, or nothing), read from pg_file_settings:
restoring is `ALTER SYSTEM SET name = old` or `ALTER SYSTEM RESET name`, which leaves the file as
it was whatever postgresql.conf says. The effective value and its source before the change are
kept too, to show and to check.

Format: JSON lines in <workdir>/pg-journal.jsonl::

    {"op": "change", "id": 1, "server": {"kind": "sandbox", "cluster": "pg18"},
     "name": "shared_buffers", "old_auto": null, "old_setting": "128MB",
     "old_source": "configuration file", "new": "6GB", "restart": true, "at": "...", "pid": 42}
    {"op": "restored", "id": 1, "at": "..."}

`server` names the sandbox cluster, or an existing server by its connection string without the
password. No command is ever stored: a restart at rollback is asked for again (a journal must not
be a way to run commands as root).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.journal_format import now

JOURNAL_NAME = "pg-journal.jsonl"


class PgJournalError(PgdynoError):
    """The PostgreSQL journal is damaged or cannot be written."""


@dataclass(frozen=True, slots=True)
class PgChange:
    id: int
    server: dict[str, str]
    name: str
    old_auto: str | None  # postgresql.auto.conf's value before, None when it had none
    old_setting: str | None
    old_source: str | None
    new: str
    restart: bool
    at: str

    def record(self) -> dict[str, Any]:
        return {
            "op": "change", "id": self.id, "server": self.server, "name": self.name,
            "old_auto": self.old_auto, "old_setting": self.old_setting,
            "old_source": self.old_source, "new": self.new, "restart": self.restart,
            "at": self.at, "pid": os.getpid(),
        }  # fmt: skip


def server_key(server: Mapping[str, str]) -> str:
    """One server's identity as text, for grouping and messages.

    >>> server_key({"kind": "sandbox", "cluster": "pg18"})
    'sandbox pg18'
    >>> server_key({"kind": "server", "dsn": "host=db1 dbname=postgres"})
    'server host=db1 dbname=postgres'
    """
    if server.get("kind") == "sandbox":
        return f"sandbox {server.get('cluster')}"
    return f"server {server.get('dsn')}"


class PgJournal:
    """The open journal, locked (flock) against other pgdyno commands for its lifetime."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def read(self) -> tuple[list[PgChange], set[int]]:
        """(changes, ids restored). A torn last line (a crash mid-append) is ignored."""
        os.lseek(self._fd, 0, os.SEEK_SET)
        data = b""
        while chunk := os.read(self._fd, 1 << 16):
            data += chunk
        lines = data.decode("utf-8", errors="replace").splitlines()
        changes: list[PgChange] = []
        restored: set[int] = set()
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                if record["op"] == "change":
                    changes.append(_change(record))
                elif record["op"] == "restored":
                    restored.add(int(record["id"]))
                else:
                    raise ValueError(record["op"])
            except (ValueError, KeyError, TypeError):
                if number == len(lines):
                    break  # torn by a crash: the change it began was never made
                raise PgJournalError(
                    f"the PostgreSQL journal {self.path} is damaged at line {number}: restore "
                    "the settings listed in it by hand (ALTER SYSTEM), then remove it."
                ) from None
        return changes, restored

    def pending(self, server: Mapping[str, str] | None = None) -> list[PgChange]:
        changes, restored = self.read()
        wanted = None if server is None else server_key(server)
        return [
            c for c in changes
            if c.id not in restored and (wanted is None or server_key(c.server) == wanted)
        ]  # fmt: skip

    def next_id(self) -> int:
        changes, _ = self.read()
        return max((c.id for c in changes), default=0) + 1

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, allow_nan=False) + "\n").encode()
        try:
            os.lseek(self._fd, 0, os.SEEK_END)
            os.write(self._fd, line)
            os.fsync(self._fd)
        except OSError as exc:
            raise PgJournalError(
                f"cannot write the PostgreSQL journal {self.path} ({exc.strerror}): nothing "
                "was changed; free space or fix the work directory, then run again."
            ) from None

    def mark_restored(self, change: PgChange) -> None:
        self.append({"op": "restored", "id": change.id, "at": now()})

    def compact(self) -> None:
        """Empty the file once nothing is pending (it is then of no use)."""
        if not self.pending():
            os.ftruncate(self._fd, 0)
            os.fsync(self._fd)


def _change(record: Mapping[str, Any]) -> PgChange:
    server = record["server"]
    if not isinstance(server, dict) or not all(isinstance(v, str) for v in server.values()):
        raise ValueError("server")
    for key in ("name", "new", "at"):
        if not isinstance(record[key], str):
            raise ValueError(key)
    return PgChange(
        id=int(record["id"]),
        server=dict(server),
        name=record["name"],
        old_auto=_text_or_none(record["old_auto"]),
        old_setting=_text_or_none(record.get("old_setting")),
        old_source=_text_or_none(record.get("old_source")),
        new=record["new"],
        restart=bool(record["restart"]),
        at=record["at"],
    )


def _text_or_none(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError("not text")


@contextmanager
def open_journal(workdir: Path, *, create: bool) -> Iterator[PgJournal | None]:
    """The journal, exclusively locked; None when it does not exist and `create` is False."""
    path = workdir / JOURNAL_NAME
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        raise PgJournalError(
            f"cannot open the PostgreSQL journal {path} ({exc.strerror}): check the work "
            "directory and its permissions."
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"another pgdyno command is changing PostgreSQL settings with {path}: wait for "
                "it to finish, then run again."
            ) from None
        yield PgJournal(path, fd)
    finally:
        os.close(fd)


def pending_changes(workdir: Path) -> list[PgChange]:
    """Changes not restored, without taking the lock (for messages and listings)."""
    path = workdir / JOURNAL_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        return PgJournal(path, fd).pending()
    finally:
        os.close(fd)
