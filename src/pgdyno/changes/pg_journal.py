"""The PostgreSQL journal: each `ALTER SYSTEM` pgdyno runs can be undone exactly, after a crash too.

Records are appended and fsynced before the statement runs (pgdyno.undo.journal, the one journal
implementation). The old state is what postgresql.auto.conf held for that setting (its value, or
nothing), read from pg_file_settings: restoring is `ALTER SYSTEM SET name = old` or `ALTER SYSTEM
RESET name`, which leaves the file as it was whatever postgresql.conf says. The effective value
and its source before the change are kept too, to show and to check.

Format: JSON lines in <workdir>/pg-journal.jsonl::

    {"op": "change", "id": 1, "server": {"kind": "sandbox", "cluster": "pg18"},
     "name": "shared_buffers", "old_auto": null, "old_setting": "128MB",
     "old_source": "configuration file", "new": "6GB", "restart": true, "at": "...", "pid": 42}
    {"op": "restored", "id": 1, "at": "..."}

A change is "restored" only once the server runs with the old value again: a setting that needs
a restart stays pending after its statement went back until the server has restarted (or
`pending_restart` says it no longer waits for one). `server` names the sandbox cluster, or an
existing server by its connection string without the password. No command is ever stored: a
restart at rollback is asked for again (a journal must not be a way to run commands as root).

A line that cannot be read whole is salvaged (pgdyno.undo.journal.salvage): when its id, server,
name and old entry survive, it is restored like any other; otherwise it is unresolved, named to
the user, and blocks new changes until confirmed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.undo.journal import JournalFile, Line, Unreadable, now, peek, read_changes

JOURNAL_NAME = "pg-journal.jsonl"
WHAT = "the PostgreSQL journal"

Server = Mapping[str, str]


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
    salvaged: bool = False  # read back from a damaged line

    def record(self) -> dict[str, Any]:
        return {
            "op": "change", "id": self.id, "server": self.server, "name": self.name,
            "old_auto": self.old_auto, "old_setting": self.old_setting,
            "old_source": self.old_source, "new": self.new, "restart": self.restart,
            "at": self.at, "pid": os.getpid(),
        }  # fmt: skip


def server_key(server: Server) -> str:
    """One server's identity as text, for grouping and messages.

    >>> server_key({"kind": "sandbox", "cluster": "pg18"})
    'sandbox pg18'
    >>> server_key({"kind": "server", "dsn": "host=db1 dbname=postgres"})
    'server host=db1 dbname=postgres'
    """
    if server.get("kind") == "sandbox":
        return f"sandbox {server.get('cluster')}"
    return f"server {server.get('dsn')}"


@dataclass
class PgJournalContents:
    """A journal read back: its changes, which are restored, and the lines it cannot act on."""

    changes: list[PgChange] = field(default_factory=list)
    restored: set[int] = field(default_factory=set)
    unreadable: list[Unreadable] = field(default_factory=list)

    def pending(self, server: Server | None = None) -> list[PgChange]:
        wanted = None if server is None else server_key(server)
        return [
            c for c in self.changes
            if c.id not in self.restored and (wanted is None or server_key(c.server) == wanted)
        ]  # fmt: skip

    def next_id(self) -> int:
        return max((c.id for c in self.changes), default=0) + 1


def _text(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key!r} is missing or not text")
    return value


def _text_or_none(fields: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    if key not in fields:
        if required:
            raise ValueError(f"{key!r} is missing")
        return None
    value = fields[key]
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key!r} is not text")
    return value


def _change(fields: Mapping[str, Any], *, salvaged: bool) -> PgChange:
    """A change from a record's fields; ValueError naming what is missing. A salvaged one needs
    only what a restore needs: id, server, name and the old entry."""
    change_id = fields.get("id")
    if not isinstance(change_id, int) or isinstance(change_id, bool):
        raise ValueError("'id' is missing or not a number")
    server = fields.get("server")
    if not isinstance(server, dict) or not all(isinstance(v, str) for v in server.values()):
        raise ValueError("'server' is missing or not a server")
    restart = fields.get("restart", True)
    return PgChange(
        id=change_id,
        server=dict(server),
        name=_text(fields.get("name"), "name"),
        old_auto=_text_or_none(fields, "old_auto", required=True),
        old_setting=_text_or_none(fields, "old_setting", required=not salvaged),
        old_source=_text_or_none(fields, "old_source", required=not salvaged),
        new=_text(fields.get("new", "?") if salvaged else fields.get("new"), "new"),
        restart=restart if isinstance(restart, bool) else True,
        at=_text(fields.get("at", "?") if salvaged else fields.get("at"), "at"),
        salvaged=salvaged,
    )


def _known(fields: Mapping[str, Any]) -> str | None:
    """What a damaged change line still says, for the message."""
    name = fields.get("name")
    server = fields.get("server")
    if not isinstance(name, str):
        return f"a setting of {server_key(server)}" if isinstance(server, dict) else None
    where = f" on {server_key(server)}" if isinstance(server, dict) else ""
    if "old_auto" in fields:
        old = fields["old_auto"]
        return f"{name}{where}, whose old postgresql.auto.conf entry was {old or '(none)'}"
    return f"{name}{where}, whose old value is lost"


def read(lines: list[Line], path: Path) -> PgJournalContents:
    found = read_changes(lines, path, _build, lambda c: c.id, _known)
    return PgJournalContents(found.changes, found.restored, found.unreadable)


def _build(fields: dict[str, Any], salvaged: bool) -> PgChange:
    return _change(fields, salvaged=salvaged)


class PgJournal:
    """The open journal, locked (flock) against other pgdyno commands for its lifetime."""

    def __init__(self, file: JournalFile) -> None:
        self.file = file
        self.path = file.path

    def read(self) -> PgJournalContents:
        return read(self.file.lines(), self.path)

    def pending(self, server: Server | None = None) -> list[PgChange]:
        return self.read().pending(server)

    def next_id(self) -> int:
        return self.read().next_id()

    def append(self, record: Mapping[str, Any]) -> None:
        self.file.append(record)

    def mark_restored(self, change: PgChange) -> None:
        self.file.append({"op": "restored", "id": change.id, "at": now()})

    def compact(self) -> None:
        """Empty the file once nothing in it is pending or unresolved (it is then of no use)."""
        contents = self.read()
        if not contents.pending() and not contents.unreadable:
            self.file.empty()


@contextmanager
def open_journal(workdir: Path, *, create: bool) -> Iterator[PgJournal | None]:
    """The journal, exclusively locked; None when it does not exist and `create` is False."""
    file = JournalFile.open(workdir / JOURNAL_NAME, what=WHAT, create=create)
    if file is None:
        yield None
        return
    with file:
        yield PgJournal(file)


def contents(workdir: Path) -> PgJournalContents:
    """The journal as it stands, without taking it (for messages, listings and checks)."""
    path = workdir / JOURNAL_NAME
    return read(peek(path, what=WHAT), path)


def pending_changes(workdir: Path) -> list[PgChange]:
    """Changes not restored, without taking the lock."""
    return contents(workdir).pending()
