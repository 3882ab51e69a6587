"""The `pgdyno` command group. Commands only translate options, call the library, render."""

from __future__ import annotations

import importlib

import click

from pgdyno import __version__

# Each command's module is imported when that command runs (or its help is shown): the heavy
# drivers (psycopg, asyncssh, SciPy) stay out of `pgdyno rollback` and `pgdyno --version`, so
# a command starts in a fraction of the time (docs/benchmarks.md, "CLI start-up").
_COMMANDS = {
    "bench": "bench_cmd",
    "capacity": "capacity_cmd",
    "compare": "compare_cmd",
    "datasets": "datasets_cmd",
    "doctor": "doctor_cmd",
    "fleet": "fleet_cmd",
    "noise": "noise_cmd",
    "pg": "pg_cmd",
    "plan": "plan_cmd",
    "report": "report_cmd",
    "rollback": "rollback_cmd",
    "runs": "runs_cmd",
    "sandbox": "sandbox_cmd",
    "tune": "tune_cmd",
}


class _Commands(click.Group):
    """The top-level group, loading a command's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return command(cmd_name) if cmd_name in _COMMANDS else None


def command(name: str) -> click.Command:
    """The command `name` (a key of the group), its module imported."""
    found = getattr(importlib.import_module(f"pgdyno.cli.{_COMMANDS[name]}"), name)
    assert isinstance(found, click.Command), name
    return found


def commands() -> dict[str, click.Command]:
    """Every top-level command by name (the reference and the help tests walk them)."""
    return {name: command(name) for name in sorted(_COMMANDS)}


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=_Commands, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="pgdyno")
@click.option(
    "--traceback",
    is_flag=True,
    help="On an error, also print the Python traceback (for bug reports); also accepted after "
    "the command.",
)
def cli(traceback: bool) -> None:
    """pgdyno: a performance lab for PostgreSQL on Linux.

    Runs pgbench matrices on a sandbox PostgreSQL it manages (or on an existing server) and keeps
    every run, with its per-second series, in a results database.

    \b
    Example:
      pgdyno bench --workload select-only -c 1,2 -T 10
      pgdyno runs list
    """
    # main() reads --traceback from the raw arguments: it must work before parsing finishes.
    del traceback
