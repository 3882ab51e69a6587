"""`pgdyno datasets list|drop`: see and remove what pgdyno created on a server.

The library part (what is pgdyno's, what a drop removes, how it is shown) is
`pgdyno.postgres.footprint`, the server picked and the journal read by `pgdyno.lab.datasets`;
this module only translates options and renders.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pgdyno.cli.common import (
    environment,
    err,
    out,
    print_json,
    server_io_options,
    target_options,
)
from pgdyno.lab.datasets import Server, footprint
from pgdyno.lab.datasets import drop as drop_datasets
from pgdyno.postgres.footprint import footprint_json, footprint_lines, mib

# --sandbox (the default) or --dsn, as `bench` and `doctor` name a server.
_TARGET = target_options(
    "An existing server (libpq connection string or URI; '' for the PG* variables).",
    "pgdyno's sandbox of --pg-version (the default when --dsn is not given).",
    metavar="CONNSTR",
    sandbox_first=True,
)


def server_options(func: Callable[..., None]) -> Callable[..., None]:
    """--sandbox or --dsn, then --json, --pg-bin, --pg-version and the work directory; the
    command gets the server they name as one `server` (a `Server`)."""

    @functools.wraps(func)
    def with_server(
        *args: Any, sandbox: bool, dsn: str | None, pg_bin: Path | None,
        pg_version: int | None, **kwargs: Any,
    ) -> None:  # fmt: skip
        func(*args, server=Server(sandbox, dsn, pg_bin, pg_version), **kwargs)

    return _TARGET(server_io_options(with_server))


@click.group()
def datasets() -> None:
    """What pgdyno created on a server: its dataset databases and extensions.

    `bench` creates one template database per dataset scale (pgdyno_tpl_s<scale>) and the bench
    copy (pgdyno_bench); with --prewarm, the pg_prewarm extension in the bench copy when it was
    missing. They stay on the server, ready for the next bench, until dropped here.

    \b
    Example:
      pgdyno datasets list --dsn "host=db1 user=bench dbname=postgres"
      pgdyno datasets drop --all --dsn "host=db1 user=bench dbname=postgres" --yes
    """


@datasets.command("list")
@server_options
@click.pass_context
def list_(ctx: click.Context, /, server: Server, as_json: bool, **_: object) -> None:
    """List pgdyno's databases (with size), extensions and postgresql.auto.conf.

    Databases: the dataset templates (scale, complete or interrupted) and the bench copy, sized
    by pg_database_size. Extensions: those pgdyno created (it marks them with a comment).
    postgresql.auto.conf: every setting ALTER SYSTEM wrote, by anyone (reading it needs
    a superuser; without, one line says so). Changes nothing.

    \b
    Example:
      pgdyno datasets list
      pgdyno datasets list --dsn "host=db1 user=bench dbname=postgres" --json
    """
    env = environment(ctx)
    found = footprint(env, server, err(env).print)
    if as_json:
        print_json(env, footprint_json(found.footprint, found.where))
        return
    console = out(env)
    for line in footprint_lines(found.footprint, found.where):
        console.print(line)


@datasets.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "every", is_flag=True, help="Drop every database pgdyno created there.")
@click.option(
    "--yes",
    is_flag=True,
    help="Really drop on an existing server (--dsn); without it pgdyno says what it would drop "
    "and exits with status 2.",
)
@server_options
@click.pass_context
def drop(
    ctx: click.Context, /, names: tuple[str, ...], every: bool, yes: bool, server: Server,
    as_json: bool, **_: object,
) -> None:  # fmt: skip
    """Drop pgdyno's databases (and so the extensions pgdyno created in them).

    Only pgdyno_tpl_s<scale> and pgdyno_bench can be dropped; any other name is refused (exit
    status 2). On an existing server (--dsn) nothing is dropped without --yes. A database
    another session is connected to is not dropped (no FORCE): the error names it. pgdyno
    creates extensions only inside pgdyno_bench, so dropping it removes them too.

    \b
    Example:
      pgdyno datasets drop pgdyno_tpl_s50
      pgdyno datasets drop --all --dsn "host=db1 user=bench dbname=postgres" --yes
    """
    env = environment(ctx)
    done = drop_datasets(env, server, names, every=every, yes=yes, log=err(env).print)
    if as_json:
        print_json(env, {"target": done.where, "dropped": [d.as_json() for d in done.databases]})
        return
    console = out(env)
    for db in done.databases:
        console.print(f"dropped database {db.name} ({mib(db.bytes)})")
    if not done.databases:
        console.print(f"nothing to drop on {done.where}")
