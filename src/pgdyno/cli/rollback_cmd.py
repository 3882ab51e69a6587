"""`pgdyno rollback`: undo what pgdyno left changed, PostgreSQL first, then the host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from pgdyno.cli.common import environment, err, out, workdir_options
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import workdir_lock
from pgdyno.host.journal import rollback as rollback_changes
from pgdyno.postgres.cluster import Sandbox, taken_ports
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.tune.apply import ServerHandle
from pgdyno.tune.rollback import rollback_servers
from pgdyno.tune.servers import binaries_for, sandbox_handle, server_handle


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
@workdir_options
@click.pass_context
def rollback(
    ctx: click.Context, /, yes: bool, restart_command: str | None, **_: object
) -> None:  # fmt: skip
    """Restore every setting pgdyno changed: after `tune --apply`, or an interrupted `compare`.

    PostgreSQL first: each `ALTER SYSTEM` pgdyno ran is undone (the setting goes back to what
    postgresql.auto.conf held, or is reset), the server reloads, and restarts when a restored
    setting needs it (pgdyno's sandbox always; an existing server only with --yes and
    --restart-command, or pg_ctl when its data directory is on this host). Then the host:
    every sysctl, transparent huge pages and block-device setting goes back to its old value,
    newest change first. Each journal records its changes before they are made, so this works
    after a crash too; running it again does nothing.

    \b
    Example:
      pgdyno rollback --workdir /var/lib/pgdyno
    """
    env = environment(ctx)
    console = out(env)
    servers, restored = rollback_servers(
        env.data_dir,
        lambda identity: _handle(env, identity, yes=yes, restart_command=restart_command),
        lambda: rollback_changes(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root),
        err(env).print,
    )
    for server in servers:
        for change in reversed(server.changes):
            back = change.old_auto if change.old_auto is not None else "(reset)"
            console.print(f"restored {change.name} on {server.server} to {back} "
                          f"(pgdyno had set {change.new})")  # fmt: skip
        if server.waiting_for_restart:
            console.print(
                f"{server.server}: {', '.join(server.waiting_for_restart)} take effect at the "
                "next restart: restart it, or run `pgdyno rollback --yes --restart-command CMD`."
            )
    if not restored and not servers:
        console.print(f"nothing to restore ({env.data_dir} holds no pending change)")
        return
    for r in restored:
        console.print(f"restored {r.knob} to {r.old} (pgdyno had set {r.set_to or '-'})")


@contextmanager
def _handle(
    env: Environment, identity: dict[str, str], *, yes: bool, restart_command: str | None
) -> Iterator[ServerHandle]:
    if identity.get("kind") == "sandbox":
        with _sandbox(env, identity.get("cluster", "")) as handle:
            yield handle
        return
    data_dir = Path(identity["data_dir"]) if identity.get("data_dir") else None
    yield server_handle(
        identity.get("dsn", ""), None, f"server {identity.get('dsn', '')}",
        restart_command=restart_command, consent=yes, data_dir=data_dir,
        binaries=binaries_for(data_dir, env.cache_dir) if data_dir else None,
    )  # fmt: skip


@contextmanager
def _sandbox(env: Environment, cluster: str) -> Iterator[ServerHandle]:
    """pgdyno's own sandbox: started for the rollback when it is not running, and restarted
    when a restored setting needs it (no consent needed: it is pgdyno's)."""
    root = env.clusters_dir / cluster
    if not cluster or os.sep in cluster or not root.is_dir():
        raise UsageError(
            f"the PostgreSQL journal names sandbox {cluster!r}, which is not in "
            f"{env.clusters_dir}: remove {env.data_dir / 'pg-journal.jsonl'} if it was destroyed."
        )
    box = Sandbox(root, sandbox_user(env.is_root))
    with workdir_lock(env):
        started = box.postmaster_pid() is None
        if started:
            box.start({}, owner_pid=os.getpid(), taken_ports=taken_ports(env.clusters_dir))
        try:
            yield sandbox_handle(box, consent=True, owner_pid=box.state().owner_pid)
        finally:
            if started:
                box.stop()
