"""`pgdyno doctor`: audit the host and a PostgreSQL server against the rule base."""

from __future__ import annotations

from pathlib import Path

import click

from pgdyno.cli.common import (
    DIR,
    FILE,
    data_dir_option,
    environment,
    err,
    out,
    print_json,
    server_io_options,
    ssh_option,
    target_options,
)
from pgdyno.doctor.rules import SEVERITIES
from pgdyno.environment import Environment
from pgdyno.lab.doctor import DoctorRequest, Examined, examine
from pgdyno.terminal.doctor import as_data, render, wait_lines, waits_data


@click.command()
@target_options(
    "Audit an existing server ('' for PG* variables).",
    "Audit pgdyno's sandbox server (started if needed).",
)
@data_dir_option(
    "The data directory, when the server cannot say (no privilege) or none is audited."
)
@click.option("--wal-dir", type=DIR, help="The WAL directory, when it cannot be found "
              "inside the data directory.")  # fmt: skip
@click.option("--snapshot", "snapshot_path", type=FILE, help="Also save the facts gathered "
              "to FILE (JSON, see docs/doctor-snapshot.md).")  # fmt: skip
@click.option("--from", "from_path", type=FILE,
              help="Audit a saved snapshot instead of this machine.")  # fmt: skip
@click.option("--fail-on", type=click.Choice([*SEVERITIES, "never"]), default="warning",
              show_default=True, help="Exit with status 1 when a finding at or above this "
              "severity is found.")  # fmt: skip
@ssh_option
@server_io_options
@click.pass_context
def doctor(
    ctx: click.Context, /, dsn: str | None, sandbox: bool, data_dir: Path | None,
    wal_dir: Path | None, snapshot_path: Path | None, from_path: Path | None, fail_on: str,
    ssh: str | None, as_json: bool, pg_bin: Path | None, pg_version: int | None, **_: object,
) -> None:  # fmt: skip
    """Audit the host and a PostgreSQL server: findings by layer, each with a fix.

    Reads CPU, memory, kernel, block-device and filesystem facts of this machine (without root
    where possible, saying what it could not read) and, with --dsn or --sandbox, the server's
    settings and statistics, then checks them against rules drawn from published benchmarks
    (`doctor/rules/*.toml`, explained in docs/doctor.md). Changes nothing.

    \b
    Examples:
      pgdyno doctor                          # this host only
      pgdyno doctor --dsn "host=/var/run/postgresql dbname=postgres"
      pgdyno doctor --sandbox --snapshot host.json
      pgdyno doctor --from customer.json --fail-on critical
      pgdyno doctor --ssh db1 --dsn "host=/var/run/postgresql dbname=postgres"
    """
    env = environment(ctx)
    request = DoctorRequest(dsn, sandbox, data_dir, wal_dir, snapshot_path, from_path, ssh,
                            pg_bin, pg_version)  # fmt: skip
    examined = examine(env, request, err(env).print)
    _show(env, examined, as_json)
    if fail_on != "never" and examined.audit.at_least(fail_on):
        ctx.exit(1)


def _show(env: Environment, examined: Examined, as_json: bool) -> None:
    """The audit, then what the server's newest benchmark waited on beside the rules."""
    result, snapshot, waits = examined.audit, examined.snapshot, examined.waits
    if as_json:
        data = as_data(result, snapshot)
        data["waits"] = waits_data(*waits) if waits else None
        print_json(env, data)
        return
    console = out(env)
    for item in render(result, snapshot):
        console.print(item)
    for line in wait_lines(*waits) if waits else ():
        console.print(line)
