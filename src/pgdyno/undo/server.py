"""PostgreSQL server settings and restarts: each `ALTER SYSTEM` pgdyno runs is journalled first
and can be undone exactly, after a crash too; restarts never leave a server down.

**Records.** Appended and fsynced before the statement runs (pgdyno.undo.journal). The old
state is what postgresql.auto.conf held for that setting (its value, or nothing), read from
pg_file_settings: restoring is `ALTER SYSTEM SET name = old` or `ALTER SYSTEM RESET name`, which
leaves the file as it was whatever postgresql.conf says. The effective value and its source
before the change are kept too, to show and to check. Format: JSON lines in
<workdir>/pg-journal.jsonl::

    {"op": "change", "id": 1, "server": {"kind": "sandbox", "cluster": "pg18"},
     "name": "shared_buffers", "old_auto": null, "old_setting": "128MB",
     "old_source": "configuration file", "new": "6GB", "restart": true, "at": "...", "pid": 42}
    {"op": "restored", "id": 1, "at": "..."}

A change is "restored" only once the server runs with the old value again: a setting that needs
a restart stays pending after its statement went back until the server has restarted (or
`pending_restart` says it no longer waits for one). `server` names the sandbox cluster, or an
existing server by its connection string without the password. No command is ever stored: a
restart at rollback is asked for again (a journal must not be a way to run commands as root).
A damaged line is salvaged when its id, server, name and old entry survive, and restored like
any other; otherwise it is unresolved, named to the user, and blocks new changes until
confirmed.

**Reloads and restarts.** `reloaded` is the one way pgdyno waits for a reload: the server's
clock is read before the request, and the wait ends when pg_conf_load_time() has moved past it.
If a server does not come back after a restart for new settings, pgdyno puts back the old entry
of every setting it has pending on that server (postgresql.auto.conf edited as a file, the way
ALTER SYSTEM writes it: no statement reaches a server that is down; only for a server on this
host), starts it again, marks those changes restored, and says so in one sentence with the
server's own log line.

**Undo.** Each pending change of a server is taken back newest first, then a reload, waited
for. A setting whose old value the running server has not taken (pg_settings.pending_restart)
waits for a restart: pgdyno restarts the server when it may, and otherwise the change stays
pending, so a later `pgdyno rollback --yes ...` finishes the job and nothing new is applied
meanwhile. `rollback_servers` does every server of a journal, then the host (huge pages a
running server holds could not be released: pgdyno's sandbox is stopped while the host goes
back). A failure on one server is reported and does not keep the others from being restored.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.errors import ClusterError, ConnectionFailed, PgdynoError, UsageError
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.server import (
    alter_system_entry,
    effective_settings,
    reloaded,
    set_placeholder,
)
from pgdyno.undo import journal
from pgdyno.undo.handles import ServerHandle
from pgdyno.undo.journal import Contents, Journal, Unreadable

JOURNAL_NAME = "pg-journal.jsonl"
WHAT = "the PostgreSQL journal"
WORDS = journal.Words(
    WHAT, "change", "restored", "settings not restored",
    "left by an interrupted run or by `pgdyno tune --apply`",
)  # fmt: skip
MARKER = "pgdyno.changed_by"

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


def pending_on(found: Contents[PgChange], server: Server | None) -> list[PgChange]:
    """The changes of `found` not restored, of one server (all with None)."""
    wanted = None if server is None else server_key(server)
    return [c for c in found.pending if wanted is None or server_key(c.server) == wanted]


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


@dataclass(frozen=True, slots=True)
class PgCodec:
    """The PostgreSQL journal's records (see the module's docstring) for the one journal."""

    words: journal.Words = WORDS

    def encode(self, change: PgChange) -> dict[str, Any]:
        return change.record()

    def decode(self, fields: dict[str, Any], salvaged: bool) -> PgChange:
        return _change(fields, salvaged=salvaged)

    def known(self, fields: dict[str, Any]) -> str | None:
        return _known(fields)


class PgJournal(Journal[PgChange]):
    """The open journal, locked (flock) against other pgdyno commands for its lifetime."""

    def pending(self, server: Server | None = None) -> list[PgChange]:
        return pending_on(self.read(), server)


@contextmanager
def open_journal(workdir: Path, *, create: bool) -> Iterator[PgJournal | None]:
    """The journal, exclusively locked; None when it does not exist and `create` is False."""
    opened = PgJournal.open(workdir / JOURNAL_NAME, PgCodec(), create=create)
    if opened is None:
        yield None
        return
    with opened:
        yield opened


def contents(workdir: Path) -> Contents[PgChange]:
    """The journal as it stands, without taking it (for messages, listings and checks)."""
    return journal.contents(workdir / JOURNAL_NAME, PgCodec())


def pending_changes(workdir: Path) -> list[PgChange]:
    """Changes not restored, without taking the lock."""
    return contents(workdir).pending


# -- ALTER SYSTEM, a reload, a restart -----------------------------------------------------------


def alter_setting(client: Client, name: str, value: str | None) -> None:
    """`ALTER SYSTEM SET name = value`, or `RESET` for None. PostgreSQL before 17 refuses
    `ALTER SYSTEM` for a custom setting it has not seen in the session (the marker), so a `SET`
    of it comes first."""
    if name == MARKER:
        set_placeholder(client, name)
    alter_system_entry(client, name, value)


def put_back(client: Client, changes: list[PgChange]) -> None:
    """ALTER SYSTEM back to the old entry of each change, newest first (no reload)."""
    for change in reversed(changes):
        alter_setting(client, change.name, change.old_auto)


START_WAIT_S = 120.0


def wait_for_server(dsn: str, password: str | None, timeout: float = START_WAIT_S) -> None:
    """Until the server accepts a connection again (after a restart)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with connect(dsn, password):
                return
        except PgdynoError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def waiting_for_restart(client: Client, names: list[str]) -> list[str]:
    """The settings among `names` whose file value the running server has not taken because it
    needs a restart (pg_settings.pending_restart), in order of name."""
    found = effective_settings(client, names)
    return sorted(name for name, setting in found.items() if setting.pending_restart)


# -- postgresql.auto.conf edited as a file (a server on this host that is down) ------------------

AUTO_CONF = "postgresql.auto.conf"
HEADER = (
    "# Do not edit this file manually!\n# It will be overwritten by the ALTER SYSTEM command.\n"
)


def _quoted(value: str) -> str:
    """
    >>> _quoted("it's"), _quoted("a\\\\b")
    ("'it''s'", "'a\\\\\\\\b'")
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _name_of(line: str) -> str | None:
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    return text.split("=", 1)[0].strip().lower() if "=" in text else text.split()[0].lower()


def edited(text: str, name: str, value: str | None) -> str:
    """`text` with every entry of `name` removed, then `name = value` appended (unless None).

    >>> edited("# h\\nwork_mem = '8MB'\\njit = 'off'\\n", "work_mem", None)
    "# h\\njit = 'off'\\n"
    >>> edited("jit = 'off'\\n", "max_connections", "100")
    "jit = 'off'\\nmax_connections = '100'\\n"
    """
    lines = [line for line in text.splitlines(keepends=True) if _name_of(line) != name.lower()]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if value is not None:
        lines.append(f"{name} = {_quoted(value)}\n")
    return "".join(lines)


def rewrite(data_dir: Path, entries: list[tuple[str, str | None]]) -> None:
    """Apply (name, old entry or None) to the data directory's postgresql.auto.conf, in order,
    keeping the file's owner and mode."""
    path = data_dir / AUTO_CONF
    try:
        text = path.read_text()
        info = path.stat()
    except FileNotFoundError:
        text, info = HEADER, data_dir.stat()
    for name, value in entries:
        text = edited(text, name, value)
    temporary = path.with_name(f".{AUTO_CONF}.pgdyno")
    temporary.write_text(text)
    os.chown(temporary, info.st_uid, info.st_gid)
    temporary.chmod(0o600)
    temporary.replace(path)


# -- restarting a server pgdyno changed, and never leaving it down --------------------------------


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def server_says(path: Path | None, offset: int) -> str | None:
    """The last FATAL, PANIC or ERROR line the server wrote to its log since `offset`."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            lines = handle.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        for level in ("FATAL:", "PANIC:", "ERROR:"):
            if level in line:
                return level + line.split(level, 1)[1].rstrip()
    return None


def _log(handle: ServerHandle) -> Path | None:
    return handle.log() if handle.log is not None else None


def restart(
    handle: ServerHandle,
    journal: PgJournal,
    names: list[str],
    log: Callable[[str], None],
) -> None:
    """Restart the server for `names`; on failure, put back and start again (see above)."""
    if handle.restart is None:
        raise UsageError(
            f"{', '.join(names)} needs a restart of {handle.label}: add --yes (with "
            "--restart-command CMD or --data-dir DIR for an existing server)."
        )
    log(f"restarting {handle.label} ({', '.join(names)})")
    before = _size(_log(handle))
    try:
        handle.restart()
        wait_for_server(handle.dsn, handle.password)
        return
    except PgdynoError as failure:
        said = server_says(_log(handle), before) or str(failure).rstrip(".")
    pending = journal.pending(handle.identity)
    settings = ", ".join(sorted({c.name for c in pending} - {"pgdyno.changed_by"})) or "them"
    if handle.data_dir is None:
        raise ClusterError(
            f"{handle.label} did not come back after pgdyno restarted it for {settings} "
            f"({said}), and its data directory is not on this host: remove those lines from "
            "its postgresql.auto.conf, start it, then run `pgdyno rollback`."
        )
    _start_as_before(handle, pending, said)
    for change in pending:
        journal.mark_restored(change)
    journal.compact()
    raise UsageError(
        f"{handle.label} did not start with {settings} ({said}): pgdyno put its previous "
        "settings back and started it again; nothing else was changed."
    )


def start_as_before(handle: ServerHandle, pending: list[PgChange]) -> bool:
    """A server on this host that is down: the old entries of `pending` written back into its
    postgresql.auto.conf, then started. False when it is not on this host or cannot be started
    from here; PgdynoError when the start fails."""
    again = handle.start or handle.restart
    if handle.data_dir is None or again is None:
        return False
    rewrite(handle.data_dir, [(c.name, c.old_auto) for c in reversed(pending)])
    again()
    wait_for_server(handle.dsn, handle.password)
    return True


def _start_as_before(handle: ServerHandle, pending: list[PgChange], said: str) -> None:
    try:
        start_as_before(handle, pending)
    except PgdynoError as second:
        raise ClusterError(
            f"{handle.label} did not start with pgdyno's settings ({said}), nor after pgdyno "
            f"put the previous ones back ({str(second).rstrip('.')}): see its log and start "
            "it by hand."
        ) from second


# -- taking changes back ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerRestored:
    server: str
    changes: list[PgChange]  # taken back (those still waiting for a restart included)
    restarted: bool
    waiting_for_restart: list[str]  # restored in the file; the running server waits to restart
    note: str | None = None


def _names(changes: list[PgChange]) -> list[str]:
    return sorted({c.name for c in changes if c.name != MARKER})


def _mark(journal: PgJournal, changes: list[PgChange], waiting: list[str]) -> None:
    still = {name.lower() for name in waiting}
    for change in changes:
        if change.name.lower() not in still:
            journal.mark_restored(change)
    journal.compact()


def _statements_back(journal: PgJournal, handle: ServerHandle) -> tuple[list[PgChange], list[str]]:
    """Every pending change of the server taken back and reloaded; those whose old value the
    server has taken are marked restored. Returns the changes and the settings that wait for a
    restart (as pending_restart says)."""
    pending = journal.pending(handle.identity)
    if not pending:
        return [], []
    try:
        with connect(handle.dsn, handle.password) as client:
            put_back(client, pending)
    except ConnectionFailed:
        if not start_as_before(handle, pending):
            raise
    reloaded(handle.dsn, handle.password, handle.label)
    with connect(handle.dsn, handle.password) as client:
        waiting = waiting_for_restart(client, _names(pending))
    _mark(journal, pending, waiting)
    return pending, waiting


def _restart(handle: ServerHandle, names: list[str], log: Callable[[str], None]) -> bool:
    if handle.restart is None:
        return False
    log(f"restarting {handle.label} to restore {', '.join(names)}")
    handle.restart()
    wait_for_server(handle.dsn, handle.password)
    return True


def restore_server(
    journal: PgJournal, handle: ServerHandle, log: Callable[[str], None]
) -> ServerRestored:
    """Take back every pending change of this server, restarting it where needed and allowed."""
    pending, waiting = _statements_back(journal, handle)
    restarted = bool(waiting) and _restart(handle, waiting, log)
    if restarted:
        _mark(journal, pending, [])
        waiting = []
    return ServerRestored(handle.label, pending, restarted, waiting)


@dataclass
class ServersRollback:
    """What `rollback_servers` did on PostgreSQL."""

    restored: list[ServerRestored] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # one sentence each
    unreadable: list[Unreadable] = field(default_factory=list)
    set_aside: Path | None = None


HandleFor = Callable[[dict[str, str]], AbstractContextManager[ServerHandle | None]]


def rollback_servers[T](
    workdir: Path,
    handle_for: HandleFor,
    restore_host: Callable[[], T],
    log: Callable[[str], None],
    *,
    confirm_damaged: bool = False,
) -> tuple[ServersRollback, T]:
    """Every server with pending changes in the journal of `workdir`, then the host.

    `handle_for` gives a server's handle, or None when the server no longer exists (a
    destroyed sandbox: nothing of it is left to restore)."""
    result = ServersRollback()
    with ExitStack() as stack:
        journal = stack.enter_context(open_journal(workdir, create=False))
        if journal is None:
            return result, restore_host()
        backs = _all_statements_back(journal, stack, handle_for, result)
        down = [h for h, _p, waiting in backs if waiting and h.stop and h.start]
        for handle in down:
            log(f"stopping {handle.label} to restore its settings and the host's")
            assert handle.stop is not None
            handle.stop()
        host = restore_host()
        for handle, pending, waiting in backs:
            _finish(journal, handle, pending, waiting, handle in down, result, log)
        contents = journal.read()
        result.unreadable = contents.unreadable
        if contents.unreadable and confirm_damaged and not contents.pending:
            result.set_aside = journal.file.set_aside()
            result.unreadable = []
    return result, host


def _all_statements_back(
    journal: PgJournal, stack: ExitStack, handle_for: HandleFor, result: ServersRollback
) -> list[tuple[ServerHandle, list[PgChange], list[str]]]:
    servers = {server_key(c.server): c.server for c in journal.pending()}
    backs = []
    for key, identity in servers.items():
        try:
            handle = stack.enter_context(handle_for(identity))
            if handle is None:
                gone = journal.pending(identity)
                _mark(journal, gone, [])
                note = f"{key} no longer exists: nothing of it is left to restore"
                result.restored.append(ServerRestored(key, gone, False, [], note))
                continue
            backs.append((handle, *_statements_back(journal, handle)))
        except PgdynoError as error:
            result.failures.append(f"{key}: {str(error).rstrip('.')}")
    return backs


def _finish(
    journal: PgJournal,
    handle: ServerHandle,
    pending: list[PgChange],
    waiting: list[str],
    stopped: bool,
    result: ServersRollback,
    log: Callable[[str], None],
) -> None:
    try:
        if stopped:
            assert handle.start is not None
            handle.start()
            wait_for_server(handle.dsn, handle.password)
            restarted = True
        else:
            restarted = bool(waiting) and _restart(handle, waiting, log)
    except PgdynoError as error:
        result.failures.append(f"{handle.label}: {str(error).rstrip('.')}")
        restarted = False
    if restarted and waiting:
        _mark(journal, pending, [])
    left = [] if restarted else waiting
    result.restored.append(ServerRestored(handle.label, pending, restarted, left))


def check_dsn(workdir: Path, dsn: str, label: str) -> None:
    """UsageError unless the journal of `workdir` holds changes to the server `dsn` names (the
    password `pgdyno rollback --dsn` carries is for that one only)."""
    pending = pending_changes(workdir)
    servers = {str(found) for c in pending if (found := c.server.get("dsn"))}
    if dsn in servers:
        return
    if servers:
        held = f"changes to other servers only ({', '.join(sorted(servers))})"
        todo = "give one of those servers' connection strings"
    else:
        held = "changes to pgdyno's sandbox only" if pending else "no change to any server"
        todo = (
            "run `pgdyno rollback` without --dsn, or give the --workdir of the command that "
            "changed that server"
        )
    raise UsageError(f"--dsn names {label}, but the journal of {workdir} holds {held}: {todo}.")
