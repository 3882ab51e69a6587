"""`pgdyno rollback`: undo what pgdyno left changed, PostgreSQL first, then the host."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from pgdyno.cli.common import environment, err, out, workdir_options
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import existing_sandbox, running, server_address, workdir_lock
from pgdyno.remote.host import remote_host
from pgdyno.storage.model import Roots
from pgdyno.storage.mounts import LiveDevices
from pgdyno.undo.handles import ServerHandle, over_ssh, sandbox_handle, server_handle
from pgdyno.undo.rollback import RollbackOutcome
from pgdyno.undo.rollback import rollback as undo_all
from pgdyno.undo.server import MARKER, check_dsn


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
    options = _RollbackOptions(yes, restart_command, dsn)
    if options.address is not None:
        check_dsn(env.data_dir, options.address.dsn, options.address.label)
    with workdir_lock(env):
        outcome = undo_all(
            env,
            lambda identity: _handle(env, identity, options),
            LiveDevices(Roots()),
            err(env).print,
            confirm_damaged=confirm_damaged,
        )
    _print(out(env).print, outcome)
    failure = outcome.failure(dsn_given=options.address is not None)
    if failure is not None:
        raise failure


class _RollbackOptions:
    def __init__(self, yes: bool, restart_command: str | None, dsn: str | None) -> None:
        self.yes = yes
        self.restart_command = restart_command
        self.address = server_address(dsn) if dsn is not None else None


def _print(say: Callable[[str], None], outcome: RollbackOutcome) -> None:
    for server in outcome.servers.restored:
        if server.note:
            say(server.note)
            continue
        for change in reversed(server.changes):
            if change.name == MARKER:
                continue
            back = change.old_auto if change.old_auto is not None else "(reset)"
            say(
                f"restored {change.name} on {server.server} to {back} (pgdyno had set {change.new})"
            )
    for r in outcome.host.restored:
        say(f"restored {r.knob} to {r.old} (pgdyno had set {r.set_to or '-'})")
    for line in outcome.storage.done:
        say(line)
    if outcome.nothing_done and not outcome.unfinished:
        say("nothing to restore (no pending change)")
    elsewhere = outcome.elsewhere
    if elsewhere is not None:  # this work directory's rollback cannot restore them
        say(f"{elsewhere}: run `pgdyno rollback --workdir {elsewhere.journal.parent}`")
    for kept in outcome.set_aside:
        say(f"set the damaged journal aside as {kept}")


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
