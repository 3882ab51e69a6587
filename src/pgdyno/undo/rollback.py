"""`pgdyno rollback`: finish every job pgdyno left, in the one order that works.

PostgreSQL servers first (each `ALTER SYSTEM` taken back, restarts where a setting waits for
one; pgdyno's sandbox is stopped while the host goes back, since huge pages a running server
holds could not be released), then the host's settings, then the storage (a sandbox still
running on a set's bind-mounted storage is stopped first, so nothing holds the mounts). A
failure in one part is reported and does not keep the others from being done. The outcome is a
record; the command renders it, and `failure` says why it must exit non-zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.errors import PgdynoError
from pgdyno.postgres.cluster import all_sandboxes
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.undo.filesystems import Devices, StorageRollbackError, pending_storage, rollback_storage
from pgdyno.undo.host import Elsewhere, HostRollback, pending_elsewhere
from pgdyno.undo.host import rollback as rollback_host
from pgdyno.undo.journal import JournalDamaged
from pgdyno.undo.server import HandleFor, ServersRollback, rollback_servers


@dataclass(frozen=True)
class StorageTakenDown:
    """What the storage rollback did (`done`), and what stopped it (`error`)."""

    done: list[str]
    error: StorageRollbackError | None


@dataclass(frozen=True)
class RollbackOutcome:
    """What `rollback` did on the servers, the host and the storage; `elsewhere` is another work
    directory's host journal whose changes this rollback cannot restore."""

    servers: ServersRollback
    host: HostRollback
    storage: StorageTakenDown
    elsewhere: Elsewhere | None

    @property
    def set_aside(self) -> list[Path]:
        """Damaged journals the user confirmed, kept under new names."""
        return [kept for kept in (self.servers.set_aside, self.host.set_aside) if kept]

    @property
    def nothing_done(self) -> bool:
        return not (self.servers.restored or self.host.restored or self.storage.done)

    @property
    def unfinished(self) -> bool:
        waiting = any(s.waiting_for_restart for s in self.servers.restored)
        return bool(waiting or self.servers.failures or self.servers.unreadable
                    or self.host.failed or self.host.unreadable or self.storage.error)  # fmt: skip

    def failure(self, *, dsn_given: bool) -> PgdynoError | None:
        """Why the command must exit non-zero, in one sentence; None when all is done."""
        damaged = [*self.servers.unreadable, *self.host.unreadable]
        problems = [*self.servers.failures]
        error = self.storage.error
        if error is not None:
            damaged += error.unreadable
            if error.failed:
                problems.append(str(error).rstrip("."))
        if self.servers.failures and not dsn_given:
            problems.append(
                "a server that needs a password is reached with `pgdyno rollback --dsn "
                "CONNINFO` (the password is used for this rollback only); the journal keeps "
                "what was not restored"
            )
        if self.host.failed is not None:
            problems.append(str(self.host.failed).rstrip("."))
        problems += [_waiting(server.server, server.waiting_for_restart)
                     for server in self.servers.restored if server.waiting_for_restart]  # fmt: skip
        if damaged:
            return JournalDamaged(damaged, ("; ".join(problems) + "; also, ") if problems else "")
        return PgdynoError("; ".join(problems) + ".") if problems else None


def _waiting(server: str, names: list[str]) -> str:
    return (
        f"{server} has {', '.join(names)} back in postgresql.auto.conf but waits for a restart "
        "to use the old value (the journal keeps it): restart it, or run `pgdyno rollback "
        "--yes --restart-command CMD` (or --data-dir is taken from the journal when it was given)"
    )


def rollback(
    env: Environment,
    handle_for: HandleFor,
    devices: Devices,
    log: Callable[[str], None],
    *,
    confirm_damaged: bool = False,
) -> RollbackOutcome:
    """Undo everything the work directory's journals hold: servers (reached through
    `handle_for`), then the host, then the storage (through `devices`). Idempotent."""
    servers, host = rollback_servers(
        env.data_dir,
        handle_for,
        lambda: rollback_host(
            env.journal_path,
            proc_root=env.proc_root,
            sys_root=env.sys_root,
            confirm_damaged=confirm_damaged,
        ),
        log,
        confirm_damaged=confirm_damaged,
    )
    storage = _take_down_storage(env, devices, confirm_damaged)
    elsewhere = pending_elsewhere(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root)
    return RollbackOutcome(servers, host, storage, elsewhere)


def _take_down_storage(
    env: Environment, devices: Devices, confirm_damaged: bool
) -> StorageTakenDown:
    """Last. A sandbox whose data directory is still bind-mounted on a set's storage (its
    watchdog had not stopped it yet after pgdyno was killed) is pgdyno's own: it is stopped
    first, so that nothing holds the mounts."""
    stopped = _stop_sandboxes_on_storage(env)
    try:
        done = rollback_storage(
            env.data_dir, devices, lambda _line: None, confirm_damaged=confirm_damaged
        )
    except StorageRollbackError as error:
        return StorageTakenDown([*stopped, *error.done], error)
    return StorageTakenDown([*stopped, *done], None)


def _stop_sandboxes_on_storage(env: Environment) -> list[str]:
    targets = {Path(step.path) for step in pending_storage(env.data_dir) if step.kind == "bind"}
    stopped = []
    for box in all_sandboxes(env.clusters_dir, sandbox_user(env.is_root)):
        if box.data_dir in targets and box.postmaster_pid() is not None:
            box.stop()
            stopped.append(f"stopped sandbox {box.root.name}, which ran on a set's storage")
    return stopped
