"""`pgdyno tune`: compute a configuration for every layer, write it, apply it, verify it."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from pgdyno import __version__
from pgdyno.changes.handles import ServerHandle, sandbox_handle, server_handle
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
from pgdyno.cli.tune_verify import run_verify, verify_plans
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import sandbox_session, server_address
from pgdyno.postgres.setting_values import read_number, unit_size
from pgdyno.render.tune import (
    apply_data,
    baseline_data,
    configuration_data,
    render_apply,
    render_configuration,
)
from pgdyno.tune.apply import apply_configuration
from pgdyno.tune.facts import DATA_SIZES, PROFILES, STORAGES, Given
from pgdyno.tune.files import render_files
from pgdyno.tune.model import LAYERS, Configuration, Layer
from pgdyno.tune.out_dir import write_files
from pgdyno.tune.session import Target, baseline, gather, pgdyno_configuration

BASELINE_NAMES = ("pgtune", "timescaledb-tune")


def parse_ram(text: str) -> int:
    """--ram: a size with a unit as PostgreSQL writes it (64GB, 512MB, 1TB), in bytes.

    >>> parse_ram("64GB"), parse_ram("512MB")
    (68719476736, 536870912)
    """
    read = read_number(text.strip(), integer=False)
    if read is None or not read[1] or read[1] not in ("kB", "MB", "GB", "TB"):
        raise UsageError(f"--ram {text!r} is not a size: give it with a unit, e.g. 64GB or 512MB.")
    number, unit = read
    if number <= 0:
        raise UsageError(f"--ram {text!r} must be more than zero.")
    return int(number * unit_size(unit))


def parse_layers(text: str) -> tuple[Layer, ...]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in LAYERS]
    if unknown or not names:
        raise UsageError(
            f"--layers {text!r}: each layer is one of {', '.join(LAYERS)} (comma-separated)."
        )
    return tuple(name for name in LAYERS if name in names)


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
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
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
def tune(ctx: click.Context, /, **options: object) -> None:
    """Compute a configuration for every layer, with the reason for each value.

    PostgreSQL settings (memory within a worst-case budget, WAL and checkpoints, planner and
    I/O costs by disk type, parallelism, autovacuum), host settings (dirty-page writeback,
    swappiness, huge pages, THP, NUMA, scheduler) and the block devices under the data and WAL
    directories, from the facts the doctor reads (or those given offline with --ram) and a
    profile. Values come from data/tune.toml and name the doctor rules and published
    benchmarks behind them; each PostgreSQL value is checked against the target's pg_settings.

    \b
    Examples:
      pgdyno tune --sandbox --profile oltp
      pgdyno tune --baseline pgtune --pg-version 16 --profile oltp --ram 64GB --cpus 16 \\
          --connections 500 --storage nvme --data-size greater_ram --json
      pgdyno tune --sandbox --out tuned/
      pgdyno tune --sandbox --apply --yes      # then: pgdyno rollback
    """
    env = environment(ctx)
    o = _Options(options)
    given = o.given()
    with ExitStack() as stack:
        target, handle = _connect(env, o, stack) if not given.offline else (None, None)
        gathered = gather(env, given, target)
        label = target.label if target else "the machine described on the command line"
        ours = pgdyno_configuration(gathered)
        if o.baseline_name and not o.verify:
            values, config = baseline(gathered, o.baseline_name)
            if o.as_json and not o.out_dir and not o.do_apply:
                print_json(env, baseline_data(o.baseline_name, values, config if target else None))
                return
        else:
            config = ours
        _write_files(env, o, config)
        if o.do_apply:
            if handle is None:
                raise UsageError("--apply needs a server: give --sandbox or --dsn (not --ram).")
            _apply(env, o, config, handle, label)
            return
        if o.verify:
            if target is None:
                raise UsageError("--verify measures a server: give --sandbox (not --ram).")
            plans = verify_plans(env, o.raw, ours, baseline(gathered, "pgtune")[1])
        elif o.as_json:
            print_json(env, configuration_data(config, label))
        else:
            for item in render_configuration(config, label):
                out(env).print(item)
    if o.verify:  # the sandbox is free again: the comparison takes the work directory's lock
        run_verify(env, plans, as_json=o.as_json)


class _Options:
    def __init__(self, options: dict[str, object]) -> None:
        self.raw = options
        self.profile = str(options["profile"])
        baseline_name = options.get("baseline_name")
        self.baseline_name = str(baseline_name) if baseline_name else None
        self.as_json = bool(options.get("as_json"))
        self.out_dir = options.get("out_dir")
        self.do_apply = bool(options.get("do_apply"))
        self.yes = bool(options.get("yes"))
        self.dsn = options.get("dsn")
        self.sandbox = bool(options.get("sandbox"))
        self.layers = parse_layers(str(options["layers_text"]))
        ram = options.get("ram_text")
        self.ram = parse_ram(str(ram)) if ram is not None else None
        if self.ram is not None and (self.dsn is not None or self.sandbox):
            raise UsageError("--ram tunes offline: leave out --dsn and --sandbox, or --ram.")
        if self.dsn is not None and self.sandbox:
            raise UsageError("give --dsn or --sandbox, not both.")
        self.verify = bool(options.get("verify"))
        if self.verify and (self.do_apply or self.dsn is not None):
            raise UsageError("--verify runs on the sandbox, without --apply or --dsn.")

    def given(self) -> Given:
        o = self.raw
        return Given(
            profile=self.profile,  # type: ignore[arg-type]
            ram_bytes=self.ram,
            cpus=o.get("cpus"),  # type: ignore[arg-type]
            connections=o.get("connections"),  # type: ignore[arg-type]
            pg_version=o.get("pg_version"),  # type: ignore[arg-type]
            storage=o.get("storage"),  # type: ignore[arg-type]
            data_size=o.get("data_size"),  # type: ignore[arg-type]
        )


def _connect(env: Environment, o: _Options, stack: ExitStack) -> tuple[Target, ServerHandle]:
    consent = o.yes
    if o.dsn is not None:
        address = server_address(str(o.dsn))
        data_dir = o.raw.get("data_dir")
        assert data_dir is None or isinstance(data_dir, Path)
        handle = server_handle(
            address.dsn, address.password, address.label,
            restart_command=o.raw.get("restart_command"),  # type: ignore[arg-type]
            consent=consent, data_dir=data_dir, env=env,
        )  # fmt: skip
        return Target(address.label, address.dsn, address.password), handle
    pg_bin, pg_version = o.raw.get("pg_bin"), o.raw.get("pg_version")
    assert pg_bin is None or isinstance(pg_bin, Path)
    assert pg_version is None or isinstance(pg_version, int)
    binaries = pick_binaries(env, pg_bin, pg_version)
    box = stack.enter_context(sandbox_session(env, binaries, err(env).print))
    handle = sandbox_handle(box, consent=consent, owner_pid=box.state().owner_pid)
    return Target(handle.label, handle.dsn, None), handle


def _write_files(env: Environment, o: _Options, config: Configuration) -> None:
    if o.out_dir is None:
        return
    files = render_files(config, generated_by=f"pgdyno tune {__version__}")
    written = write_files(Path(str(o.out_dir)), files)
    err(env).print(f"wrote {len(written)} file(s) to {o.out_dir}: "
                   + ", ".join(p.name for p in written))  # fmt: skip


def _apply(
    env: Environment, o: _Options, config: Configuration, handle: ServerHandle, label: str
) -> None:
    touches_host = bool(config.facts.get("local")) and any(
        s.layer != "postgresql" for s in config.to_apply(o.layers)
    )
    if touches_host and not o.yes:
        raise UsageError(
            "--apply changes host settings too: add --yes to consent (or --layers postgresql)."
        )
    report = apply_configuration(env, config, handle, layers=o.layers, log=err(env).print)
    if o.as_json:
        print_json(env, {"target": label, **apply_data(report)})
        return
    console = out(env)
    for item in render_apply(report, label):
        console.print(item)
