"""Undo `pgdyno tune --apply` (and `compare --dsn`) on PostgreSQL: ALTER SYSTEM back, exactly.

Each pending change of the PostgreSQL journal is undone newest first: `ALTER SYSTEM SET name =
<what postgresql.auto.conf held>` or `ALTER SYSTEM RESET name` when it held nothing, so the file
is as it was; then a reload, and a restart when a restored setting needs one and the user
consented. A change is marked restored once its statement ran: running rollback again does
nothing. The host settings are restored after this (pgdyno.host.journal.rollback), so huge pages
are released only once the server no longer uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from pgdyno.postgres.client import compose, connect, identifier, literal
from pgdyno.tune.apply import ServerHandle, wait_for_server
from pgdyno.tune.pg_journal import PgChange, PgJournal, open_journal, server_key


@dataclass(frozen=True)
class ServerRestored:
    server: str
    changes: list[PgChange]
    restarted: bool
    waiting_for_restart: list[str]  # restored settings the running server has not taken yet


def restore_server(
    journal: PgJournal, server: ServerHandle, log: Callable[[str], None]
) -> ServerRestored:
    """Restore every pending change of this server; see the module docstring."""
    pending = journal.pending(server.identity)
    if not pending:
        return ServerRestored(server.label, [], False, [])
    with connect(server.dsn, server.password) as client:
        for change in reversed(pending):
            name = identifier(change.name)
            if change.old_auto is None:
                client.execute(compose("ALTER SYSTEM RESET {}", name))
            else:
                client.execute(compose("ALTER SYSTEM SET {} = {}", name, literal(change.old_auto)))
        client.execute(compose("SELECT pg_reload_conf()"))
    for change in pending:
        journal.mark_restored(change)
    journal.compact()
    needs_restart = sorted({c.name for c in pending if c.restart})
    restarted = False
    if needs_restart and server.restart is not None:
        log(f"restarting {server.label} to restore {', '.join(needs_restart)}")
        server.restart()
        wait_for_server(server)
        restarted = True
    waiting = [] if restarted else needs_restart
    return ServerRestored(server.label, pending, restarted, waiting)


def rollback_servers(
    workdir: Path,
    handle_for: Callable[[dict[str, str]], AbstractContextManager[ServerHandle]],
    log: Callable[[str], None],
) -> list[ServerRestored]:
    """Every server with pending changes in the journal of `workdir`, restored in turn."""
    restored: list[ServerRestored] = []
    with open_journal(workdir, create=False) as journal:
        if journal is None:
            return restored
        servers = {server_key(c.server): c.server for c in journal.pending()}
        for identity in servers.values():
            with handle_for(identity) as handle:
                restored.append(restore_server(journal, handle, log))
    return restored
