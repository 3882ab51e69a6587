"""`pgdyno bench`: run a pgbench matrix and store every run."""

from __future__ import annotations

from pathlib import Path

import click

from pgdyno.cli.common import (
    POSITIVE,
    SSH_NEEDS_DSN,
    adaptive_options,
    binaries_options,
    dsn_with_its_password,
    environment,
    err,
    foreign_cpu_option,
    out,
    pick_binaries,
    print_json,
    ssh_option,
    workdir_options,
)
from pgdyno.cli.progress import MatrixProgress
from pgdyno.collect.waits import DEFAULT_HZ
from pgdyno.errors import PgbenchFailed, UsageError
from pgdyno.experiment.matrix import make_spec, parse_scales, parse_workloads, with_adaptive
from pgdyno.experiment.rounds import DEFAULT_PRECISION_PCT
from pgdyno.experiment.target import (
    check_target_settings,
)
from pgdyno.lab.bench import BenchRequest
from pgdyno.lab.bench import bench as run_bench
from pgdyno.pgbench.command import PROTOCOLS, parse_int_list, with_tpcc_options
from pgdyno.postgres.conf import parse_assignments
from pgdyno.postgres.footprint import (
    Leftover,
    leftovers_line,
)
from pgdyno.records.tpcc import TpccOptions
from pgdyno.remote.host import DRIVERS
from pgdyno.results.encode import to_json
from pgdyno.terminal.tables import results_table
from pgdyno.terminal.verdict_tables import rounds_summary


@click.command()
@click.option(
    "-w",
    "--workload",
    metavar="LIST",
    help="Built-in workloads to sweep: tpcb-like, select-only, simple-update "
    "(comma list, NAME@WEIGHT allowed; default tpcb-like), or tpcc (TPC-C-like: scale = "
    "warehouses; alone).",
)
@click.option(
    "--tpcc-all-warehouses",
    is_flag=True,
    help="tpcc: each transaction picks its warehouse among all (pushes I/O) instead of a fixed "
    "home warehouse per client.",
)
@click.option(
    "--tpcc-keying",
    is_flag=True,
    help="tpcc: the specification's keying and think times (then at most 12.86 NOPM per "
    "warehouse).",
)
@click.option(
    "-f",
    "--script",
    "scripts",
    multiple=True,
    metavar="FILE[@W]",
    help="A custom pgbench script with an optional weight (repeatable; all scripts and "
    "any --workload built-ins form one weighted mix).",
)
@click.option(
    "-s",
    "--scale",
    default="small",
    show_default=True,
    metavar="LIST",
    help="Dataset size: small (fits in shared_buffers), medium (~50% of RAM), large "
    "(~200% of RAM) or a pgbench scale; comma list to sweep.",
)
@click.option(
    "-c",
    "--clients",
    default="1",
    show_default=True,
    metavar="LIST",
    help="Client counts; a comma list is a sweep, e.g. 1,2,4,8.",
)
@click.option(
    "-j",
    "--jobs",
    default="auto",
    show_default=True,
    metavar="POLICY",
    help="pgbench threads: auto (clients capped at CPUs), clients (jobs = clients, as "
    "in Vondra's benchmarks) or a number (pgbench needs jobs <= clients: a number above the "
    "largest -c is refused; smaller client counts run with jobs = clients).",
)
@click.option(
    "-T",
    "--time",
    "duration",
    type=int,
    default=60,
    show_default=True,
    help="Seconds each run lasts.",
)
@click.option(
    "-M",
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default="simple",
    show_default=True,
    help="Query protocol.",
)
@click.option("-R", "--rate", type=POSITIVE, help="Target transactions per second (total).")
@click.option(
    "-L",
    "--latency-limit",
    type=POSITIVE,
    metavar="MS",
    help="Count transactions slower than this (ms) as late; with -R, skip them.",
)
@click.option(
    "--repeats",
    default="1",
    show_default=True,
    metavar="N|auto",
    help="Runs per cell, or auto: rounds of every cell until each cell's mean TPS is known "
    "to --precision (always-valid interval) or --budget is spent.",
)
@adaptive_options
@foreign_cpu_option
@click.option(
    "--per-statement",
    is_flag=True,
    help="Also record pgbench's per-statement latencies (-r). Off by default: with the "
    "latency log it costs a few % of TPS at high rates.",
)
@click.option(
    "--pgbench-progress",
    is_flag=True,
    help="Also keep pgbench's own per-second report (-P 1) as the series "
    "pgbench.progress_tps, a cross-check of the timeline (costs a few % of TPS).",
)
@click.option(
    "--wait-sample-hz",
    type=int,
    default=DEFAULT_HZ,
    show_default=True,
    metavar="HZ",
    help="Look at the server's sessions (pg_stat_activity) this many times a second for the "
    "wait-event profile (`runs show ID --waits`); 0 turns it off. With pg_wait_sampling "
    "loaded, created in the database --dsn names and sampling CPU too (sample_cpu), its "
    "profile is read instead.",
)
@click.option(
    "--cpu-profile/--no-cpu-profile",
    default=None,
    help="Sample the server's CPU with perf (cpu-clock, 49 Hz) over each run for the "
    "on-CPU profile (`runs show ID --profile`, the report's flame graphs); on by default "
    "(env PGDYNO_CPU_PROFILE=off turns the default off). Needs perf (Debian: linux-perf) "
    "and a server on this host; without them one line says so and the run goes on.",
)
@click.option(
    "--prewarm",
    is_flag=True,
    help="Read the dataset into shared buffers (pg_prewarm) before each run, so every run "
    "starts warm, also after a restart.",
)
@click.option(
    "--warmup",
    type=int,
    default=0,
    show_default=True,
    metavar="S",
    help="Seconds of unmeasured load before each run.",
)
@click.option(
    "--dsn",
    metavar="CONNSTR",
    help="Benchmark an existing server (libpq connection string or URI) instead of the "
    "sandbox; use '' for the PG* environment variables.",
)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="A PostgreSQL setting for the sandbox during this bench (repeatable).",
)
@click.option(
    "--latency-log",
    default="auto",
    show_default=True,
    metavar="MODE",
    help="Per-transaction latency log behind the percentiles: auto (sampled to about 2,000 "
    "transactions a second, sized from the warm-up, the last similar run or a 3 s probe), "
    "full, or a "
    "sampling rate in (0, 1] such as 0.1.",
)
@click.option(
    "--trim",
    type=int,
    metavar="S",
    help="Seconds at the start of each run left out when judging steady state, less than -T "
    "(default: 10% of -T up to 30 s, or 0 after --warmup).",
)
@click.option(
    "--keep-logs",
    "keep_files",
    is_flag=True,
    help="Keep pgbench's output and transaction logs (deleted once processed).",
)
@ssh_option
@click.option(
    "--driver",
    type=click.Choice(DRIVERS),
    default="auto",
    show_default=True,
    help="With --ssh, where pgbench runs: beside the server on the remote host, or here "
    "through the SSH tunnel; auto takes the remote one when the host has pgbench.",
)
@click.option(
    "--remote-pgbench",
    metavar="PATH",
    help="With --ssh, the pgbench to run on the remote host (default: found on its PATH or in "
    "/usr/lib/postgresql/*/bin, the server's major version first).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@binaries_options
@workdir_options
@click.pass_context
def bench(
    ctx: click.Context,
    /,
    workload: str | None,
    tpcc_all_warehouses: bool,
    tpcc_keying: bool,
    scripts: tuple[str, ...],
    scale: str,
    clients: str,
    jobs: str,
    duration: int,
    protocol: str,
    rate: float | None,
    latency_limit: float | None,
    repeats: str,
    precision: float | None,
    budget: str | None,
    warmup: int,
    prewarm: bool,
    per_statement: bool,
    pgbench_progress: bool,
    wait_sample_hz: int,
    cpu_profile: bool | None,
    foreign_cpu_limit: float | None,
    latency_log: str,
    trim: int | None,
    dsn: str | None,
    assignments: tuple[str, ...],
    keep_files: bool,
    ssh: str | None,
    driver: str,
    remote_pgbench: str | None,
    as_json: bool,
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
    """Run pgbench for every combination of workload, scale and client count.

    The dataset of each scale is generated once and copied before each run, so every run starts
    from the same data. Each finished run is written to the results database at once.

    \b
    Examples:
      pgdyno bench --workload select-only -c 1,2 -T 5
      pgdyno bench -w tpcb-like,select-only -s small,50 -c 1,2,4,8 --repeats 3 --warmup 10
      pgdyno bench -w select-only -c 2 -T 10 --repeats auto --precision 1 --budget 10m
      pgdyno bench -f my.sql@3 -w select-only@1 -T 30
      pgdyno bench -w tpcc -s 2 -c 2 -T 20
      pgdyno bench --dsn "host=db1 user=bench dbname=postgres" -c 8 -T 120
      pgdyno bench --ssh bench@db1 --dsn "host=/var/run/postgresql dbname=postgres" -c 8
    """
    env = environment(ctx)
    dsn = dsn_with_its_password(env, dsn)
    settings = parse_assignments(assignments)
    check_target_settings(dsn, settings)
    spec = make_spec(
        workloads=with_tpcc_options(
            parse_workloads(workload, scripts),
            TpccOptions(all_warehouses=tpcc_all_warehouses, keying_thinking=tpcc_keying),
        ),
        scales=parse_scales(scale),
        clients=parse_int_list(clients, "-c/--clients"),
        jobs=jobs,
        duration_s=duration,
        protocol=protocol,
        rate=rate,
        latency_limit_ms=latency_limit,
        repeats=1 if repeats == "auto" else parse_repeats(repeats, precision, budget),
        warmup_s=warmup,
        prewarm=prewarm,
        per_statement=per_statement,
        progress=pgbench_progress,
        wait_sample_hz=wait_sample_hz,
        cpu_profile=cpu_profile,
        **({} if foreign_cpu_limit is None else {"foreign_cpu_limit_pct": foreign_cpu_limit}),
        trim_s=trim,
        latency_log=latency_log,
    )
    if repeats == "auto":
        spec = with_adaptive(spec, precision, budget)
        if spec.adaptive is None:
            spec = spec.model_copy(update={"precision_pct": DEFAULT_PRECISION_PCT})
    check_remote_options(ssh, dsn, driver, remote_pgbench)
    request = BenchRequest(
        spec, pick_binaries(env, pg_bin, pg_version), dsn=dsn, settings=settings,
        keep_files=keep_files, ssh=ssh, driver=driver, remote_pgbench=remote_pgbench,
        stored=as_json,
    )  # fmt: skip
    log = err(env).print
    done = run_bench(env, request, log=log, progress=lambda: MatrixProgress(err(env)))
    outcome, left = done.outcome, done.left
    if outcome.rounds is not None:
        log(rounds_summary(outcome.rounds.history()))
    if as_json:
        print_json(env, [None if run is None else with_left(to_json(run), left)
                         for run in done.stored])  # fmt: skip
        return
    console = out(env)
    console.print(results_table(outcome.records))  # each dataset was said once, when ready
    if line := leftovers_line(left or [], done.target):
        console.print(line)
    console.print(f"results database: {env.results} (session {outcome.session_id})")
    failed = [str(run_id) for run_id, r in outcome.records if r.status != "ok"]
    if failed:
        raise PgbenchFailed(
            f"{len(failed)} of {len(outcome.records)} runs failed (runs {', '.join(failed)}); "
            "see `pgdyno runs show ID` for pgbench's error output."
        )


def check_remote_options(
    ssh: str | None, dsn: str | None, driver: str, remote_pgbench: str | None
) -> None:
    if ssh is None and (driver != "auto" or remote_pgbench is not None):
        raise UsageError("--driver and --remote-pgbench go with --ssh (a server on another host).")
    if ssh is not None and dsn is None:
        raise UsageError(SSH_NEEDS_DSN)


def with_left(run: dict[str, object], left: list[Leftover] | None) -> dict[str, object]:
    """A run of `bench --json` with what the bench left on the server (the same on every run
    of the invocation; null when it could not be read)."""
    run["created"] = None if left is None else [i.as_json() for i in left if i.created]
    run["reused"] = None if left is None else [i.as_json() for i in left if not i.created]
    return run


def parse_repeats(text: str, precision: float | None, budget: str | None) -> int:
    """--repeats N; --precision and --budget only go with --repeats auto."""
    if precision is not None or budget is not None:
        raise UsageError("--precision and --budget set adaptive rounds: add --repeats auto.")
    try:
        return int(text)
    except ValueError:
        raise UsageError(
            f"--repeats {text!r} is not valid: give a number of runs per cell or auto."
        ) from None
