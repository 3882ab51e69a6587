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
    print_json,
    workdir_options,
)
from pgdyno.errors import UsageError
from pgdyno.lab import sandboxes
from pgdyno.postgres.conf import parse_assignments
from pgdyno.terminal.tables import sandbox_table


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
    started = sandboxes.start(env, settings, pg_bin, pg_version, err(env).print)
    status = started.status
    out(env).print(
        f"sandbox {status.name} (PostgreSQL {status.version}) running, pid {status.pid}; "
        f'connect with: psql "{started.conninfo}"'
    )


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
    stopped = sandboxes.stop(env, pg_version)
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
    rows = sandboxes.statuses(env, err(env).print)
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
    boxes = sandboxes.destroyable(env, pg_version)
    if not boxes:
        out(env).print("no sandbox to destroy")
        return
    names = ", ".join(b.root.name for b in boxes)
    if not yes:
        if not env.stdin_isatty:
            raise UsageError(f"destroying {names} deletes their data: add --yes to confirm.")
        if not click.confirm(f"Delete sandbox {names} and its data?"):
            out(env).print("nothing was destroyed")
            return
    sandboxes.destroy(env, boxes)
    out(env).print(f"destroyed: {names}")
