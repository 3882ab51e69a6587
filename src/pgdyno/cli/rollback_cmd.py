"""`pgdyno rollback`: undo what pgdyno left changed, PostgreSQL first, then the host."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from pgdyno.cli.common import environment, err, out, workdir_options
from pgdyno.environment import Environment
from pgdyno.errors import PgdynoError, UsageError
from pgdyno.experiment.target import existing_sandbox, running, server_address, workdir_lock
from pgdyno.postgres.cluster import all_sandboxes
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.remote.host import remote_host
from pgdyno.storage.layer import pending_storage, rollback_storage
from pgdyno.storage.undo import StorageRollbackError
from pgdyno.undo import server as pg_journal
from pgdyno.undo.handles import ServerHandle, over_ssh, sandbox_handle, server_handle
from pgdyno.undo.host import HostRollback, pending_elsewhere
from pgdyno.undo.host import rollback as rollback_host
from pgdyno.undo.journal import JournalDamaged
from pgdyno.undo.server import ServersRollback, rollback_servers


@click.command()
@click.option(
    "--yes",
    is_flag=True,
    help="Consent to restart an existing server when a restored setting needs it.",
)
@click.option(
    "--restart-command",
    metavar="CMD",
    help="How to restart an existing server (e.g. 'systemctl restart postgresql').",
)
@click.option(
    "--dsn",
    metavar="CONNINFO",
    help="How to reach an existing server the journal names, with its password if it needs "
    "one (used for this rollback only, never stored): the same connection string as when the "
    "settings were changed.",
)
@click.option(
    "--confirm-damaged",
    is_flag=True,
    help="After checking by hand the settings a damaged journal line names: set the damaged "
    "journal aside (kept under a new name) so that pgdyno may change settings again.",
)
@workdir_options
@click.pass_context
def rollback(
    ctx: click.Context, /, yes: bool, restart_command: str | None, dsn: str | None,
    confirm_damaged: bool, **_: object,
) -> None:  # fmt: skip
    """Restore every setting pgdyno changed and take down the filesystems it built: after
    `tune --apply`, or an interrupted `compare`.

    PostgreSQL first: each `ALTER SYSTEM` pgdyno ran is undone (the setting goes back to what
    postgresql.auto.conf held, or is reset), the server reloads, and restarts when a restored
    setting waits for one (pending_restart): pgdyno's sandbox always; an existing server only
    with --yes and --restart-command, or pg_ctl when its data directory is on this host.
    Until that restart has happened the change stays in the journal. Then the host: every
    sysctl, transparent huge pages and block-device setting goes back to its old value, newest
    change first. Last the storage: every filesystem pgdyno built for a data or WAL directory is
    unmounted, its loop device detached and its image removed (a bind mount too). Each journal
    records its changes before they are made, so this works after a crash too; running it
    again does nothing.

    A damaged journal line is restored when what it still says is enough; otherwise it is
    named, the rollback exits non-zero, and pgdyno refuses new changes until you have checked
    that setting by hand and run `pgdyno rollback --confirm-damaged`.

    \b
    Examples:
      pgdyno rollback --workdir /var/lib/pgdyno
      pgdyno rollback --dsn "host=db1 user=postgres password=..." --yes \\
          --restart-command "systemctl restart postgresql"
    """
    env = environment(ctx)
    if not env.data_dir.is_dir():
        raise UsageError(
            f"the work directory {env.data_dir} does not exist: give the --workdir of the "
            "command that changed the settings."
        )
    console = out(env)
    options = _RollbackOptions(yes, restart_command, dsn)
    _check_dsn(env, options)
    with workdir_lock(env):
        servers, host = rollback_servers(
            env.data_dir,
            lambda identity: _handle(env, identity, options),
            lambda: rollback_host(
                env.journal_path,
                proc_root=env.proc_root,
                sys_root=env.sys_root,
                confirm_damaged=confirm_damaged,
            ),
            err(env).print,
            confirm_damaged=confirm_damaged,
        )
        storage = _rollback_storage(env, confirm_damaged)
    _print(console.print, servers, host, storage)
    elsewhere = pending_elsewhere(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root)
    if elsewhere is not None:  # this work directory's rollback cannot restore them
        console.print(f"{elsewhere}: run `pgdyno rollback --workdir {elsewhere.journal.parent}`")
    if servers.set_aside or host.set_aside:
        for kept in (servers.set_aside, host.set_aside):
            if kept:
                console.print(f"set the damaged journal aside as {kept}")
    _finish(servers, host, storage, options)


class _StorageRollback:
    """What the storage rollback did (`done`), and what stopped it (`error`)."""

    def __init__(self, done: list[str], error: StorageRollbackError | None) -> None:
        self.done = done
        self.error = error


def _rollback_storage(env: Environment, confirm_damaged: bool) -> _StorageRollback:
    """Last. A sandbox whose data directory is still bind-mounted on a set's storage (its
    watchdog had not stopped it yet after pgdyno was killed) is pgdyno's own: it is stopped
    first, so that nothing holds the mounts."""
    stopped = _stop_sandboxes_on_storage(env)
    try:
        done = rollback_storage(env.data_dir, lambda _line: None, confirm_damaged=confirm_damaged)
    except StorageRollbackError as error:
        return _StorageRollback([*stopped, *error.done], error)
    return _StorageRollback([*stopped, *done], None)


def _stop_sandboxes_on_storage(env: Environment) -> list[str]:
    targets = {Path(step.path) for step in pending_storage(env.data_dir) if step.kind == "bind"}
    stopped = []
    for box in all_sandboxes(env.clusters_dir, sandbox_user(env.is_root)):
        if box.data_dir in targets and box.postmaster_pid() is not None:
            box.stop()
            stopped.append(f"stopped sandbox {box.root.name}, which ran on a set's storage")
    return stopped


class _RollbackOptions:
    def __init__(self, yes: bool, restart_command: str | None, dsn: str | None) -> None:
        self.yes = yes
        self.restart_command = restart_command
        self.address = server_address(dsn) if dsn is not None else None


def _check_dsn(env: Environment, o: _RollbackOptions) -> None:
    """--dsn must name a server the journal holds changes to (its password is for that one)."""
    if o.address is None:
        return
    pending = pg_journal.pending_changes(env.data_dir)
    servers = {str(dsn) for c in pending if (dsn := c.server.get("dsn"))}
    if o.address.dsn in servers:
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
    raise UsageError(
        f"--dsn names {o.address.label}, but the journal of {env.data_dir} holds {held}: {todo}."
    )


def _print(
    say: Callable[[str], None], servers: ServersRollback, host: HostRollback,
    storage: _StorageRollback,
) -> None:  # fmt: skip
    for server in servers.restored:
        if server.note:
            say(server.note)
            continue
        for change in reversed(server.changes):
            if change.name == "pgdyno.changed_by":
                continue
            back = change.old_auto if change.old_auto is not None else "(reset)"
            say(
                f"restored {change.name} on {server.server} to {back} (pgdyno had set {change.new})"
            )
    for r in host.restored:
        say(f"restored {r.knob} to {r.old} (pgdyno had set {r.set_to or '-'})")
    for line in storage.done:
        say(line)
    if (
        not servers.restored
        and not host.restored
        and not storage.done
        and not _unfinished(servers, host, storage)
    ):
        say("nothing to restore (no pending change)")


def _unfinished(servers: ServersRollback, host: HostRollback, storage: _StorageRollback) -> bool:
    waiting = any(s.waiting_for_restart for s in servers.restored)
    return bool(waiting or servers.failures or servers.unreadable or host.failed
                or host.unreadable or storage.error)  # fmt: skip


def _finish(
    servers: ServersRollback, host: HostRollback, storage: _StorageRollback, o: _RollbackOptions
) -> None:
    """Exit non-zero, in one sentence, while anything is left to do."""
    damaged = [*servers.unreadable, *host.unreadable]
    problems = [*servers.failures]
    if storage.error is not None:
        damaged += storage.error.unreadable
        if storage.error.failed:
            problems.append(str(storage.error).rstrip("."))
    if servers.failures and o.address is None:
        problems.append(
            "a server that needs a password is reached with `pgdyno rollback --dsn "
            "CONNINFO` (the password is used for this rollback only); the journal keeps "
            "what was not restored"
        )
    if host.failed is not None:
        problems.append(str(host.failed).rstrip("."))
    for server in servers.restored:
        if server.waiting_for_restart:
            problems.append(
                f"{server.server} has {', '.join(server.waiting_for_restart)} back in "
                "postgresql.auto.conf but waits for a restart to use the old value (the journal "
                "keeps it): restart it, or run `pgdyno rollback --yes --restart-command CMD` "
                "(or --data-dir is taken from the journal when it was given)"
            )
    if damaged:
        note = ("; ".join(problems) + "; also, ") if problems else ""
        raise JournalDamaged(damaged, note)
    if problems:
        raise PgdynoError("; ".join(problems) + ".")


@contextmanager
def _handle(
    env: Environment, identity: dict[str, str], o: _RollbackOptions
) -> Iterator[ServerHandle | None]:
    if identity.get("kind") == "sandbox":
        box = existing_sandbox(env, identity.get("cluster", ""), err(env).print)
        if box is None:  # destroyed: its settings went with it
            yield None
            return
        # pgdyno's own: restarted when a restored setting needs it (no consent needed); one
        # that cannot start with pgdyno's settings is mended from its files.
        with running(env, box, down_ok=True):
            yield sandbox_handle(box, consent=True, owner_pid=box.state().owner_pid)
        return
    dsn = identity.get("dsn", "")
    password = o.address.password if o.address is not None and o.address.dsn == dsn else None
    if identity.get("ssh"):  # changed over SSH (compare --ssh): through a new forwarded port
        with remote_host(identity["ssh"], env.runs_dir, err(env).print) as remote:
            handle = server_handle(
                remote.tunnel(dsn), password, f"{remote.name} server {dsn}",
                restart_command=None, consent=False, data_dir=None, env=env,
            )  # fmt: skip
            yield over_ssh(handle, identity["ssh"], dsn)
        return
    data_dir = Path(identity["data_dir"]) if identity.get("data_dir") else None
    yield server_handle(
        dsn, password, f"server {dsn}", restart_command=o.restart_command, consent=o.yes,
        data_dir=data_dir, env=env,
    )  # fmt: skip
