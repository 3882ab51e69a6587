"""`pgdyno tune`: compute a configuration for every layer, write it, apply it, verify it."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from pgdyno import __version__
from pgdyno.cli.common import (
    adaptive_options,
    binaries_options,
    environment,
    err,
    json_option,
    out,
    pick_binaries,
    print_json,
    workdir_options,
)
from pgdyno.cli.tune_request import (
    ServerOptions,
    TuneRequest,
    VerifyOptions,
    check_verify,
    parse_layers,
    workload_names,
)
from pgdyno.cli.tune_verify import run_verify, verify_plans
from pgdyno.doctor.snapshot import load_snapshot
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import sandbox_session, server_address
from pgdyno.postgres.binaries import Binaries
from pgdyno.records.tune import DATA_SIZES, PROFILES, STORAGES, DataSize, Profile, Storage
from pgdyno.render.tune import (
    apply_data,
    baseline_data,
    configuration_data,
    render_apply,
    render_configuration,
)
from pgdyno.tune.apply import apply_configuration
from pgdyno.tune.facts import Given
from pgdyno.tune.files import render_files
from pgdyno.tune.model import LAYERS, Configuration
from pgdyno.tune.out_dir import write_files
from pgdyno.tune.request_checks import (
    check_connections,
    check_options,
    check_pg_version,
    out_dir,
    parse_ram,
)
from pgdyno.tune.session import (
    Gathered,
    TuneTarget,
    baseline,
    from_snapshot,
    gather,
    pgdyno_configuration,
)
from pgdyno.undo.handles import ServerHandle, sandbox_handle, server_handle

BASELINE_NAMES = ("pgtune", "timescaledb-tune")


@click.command()
@click.option("--profile", type=click.Choice(PROFILES), default="mixed", show_default=True,
              help="The workload: web, oltp, dw (analytics), mixed or desktop.")  # fmt: skip
@click.option(
    "--connections",
    type=click.IntRange(1, 262143),
    metavar="N",
    help="max_connections to plan for (default: the server's, else the profile's).",
)
@click.option(
    "--baseline",
    "baseline_name",
    type=click.Choice(BASELINE_NAMES),
    help="Print what pgtune or timescaledb-tune would recommend instead, exactly.",
)
@click.option(
    "--ram",
    "ram_text",
    metavar="SIZE",
    help="Offline: the machine's RAM (64GB); nothing is read from this host or a server.",
)
@click.option("--cpus", type=click.IntRange(1, 4096), metavar="N", help="Offline: CPUs.")
@click.option(
    "--storage",
    type=click.Choice(STORAGES),
    help="Disk type under the data directory (default: read from the disk).",
)
@click.option(
    "--data-size",
    type=click.Choice(DATA_SIZES),
    help="Data size against RAM, as pgtune's form asks (default: read from the server).",
)
@click.option("--dsn", metavar="CONNINFO", help="Tune an existing server ('' for PG* variables).")
@click.option("--sandbox", is_flag=True, help="Tune pgdyno's sandbox (the default online).")
@click.option(
    "--from",
    "from_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Tune from a snapshot written by `pgdyno doctor --snapshot FILE`, offline, exactly "
    "as on the machine it was taken on.",
)
@click.option(
    "--out",
    "out_text",
    metavar="DIR",
    help="Write the configuration as files to deploy (postgresql.conf include, "
    "ALTER SYSTEM script, sysctl.d, udev rule, tmpfiles.d) into DIR.",
)
@click.option(
    "--apply",
    "do_apply",
    is_flag=True,
    help="Apply it (journalled; `pgdyno rollback` undoes all of it).",
)
@click.option(
    "--layers",
    "layers_text",
    default=",".join(LAYERS),
    show_default=True,
    help="Layers --apply changes.",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Consent to change host settings and to restart the server when needed.",
)
@click.option(
    "--restart-command",
    metavar="CMD",
    help="How to restart an existing server (e.g. 'systemctl restart postgresql').",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="An existing server's data directory on this host (for pg_ctl restart).",
)
@click.option(
    "--no-observability",
    "no_observability",
    is_flag=True,
    help="Leave out the observability settings (logging, track_io_timing): the table, --json, "
    "the files and --apply then hold the performance settings alone.",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Measure: the current configuration vs pgtune's vs pgdyno's (pgdyno compare "
    "with adaptive verdicts), then a verdict per configuration and a report.",
)
@click.option(
    "--ladder", is_flag=True, help="With --verify: also a ladder of pgdyno's layers, one at a time."
)
@click.option(
    "--workload",
    "workloads",
    default="tpcb-like,select-only",
    show_default=True,
    help="With --verify: pgbench workloads, comma-separated.",
)
@click.option(
    "--scale",
    default="small",
    show_default=True,
    help="With --verify: dataset scale (small, medium, large or a number).",
)
@click.option(
    "--clients",
    type=click.IntRange(1, 10000),
    metavar="N",
    help="With --verify: pgbench clients (default: twice the CPUs).",
)
@click.option(
    "--duration",
    type=click.IntRange(5, 86400),
    default=60,
    show_default=True,
    help="With --verify: seconds per run.",
)
@adaptive_options
@json_option
@binaries_options
@workdir_options
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
        workload_names(workloads), scale, clients, duration, precision, budget, ladder
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
        verify=measure if verify else None,
        as_json=as_json,
        observability=not no_observability,
    ).check()
    check_options(_typed(ctx), offline=not request.online, verify=verify)
    if verify:  # before a sandbox is started or a plan written
        check_verify(measure)
    run_tune(env, request)


def run_tune(env: Environment, request: TuneRequest) -> None:
    """Gather (a server, a snapshot file or the options), compute, then print, write, apply or
    verify."""
    plans: list[Path] = []
    with ExitStack() as stack:
        handle: ServerHandle | None = None
        binaries: Binaries | None = None
        if request.online:
            target, handle, binaries = _connect(env, request, stack)
            gathered = gather(env, request.given, target)
        elif request.from_path is not None:
            gathered = from_snapshot(load_snapshot(request.from_path), request.given)
        else:
            gathered = gather(env, request.given, None)
        ours = pgdyno_configuration(gathered, env.cache_dir, binaries, request.groups)
        check_connections(request.given.connections, _workers(ours), _major(ours))
        config = ours
        if request.baseline_name and request.verify is None:
            values, config = baseline(gathered, request.baseline_name)
            if request.as_json and not request.out_dir and not request.apply:
                # The configuration as checked, so the JSON leaves out what the table does.
                print_json(env, baseline_data(request.baseline_name, values, config))
                return
        _write_files(env, request, config)
        if request.apply:
            if handle is None:
                raise UsageError("--apply needs a server: give --sandbox or --dsn (not --ram).")
            _apply(env, request, config, handle, gathered.label)
            return
        if request.verify is not None:
            pgtune = baseline(gathered, "pgtune")[1]
            plans = verify_plans(env, request.verify, ours, pgtune)
        else:
            _show(env, request, config, gathered)
    if request.verify is not None:  # the sandbox is free: the comparison takes the lock
        run_verify(env, plans, as_json=request.as_json)


def _typed(ctx: click.Context) -> set[str]:
    """The options given on the command line (or in the environment), not left at a default."""
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return {name for name in ctx.params if ctx.get_parameter_source(name) in sources}


def _workers(config: Configuration) -> dict[str, int]:
    values = config.pg_values()
    names = ("autovacuum_max_workers", "max_worker_processes")
    return {name: int(values[name]) for name in names if values.get(name, "").isdigit()}


def _major(config: Configuration) -> int | None:
    return config.facts.pg


def _show(env: Environment, request: TuneRequest, config: Configuration, g: Gathered) -> None:
    if request.as_json:
        print_json(env, configuration_data(config, g.label))
        return
    for item in render_configuration(config, g.label):
        out(env).print(item)


def _connect(
    env: Environment, request: TuneRequest, stack: ExitStack
) -> tuple[TuneTarget, ServerHandle, Binaries | None]:
    """The server to tune, its handle, and its binaries when they are the sandbox's."""
    server, consent = request.server, request.yes
    if server.dsn is not None:
        address = server_address(server.dsn)
        handle = server_handle(
            address.dsn, address.password, address.label,
            restart_command=server.restart_command, consent=consent, data_dir=server.data_dir,
            env=env,
        )  # fmt: skip
        return TuneTarget(address.label, address.dsn, address.password), handle, None
    binaries = pick_binaries(env, server.pg_bin, server.pg_version)
    box = stack.enter_context(sandbox_session(env, binaries, err(env).print))
    handle = sandbox_handle(box, consent=consent, owner_pid=box.state().owner_pid)
    return TuneTarget(handle.label, handle.dsn, None), handle, binaries


def _write_files(env: Environment, request: TuneRequest, config: Configuration) -> None:
    if request.out_dir is None:
        return
    files = render_files(config, generated_by=f"pgdyno tune {__version__}")
    written = write_files(request.out_dir, files)
    err(env).print(f"wrote {len(written)} file(s) to {request.out_dir}: "
                   + ", ".join(p.name for p in written))  # fmt: skip


def _apply(
    env: Environment,
    request: TuneRequest,
    config: Configuration,
    handle: ServerHandle,
    label: str,
) -> None:
    touches_host = config.facts.local and any(
        s.layer != "postgresql" for s in config.to_apply(request.layers)
    )
    if touches_host and not request.yes:
        raise UsageError(
            "--apply changes host settings too: add --yes to consent (or --layers postgresql)."
        )
    report = apply_configuration(env, config, handle, layers=request.layers, log=err(env).print)
    if request.as_json:
        print_json(env, {"target": label, **apply_data(report)})
        return
    console = out(env)
    for item in render_apply(report, label):
        console.print(item)
