"""`pgdyno pg ...`: PostgreSQL binaries."""

from __future__ import annotations

from dataclasses import asdict

import click

from pgdyno.cli.common import environment, json_option, out, print_json, workdir_options
from pgdyno.postgres.binaries import versions as listed_versions
from pgdyno.terminal.tables import versions_table


@click.group()
def pg() -> None:
    """PostgreSQL binaries pgdyno can use.

    \b
    Example:
      pgdyno pg versions
    """


@pg.command()
@click.option("--install", type=int, metavar="N", help="Install major version N (14-18) first.")
@json_option
@workdir_options
@click.pass_context
def versions(ctx: click.Context, /, install: int | None, as_json: bool, **_: object) -> None:
    """List PostgreSQL versions: bundled, cached, system, and installable ones.

    \b
    Example:
      pgdyno pg versions
      pgdyno pg versions --install 16
    """
    env = environment(ctx)
    rows = listed_versions(env.cache_dir, install)
    if as_json:
        print_json(env, [asdict(r) for r in rows])
    else:
        out(env).print(versions_table(rows))
