"""`pgdyno sandbox ...`: the sandbox clusters pgdyno manages."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from pgdyno.cli.common import (
    binaries_options,
    environment,
    err,
    json_option,
    out,
    pick_binaries,
    print_json,
    workdir_options,
)
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import check_settings_for, open_sandbox, workdir_lock
from pgdyno.postgres.cluster import Sandbox, all_sandboxes, cluster_name, recover, taken_ports
from pgdyno.postgres.conf import parse_assignments
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.render.terminal import sandbox_table
from pgdyno.undo import server as pg_journal
from pgdyno.undo.host import pending


@click.group()
def sandbox() -> None:
    """The sandbox PostgreSQL clusters pgdyno creates and manages (one per major version).

    \b
    Example:
      pgdyno sandbox start --set shared_buffers=1GB
      pgdyno sandbox status
      pgdyno sandbox stop
    """


@sandbox.command()
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="A PostgreSQL setting for this start (repeatable).",
)
@binaries_options
@workdir_options
@click.pass_context
def start(
    ctx: click.Context,
    /,
    assignments: tuple[str, ...],
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
    """Create the sandbox if needed and start it; it keeps running until `sandbox stop`.

    \b
    Example:
      pgdyno sandbox start --pg-version 17 --set shared_buffers=512MB
    """
    env = environment(ctx)
    settings = parse_assignments(assignments)
    binaries = pick_binaries(env, pg_bin, pg_version)
    check_settings_for(binaries, settings)  # before a running sandbox is stopped
    with workdir_lock(env):
        box = open_sandbox(env, binaries, err(env).print)
        if box.postmaster_pid() is not None:
            err(env).print(f"sandbox {box.root.name} is already running; restarting it")
            box.stop()
        box.start(
            settings, owner_pid=None, binaries=binaries, taken_ports=taken_ports(env.clusters_dir)
        )
        status = box.status()
    out(env).print(
        f"sandbox {status.name} (PostgreSQL {status.version}) running, pid {status.pid}; "
        f'connect with: psql "{box.conninfo()}"'
    )


def _selected(ctx: click.Context, pg_version: int | None) -> list[Sandbox]:
    env = environment(ctx)
    run_as = sandbox_user(env.is_root, create=False)
    boxes = all_sandboxes(env.clusters_dir, run_as)
    if pg_version is not None:
        boxes = [b for b in boxes if b.root.name == cluster_name(pg_version)]
        if not boxes:
            raise UsageError(f"there is no sandbox for PostgreSQL {pg_version} in {env.data_dir}.")
    return boxes


@sandbox.command()
@click.option("--pg-version", type=int, metavar="N", help="Only the sandbox of this major version.")
@workdir_options
@click.pass_context
def stop(ctx: click.Context, /, pg_version: int | None, **_: object) -> None:
    """Stop running sandboxes (all, or one version).

    \b
    Example:
      pgdyno sandbox stop
    """
    env = environment(ctx)
    with workdir_lock(env):
        stopped = [box.root.name for box in _selected(ctx, pg_version) if box.stop()]
    out(env).print(f"stopped: {', '.join(stopped)}" if stopped else "no sandbox was running")


@sandbox.command()
@json_option
@workdir_options
@click.pass_context
def status(ctx: click.Context, /, as_json: bool, **_: object) -> None:
    """Show each sandbox: version, running or not, port, socket and data directory.

    \b
    Example:
      pgdyno sandbox status --json
    """
    env = environment(ctx)
    run_as = sandbox_user(env.is_root, create=False)
    for note in recover(env.clusters_dir, run_as):
        err(env).print(note)
    rows = [box.status() for box in all_sandboxes(env.clusters_dir, run_as)]
    if as_json:
        print_json(env, [asdict(r) for r in rows])
    elif rows:
        out(env).print(sandbox_table(rows))
    else:
        out(env).print(f"no sandbox in {env.data_dir} yet: `pgdyno sandbox start` creates one")


@sandbox.command()
@click.option("--pg-version", type=int, metavar="N", help="Only the sandbox of this major version.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@workdir_options
@click.pass_context
def destroy(ctx: click.Context, /, pg_version: int | None, yes: bool, **_: object) -> None:
    """Stop and delete sandboxes with their data (results are kept).

    Asks first on a terminal; answering no destroys nothing and exits with status 0.

    \b
    Example:
      pgdyno sandbox destroy --pg-version 16 --yes
    """
    env = environment(ctx)
    boxes = _selected(ctx, pg_version)
    if not boxes:
        out(env).print("no sandbox to destroy")
        return
    names = ", ".join(b.root.name for b in boxes)
    _refuse_pending(env, [b.root.name for b in boxes])
    if not yes:
        if not env.stdin_isatty:
            raise UsageError(f"destroying {names} deletes their data: add --yes to confirm.")
        if not click.confirm(f"Delete sandbox {names} and its data?"):
            out(env).print("nothing was destroyed")
            return
    with workdir_lock(env):
        for box in boxes:
            box.destroy()
    out(env).print(f"destroyed: {names}")


def _refuse_pending(env: Environment, names: list[str]) -> None:
    """A sandbox with changes pending in the journals is not destroyed: the host settings
    changed with it (huge pages sized for it, say) would stay changed, with nothing left to
    tell the rollback how to put them back in order."""
    contents = pg_journal.contents(env.data_dir)
    held = sorted(
        {c.server.get("cluster", "") for c in contents.pending if c.server.get("kind") == "sandbox"}
        & set(names)
    )
    host = pending(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root)
    if held or (host and names):
        what = f"sandbox {', '.join(held)} has" if held else "this work directory has host"
        raise UsageError(
            f"{what} settings pgdyno changed that are not rolled back: run `pgdyno rollback` "
            "first, then destroy."
        )
