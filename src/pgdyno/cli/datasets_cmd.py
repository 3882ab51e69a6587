"""`pgdyno datasets list|drop`: see and remove what pgdyno created on a server.

The library part (what is pgdyno's, what a drop removes, how it is shown) is
`pgdyno.postgres.footprint`; this module only picks the server and translates options.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

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
from pgdyno.experiment.target import ServerAddress, locked_sandbox, server_address
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox, cluster_name
from pgdyno.postgres.footprint import (
    Footprint,
    PgdynoDatabase,
    check_drop_request,
    choose_drops,
    drop_databases,
    footprint_json,
    footprint_lines,
    mib,
    read_footprint,
)
from pgdyno.undo.server import pending_changes, server_key

NOTHING = Footprint((), (), None, ())


def server_options[F: Callable[..., Any]](func: F) -> F:
    """--sandbox (the default) or --dsn, as `bench` and `doctor` name a server."""
    func = click.option(
        "--dsn",
        metavar="CONNSTR",
        help="An existing server (libpq connection string or URI; '' for the PG* variables).",
    )(func)
    return click.option(
        "--sandbox",
        is_flag=True,
        help="pgdyno's sandbox of --pg-version (the default when --dsn is not given).",
    )(func)


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
@json_option
@binaries_options
@workdir_options
@click.pass_context
def list_(
    ctx: click.Context,
    /,
    sandbox: bool,
    dsn: str | None,
    as_json: bool,
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
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
    with _server(env, sandbox, dsn, pg_bin, pg_version) as (address, where):
        found = NOTHING if address is None else read_footprint(address.dsn, address.password)
    if address is not None:
        found = _marked(env, found, where if dsn is None else address.dsn, dsn is None)
    if as_json:
        print_json(env, footprint_json(found, where))
        return
    console = out(env)
    for line in footprint_lines(found, where):
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
@json_option
@binaries_options
@workdir_options
@click.pass_context
def drop(
    ctx: click.Context,
    /,
    names: tuple[str, ...],
    every: bool,
    yes: bool,
    sandbox: bool,
    dsn: str | None,
    as_json: bool,
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
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
    check_drop_request(names, every)
    dropped: list[PgdynoDatabase] = []
    with _server(env, sandbox, dsn, pg_bin, pg_version) as (address, where):
        found = NOTHING if address is None else read_footprint(address.dsn, address.password)
        chosen = choose_drops(found, names, every, where)
        if address is not None and chosen:
            if dsn is not None and not yes:
                listed = ", ".join(f"{d.name} ({mib(d.bytes)})" for d in chosen)
                raise UsageError(f"this would drop {listed} from {where}: add --yes to drop.")
            with connect(address.dsn, address.password) as client:
                drop_databases(client, chosen, dropped.append)
    if as_json:
        print_json(env, {"target": where, "dropped": [d.as_json() for d in dropped]})
        return
    console = out(env)
    for db in dropped:
        console.print(f"dropped database {db.name} ({mib(db.bytes)})")
    if not dropped:
        console.print(f"nothing to drop on {where}")


def _marked(env: Environment, found: Footprint, name: str, sandbox: bool) -> Footprint:
    """Mark the postgresql.auto.conf entries that `pgdyno tune --apply` wrote (its journal
    holds them, not yet rolled back)."""
    if found.auto_conf is None:
        return found
    identity = (
        {"kind": "sandbox", "cluster": name.removeprefix("sandbox ")} if sandbox
        else {"kind": "server", "dsn": name}
    )  # fmt: skip
    ours = {
        c.name
        for c in pending_changes(env.data_dir)
        if server_key(c.server) == server_key(identity)
    }
    marked = tuple(replace(row, set_by_pgdyno=row.name in ours) for row in found.auto_conf)
    return replace(found, auto_conf=marked)


@contextmanager
def _server(
    env: Environment, sandbox: bool, dsn: str | None, pg_bin: Path | None, pg_version: int | None
) -> Iterator[tuple[ServerAddress | None, str]]:
    """The server to look at and its label: `dsn`, or the sandbox (started for the block if it
    was not running, with the work directory locked). None when that sandbox does not exist:
    nothing of pgdyno's can be in it, and none is created just to say so."""
    if sandbox and dsn is not None:
        raise UsageError("give --sandbox or --dsn, not both.")
    if dsn is not None:
        address = server_address(dsn)
        yield address, address.label
        return
    binaries = pick_binaries(env, pg_bin, pg_version)
    name = cluster_name(binaries.major)
    if not Sandbox(env.clusters_dir / name, None).exists():
        yield None, f"sandbox {name} (not created yet)"
        return
    with locked_sandbox(env, binaries, {}, err(env).print) as target:
        yield ServerAddress(target.dsn, target.password, target.label), target.label
