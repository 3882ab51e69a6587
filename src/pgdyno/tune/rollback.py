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
from contextlib import AbstractContextManager, ExitStack
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
    """Restore every pending change of this server, restarting it at once where needed."""
    pending, needs_restart = _statements_back(journal, server)
    restarted = bool(needs_restart) and _restart(server, needs_restart, log)
    return ServerRestored(server.label, pending, restarted, [] if restarted else needs_restart)


def _statements_back(journal: PgJournal, server: ServerHandle) -> tuple[list[PgChange], list[str]]:
    """ALTER SYSTEM back for each pending change (newest first), a reload, each marked restored.
    Returns the changes and the names that take effect only at a restart."""
    pending = journal.pending(server.identity)
    if not pending:
        return [], []
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
    return pending, sorted({c.name for c in pending if c.restart})


def _restart(server: ServerHandle, names: list[str], log: Callable[[str], None]) -> bool:
    if server.restart is None:
        return False
    log(f"restarting {server.label} to restore {', '.join(names)}")
    server.restart()
    wait_for_server(server)
    return True


def rollback_servers[T](
    workdir: Path,
    handle_for: Callable[[dict[str, str]], AbstractContextManager[ServerHandle]],
    restore_host: Callable[[], T],
    log: Callable[[str], None],
) -> tuple[list[ServerRestored], T]:
    """Every server with pending changes in the journal of `workdir`, then the host.

    Order, so that each layer can go back: the servers' settings first (statements and a
    reload); then the servers that need a restart and can be stopped (pgdyno's sandbox) are
    stopped, the host is restored (huge pages a running server holds could not be released),
    and they start again; the others restart after the host is back.
    """
    restored: list[ServerRestored] = []
    with ExitStack() as stack:
        journal = stack.enter_context(open_journal(workdir, create=False))
        servers = {} if journal is None else {
            server_key(c.server): c.server for c in journal.pending()
        }  # fmt: skip
        handles = [stack.enter_context(handle_for(identity)) for identity in servers.values()]
        backs = [(h, *_statements_back(journal, h)) for h in handles if journal is not None]
        down = [h for h, _p, names in backs if names and h.stop is not None and h.start is not None]
        for handle in down:
            log(f"stopping {handle.label} to restore its settings and the host's")
            assert handle.stop is not None
            handle.stop()
        host = restore_host()
        for handle, pending, names in backs:
            if handle in down:
                assert handle.start is not None
                handle.start()
                wait_for_server(handle)
                restarted = True
            else:
                restarted = bool(names) and _restart(handle, names, log)
            restored.append(
                ServerRestored(handle.label, pending, restarted, [] if restarted else names)
            )
    return restored, host
