"""Undo `pgdyno tune --apply` and `compare` on PostgreSQL: ALTER SYSTEM back, exactly, and a
rollback that finishes every job.

Each pending change of a server is taken back newest first: `ALTER SYSTEM SET name = <what
postgresql.auto.conf held>` or `ALTER SYSTEM RESET name` when it held nothing, so the file is as
it was; then a reload, waited for. A setting whose old value the running server has not taken
(pg_settings.pending_restart) waits for a restart: pgdyno restarts the server when it may, and
otherwise the change stays pending in the journal, so a later `pgdyno rollback --yes ...`
finishes the job and nothing new is applied meanwhile. A server on this host that is down
(it would not start with pgdyno's settings) has its postgresql.auto.conf put back as a file
and is started.

`rollback_servers` does every server of a journal, then the host (huge pages a running server
holds could not be released: pgdyno's sandbox is stopped while the host goes back). A failure
on one server is reported and does not keep the others or the host from being restored.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.changes import alter
from pgdyno.changes.handles import ServerHandle
from pgdyno.changes.live import wait_for_server, waiting_for_restart
from pgdyno.changes.pg_journal import PgChange, PgJournal, open_journal, server_key
from pgdyno.changes.restart import start_as_before
from pgdyno.errors import ConnectionFailed, PgdynoError
from pgdyno.journal import Unreadable
from pgdyno.postgres.client import connect
from pgdyno.postgres.server import reloaded


@dataclass(frozen=True)
class ServerRestored:
    server: str
    changes: list[PgChange]  # taken back (those still waiting for a restart included)
    restarted: bool
    waiting_for_restart: list[str]  # restored in the file; the running server waits to restart
    note: str | None = None


def _names(changes: list[PgChange]) -> list[str]:
    return sorted({c.name for c in changes if c.name != alter.MARKER})


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
            alter.put_back(client, pending)
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
        if contents.unreadable and confirm_damaged and not contents.pending():
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
