"""`pgdyno doctor`: audit the host and a PostgreSQL server against the rule base."""

from __future__ import annotations

from contextlib import ExitStack
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
from pgdyno.doctor.evaluate import audit
from pgdyno.doctor.gather import take_snapshot
from pgdyno.doctor.rules import SEVERITIES, load_rules
from pgdyno.doctor.snapshot import load_snapshot, save_snapshot
from pgdyno.errors import UsageError
from pgdyno.experiment.target import locked_sandbox, server_address
from pgdyno.render.doctor import as_data, render


@click.command()
@click.option("--dsn", metavar="CONNINFO", help="Audit an existing server ('' for PG* variables).")
@click.option("--sandbox", is_flag=True, help="Audit pgdyno's sandbox server (started if needed).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The data directory, when the server cannot say (no privilege) or none is audited.",
)
@click.option(
    "--wal-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The WAL directory, when it cannot be found inside the data directory.",
)
@click.option(
    "--snapshot",
    "snapshot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also save the facts gathered to FILE (JSON, see docs/doctor-snapshot.md).",
)
@click.option(
    "--from",
    "from_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Audit a saved snapshot instead of this machine.",
)
@click.option(
    "--fail-on",
    type=click.Choice([*SEVERITIES, "never"]),
    default="warning",
    show_default=True,
    help="Exit with status 1 when a finding at or above this severity is found.",
)
@json_option
@binaries_options
@workdir_options
@click.pass_context
def doctor(
    ctx: click.Context,
    /,
    dsn: str | None,
    sandbox: bool,
    data_dir: Path | None,
    wal_dir: Path | None,
    snapshot_path: Path | None,
    from_path: Path | None,
    fail_on: str,
    as_json: bool,
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
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
    """
    env = environment(ctx)
    if sum([dsn is not None, sandbox, from_path is not None]) > 1:
        raise UsageError("give at most one of --dsn, --sandbox and --from.")
    if from_path is not None and snapshot_path is not None:
        raise UsageError("--snapshot saves what this machine shows; it cannot be used with --from.")
    rules = load_rules()
    if from_path is not None:
        snapshot = load_snapshot(from_path)
    else:
        with ExitStack() as stack:
            password = None
            if sandbox:
                binaries = pick_binaries(env, pg_bin, pg_version)
                target = stack.enter_context(locked_sandbox(env, binaries, {}, err(env).print))
                dsn, label = target.dsn, target.label
            elif dsn is not None:
                address = server_address(dsn)
                dsn, password, label = address.dsn, address.password, address.label
            else:
                label = "this host"
            snapshot = take_snapshot(
                env, target=label, dsn=dsn, password=password, data_dir=data_dir, wal_dir=wal_dir
            )
        if snapshot_path is not None:
            save_snapshot(snapshot_path, snapshot)
            err(env).print(f"snapshot saved to {snapshot_path}")
    result = audit(rules, snapshot)
    if as_json:
        print_json(env, as_data(result, snapshot))
    else:
        console = out(env)
        for item in render(result, snapshot):
            console.print(item)
    if fail_on != "never" and result.at_least(fail_on):
        ctx.exit(1)
