"""`pgdyno doctor`: audit the host and a PostgreSQL server against the rule base."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
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
    ssh_option,
    workdir_options,
)
from pgdyno.doctor.evaluate import Audit, audit
from pgdyno.doctor.gather import ServerHost, take_snapshot
from pgdyno.doctor.rules import SEVERITIES, load_rules
from pgdyno.doctor.snapshot import load_snapshot, save_snapshot
from pgdyno.doctor.waits import cite
from pgdyno.environment import Environment
from pgdyno.errors import NoResultsYet, UsageError
from pgdyno.experiment.target import locked_sandbox, server_address
from pgdyno.records.waits import WaitProfile
from pgdyno.remote.host import remote_host
from pgdyno.render.doctor import as_data, render, wait_lines, waits_data
from pgdyno.store.open import open_results


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
@ssh_option
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
    ssh: str | None,
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
      pgdyno doctor --ssh db1 --dsn "host=/var/run/postgresql dbname=postgres"
    """
    env = environment(ctx)
    if sum([dsn is not None, sandbox, from_path is not None]) > 1:
        raise UsageError("give at most one of --dsn, --sandbox and --from.")
    if ssh is not None and (sandbox or from_path is not None):
        raise UsageError("--ssh audits another host and its server (--dsn as that host sees "
                         "it); it cannot be used with --sandbox or --from.")  # fmt: skip
    if from_path is not None and snapshot_path is not None:
        raise UsageError("--snapshot saves what this machine shows; it cannot be used with --from.")
    rules = load_rules()
    if from_path is not None:
        snapshot = load_snapshot(from_path)
    else:
        with ExitStack() as stack:
            if sandbox:
                binaries = pick_binaries(env, pg_bin, pg_version)
                box = stack.enter_context(locked_sandbox(env, binaries, {}, err(env).print))
                audited = Audited(box.label, box.dsn)
            else:
                audited = _audited(stack, env, ssh, dsn)
            snapshot = take_snapshot(
                env, target=audited.label, dsn=audited.dsn, password=audited.password,
                data_dir=data_dir, wal_dir=wal_dir, server_host=audited.server_host,
            )  # fmt: skip
        if snapshot_path is not None:
            save_snapshot(snapshot_path, snapshot)
            err(env).print(f"snapshot saved to {snapshot_path}")
    result = audit(rules, snapshot)
    measured = None if from_path is not None else _measured_waits(env, snapshot)
    _show(env, result, snapshot, measured, as_json)
    if fail_on != "never" and result.at_least(fail_on):
        ctx.exit(1)


def _show(
    env: Environment,
    result: Audit,
    snapshot: Mapping[str, Any],
    measured: tuple[int, WaitProfile] | None,
    as_json: bool,
) -> None:
    """The audit, then what the server's newest benchmark waited on beside the rules."""
    fired = {f.rule.id for f in result.findings}
    citations = (measured[0], cite(measured[1], fired)) if measured else None
    if as_json:
        data = as_data(result, snapshot)
        data["waits"] = waits_data(*citations) if citations else None
        print_json(env, data)
        return
    console = out(env)
    for item in render(result, snapshot):
        console.print(item)
    for line in wait_lines(*citations) if citations else ():
        console.print(line)


def _measured_waits(
    env: Environment, snapshot: Mapping[str, Any]
) -> tuple[int, WaitProfile] | None:
    """The newest wait profile of the audited server in the results store, if there is one
    (read only: a missing store is no results, not an error)."""
    target = snapshot.get("target")
    if not isinstance(target, str) or (
        env.results.conninfo is None
        and not (env.results.path is not None and env.results.path.exists())
    ):
        return None
    try:
        store = open_results(env.results, writing=False)
    except NoResultsYet:
        return None
    with store:
        return store.latest_waits(target)


@dataclass(frozen=True)
class Audited:
    label: str  # for the report's headline: never a password
    dsn: str | None = None  # the server, reached from here
    password: str | None = None
    server_host: ServerHost | None = None  # the server's host when it is another machine


def _audited(stack: ExitStack, env: Environment, ssh: str | None, dsn: str | None) -> Audited:
    """What `doctor` audits besides the rules: this host or one over SSH, and the server."""
    address = None if dsn is None else server_address(dsn)
    if ssh is None:
        if address is None:
            return Audited("this host")
        return Audited(address.label, address.dsn, address.password)
    remote = stack.enter_context(remote_host(ssh, env.runs_dir, err(env).print))
    there = ServerHost(remote.proc_root, remote.sys_root, remote.realpath)
    if address is None:
        return Audited(remote.name, server_host=there)
    return Audited(f"{remote.name} {address.label}", remote.tunnel(address.dsn),
                   address.password, there)  # fmt: skip
