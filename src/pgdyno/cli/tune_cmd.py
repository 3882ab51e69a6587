"""`pgdyno tune`: compute a configuration for every layer, write it, apply it, verify it."""

from __future__ import annotations

from pathlib import Path

import click

from pgdyno.cli.common import (
    FILE,
    adaptive_options,
    environment,
    err,
    options,
    out,
    print_json,
    restart_options,
    server_io_options,
    target_options,
)
from pgdyno.cli.tune_request import VerifyOptions, check_verify, parse_layers, workload_names
from pgdyno.cli.tune_verify import run_verify, verify_plans
from pgdyno.environment import Environment
from pgdyno.lab.tune import ServerOptions, Tuned, TuneRequest
from pgdyno.lab.tune import tune as tune_configuration
from pgdyno.records.tune import DATA_SIZES, PROFILES, STORAGES, DataSize, Profile, Storage
from pgdyno.terminal.tune import (
    apply_data,
    baseline_data,
    configuration_data,
    render_apply,
    render_configuration,
)
from pgdyno.tune.facts import Given
from pgdyno.tune.model import LAYERS
from pgdyno.tune.request_checks import (
    check_connections,
    check_options,
    check_pg_version,
    out_dir,
    parse_ram,
)

BASELINE_NAMES = ("pgtune", "timescaledb-tune")


# What the configuration is for, and the machine it is computed for offline.
_WORKLOAD = options(
    click.option("--profile", type=click.Choice(PROFILES), default="mixed", show_default=True,
                 help="The workload: web, oltp, dw (analytics), mixed or desktop."),
    click.option("--connections", type=click.IntRange(1, 262143), metavar="N",
                 help="max_connections to plan for (default: the server's, else the profile's)."),
    click.option("--baseline", "baseline_name", type=click.Choice(BASELINE_NAMES),
                 help="Print what pgtune or timescaledb-tune would recommend instead, exactly."),
    click.option("--ram", "ram_text", metavar="SIZE", help="Offline: the machine's RAM (64GB); "
                 "nothing is read from this host or a server."),
    click.option("--cpus", type=click.IntRange(1, 4096), metavar="N", help="Offline: CPUs."),
    click.option("--storage", type=click.Choice(STORAGES),
                 help="Disk type under the data directory (default: read from the disk)."),
    click.option("--data-size", type=click.Choice(DATA_SIZES), help="Data size against RAM, "
                 "as pgtune's form asks (default: read from the server)."),
)  # fmt: skip

# Where the facts come from, and what is done with the configuration.
_SOURCE_AND_OUTPUT = options(
    target_options("Tune an existing server ('' for PG* variables).",
                   "Tune pgdyno's sandbox (the default online)."),
    click.option("--from", "from_path", type=FILE, help="Tune from a snapshot written by "
                 "`pgdyno doctor --snapshot FILE`, offline, exactly as on the machine it was "
                 "taken on."),
    click.option("--out", "out_text", metavar="DIR", help="Write the configuration as files to "
                 "deploy (postgresql.conf include, ALTER SYSTEM script, sysctl.d, udev rule, "
                 "tmpfiles.d) into DIR."),
    click.option("--apply", "do_apply", is_flag=True,
                 help="Apply it (journalled; `pgdyno rollback` undoes all of it)."),
    click.option("--layers", "layers_text", default=",".join(LAYERS), show_default=True,
                 help="Layers --apply changes."),
    restart_options(
        "Consent to change host settings and to restart the server when needed.",
        "An existing server's data directory on this host (for pg_ctl restart).",
    ),
    click.option("--no-observability", "no_observability", is_flag=True,
                 help="Leave out the observability settings (logging, track_io_timing): the "
                 "table, --json, the files and --apply then hold the performance settings "
                 "alone."),
)  # fmt: skip

# --verify: measure the configuration against the current one and pgtune's.
_VERIFY = options(
    click.option("--verify", is_flag=True, help="Measure: the current configuration vs "
                 "pgtune's vs pgdyno's (pgdyno compare with adaptive verdicts), then a verdict "
                 "per configuration and a report."),
    click.option("--ladder", is_flag=True,
                 help="With --verify: also a ladder of pgdyno's layers, one at a time."),
    click.option("--workload", "workloads", default="tpcb-like,select-only", show_default=True,
                 help="With --verify: pgbench workloads, comma-separated."),
    click.option("--scale", default="small", show_default=True,
                 help="With --verify: dataset scale (small, medium, large or a number)."),
    click.option("--clients", type=click.IntRange(1, 10000), metavar="N",
                 help="With --verify: pgbench clients (default: twice the CPUs)."),
    click.option("--duration", type=click.IntRange(5, 86400), default=60, show_default=True,
                 help="With --verify: seconds per run."),
    click.option("--warmup", type=click.IntRange(0, 86400), default=10, show_default=True,
                 metavar="S", help="With --verify: seconds of unmeasured load before each run "
                 "(after a set switch restarts the server, its caches are cold)."),
)  # fmt: skip


@click.command()
@_WORKLOAD
@_SOURCE_AND_OUTPUT
@_VERIFY
@adaptive_options
@server_io_options
@click.pass_context
def tune(
    ctx: click.Context,
    /,
    profile: Profile,
    connections: int | None,
    baseline_name: str | None,
    ram_text: str | None,
    cpus: int | None,
    storage: Storage | None,
    data_size: DataSize | None,
    dsn: str | None,
    sandbox: bool,
    from_path: Path | None,
    out_text: str | None,
    do_apply: bool,
    layers_text: str,
    yes: bool,
    restart_command: str | None,
    data_dir: Path | None,
    no_observability: bool,
    verify: bool,
    ladder: bool,
    workloads: str,
    scale: str,
    clients: int | None,
    duration: int,
    warmup: int,
    budget: str | None,
    precision: float | None,
    as_json: bool,
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
    """Compute a configuration for every layer, with the reason for each value.

    PostgreSQL settings (memory within a worst-case budget, WAL and checkpoints, planner and
    I/O costs by disk type, parallelism, autovacuum), host settings (dirty-page writeback,
    swappiness, huge pages, THP, NUMA, scheduler) and the block devices under the data and WAL
    directories, from the facts the doctor reads (live, or from a snapshot file with --from;
    or those given offline with --ram) and a profile. Values come from data/tune.toml and name
    the doctor rules and published benchmarks behind them; each PostgreSQL value is checked
    against the target's pg_settings.

    \b
    Examples:
      pgdyno tune --sandbox --profile oltp
      pgdyno tune --baseline pgtune --pg-version 16 --profile oltp --ram 64GB --cpus 16 \\
          --connections 500 --storage nvme --data-size greater_ram --json
      pgdyno tune --sandbox --out tuned/
      pgdyno tune --from prod.json --profile oltp   # prod.json: pgdyno doctor --snapshot
      pgdyno tune --sandbox --apply --yes      # then: pgdyno rollback
    """
    env = environment(ctx)
    ram = parse_ram(ram_text) if ram_text is not None else None
    check_pg_version(pg_version)
    check_connections(connections, {}, pg_version)  # again with the configuration's workers
    measure = VerifyOptions(
        workload_names(workloads), scale, clients, duration, warmup, precision, budget, ladder
    )
    request = TuneRequest(
        given=Given(profile, ram, cpus, connections, pg_version, storage, data_size),
        server=ServerOptions(dsn, sandbox, restart_command, data_dir, pg_bin, pg_version),
        from_path=from_path,
        baseline_name=baseline_name,
        out_dir=out_dir(out_text),
        apply=do_apply,
        layers=parse_layers(layers_text),
        yes=yes,
        verify=verify,
        as_json=as_json,
        observability=not no_observability,
    ).check()
    check_options(_typed(ctx), offline=not request.online, verify=verify)
    if verify:  # before a sandbox is started or a plan written
        check_verify(measure)
    tuned = tune_configuration(env, request, err(env).print)
    if tuned.pgtune is not None:  # the sandbox is free: the comparison takes the lock
        run_verify(env, verify_plans(env, measure, tuned.ours, tuned.pgtune), as_json=as_json)
    else:
        _show(env, request, tuned)


def _typed(ctx: click.Context) -> set[str]:
    """The options given on the command line (or in the environment), not left at a default."""
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return {name for name in ctx.params if ctx.get_parameter_source(name) in sources}


def _show(env: Environment, request: TuneRequest, tuned: Tuned) -> None:
    """The configuration (or the baseline's values, or what --apply did), as JSON or tables."""
    if request.baseline_json_only and request.baseline_name and tuned.baseline_values is not None:
        # The configuration as checked, so the JSON leaves out what the table does.
        print_json(env, baseline_data(request.baseline_name, tuned.baseline_values, tuned.config))
    elif tuned.applied is not None and request.as_json:
        print_json(env, {"target": tuned.label, **apply_data(tuned.applied)})
    elif request.as_json:
        print_json(env, configuration_data(tuned.config, tuned.label))
    else:
        console = out(env)
        shown = (
            render_apply(tuned.applied, tuned.label) if tuned.applied is not None
            else render_configuration(tuned.config, tuned.label)
        )  # fmt: skip
        for item in shown:
            console.print(item)
