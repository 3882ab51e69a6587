"""Restarting a server pgdyno changed, and never leaving it down.

If the server does not come back after a restart for new settings, pgdyno puts back the old
entry of every setting it has pending on that server (postgresql.auto.conf edited as a file:
no statement reaches a server that is down; only for a server on this host), starts it again
without being asked, marks those changes restored, and says so in one sentence with the
server's own log line. A server elsewhere cannot be mended from here: the message says what to
edit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pgdyno.changes.auto_conf_file import rewrite
from pgdyno.changes.handles import ServerHandle
from pgdyno.changes.live import wait_for_server
from pgdyno.changes.pg_journal import PgChange, PgJournal
from pgdyno.errors import ClusterError, PgdynoError, UsageError


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
