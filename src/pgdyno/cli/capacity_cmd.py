"""`pgdyno capacity`: the load a server carries while its p99 stays under a target."""

from __future__ import annotations

from pathlib import Path

import click

from pgdyno.cli.bench_cmd import check_remote_options
from pgdyno.cli.common import (
    binaries_options,
    dsn_with_its_password,
    environment,
    err,
    out,
    pick_binaries,
    print_json,
    ssh_option,
    workdir_options,
)
from pgdyno.cli.progress import MatrixProgress
from pgdyno.environment import Environment
from pgdyno.errors import PgbenchFailed, UsageError
from pgdyno.experiment.capacity import MIN_STEPS, CapacityOutcome, CapacityPlan
from pgdyno.experiment.matrix import (
    BenchSpec,
    make_spec,
    parse_scales,
    parse_workloads,
    seconds_per_run,
)
from pgdyno.experiment.rounds import parse_budget
from pgdyno.experiment.target import check_target_settings
from pgdyno.host.machine import read_host
from pgdyno.lab.bench import BenchRequest
from pgdyno.lab.capacity import CapacityRequest, compare_sweeps
from pgdyno.lab.capacity import capacity as run_capacity
from pgdyno.pgbench.command import BUILTINS, PROTOCOLS
from pgdyno.postgres.conf import parse_assignments
from pgdyno.remote.host import DRIVERS
from pgdyno.results.encode import to_json
from pgdyno.stats.capacity import SweepPolicy, change_line, parse_latency_ms
from pgdyno.terminal.capacity import capacity_screen


@click.command()
@click.option(
    "--p99",
    "p99",
    metavar="LATENCY",
    help="The latency target (needed to sweep): the p99 of a step, from each transaction's "
    "scheduled start, must stay at or under it, like 2ms, 500us or 0.5s.",
)
@click.option(
    "--compare",
    "compare",
    nargs=2,
    type=click.IntRange(min=1),
    metavar="BASELINE CANDIDATE",
    help="Sweep nothing: judge two stored sweeps (their session ids) against each other on "
    "capacity at their p99 target.",
)
@click.option(
    "--budget",
    default="10m",
    show_default=True,
    metavar="TIME",
    help="Machine time for the steps, like 90s, 10m or 1h (the dataset is prepared first, "
    "outside it); it must hold at least two steps.",
)
@click.option(
    "-w",
    "--workload",
    default="select-only",
    show_default=True,
    type=click.Choice(BUILTINS),
    help="The built-in workload every step runs.",
)
@click.option(
    "-s",
    "--scale",
    default="small",
    show_default=True,
    metavar="SCALE",
    help="Dataset size: small, medium, large or a pgbench scale.",
)
@click.option(
    "-c",
    "--clients",
    type=click.IntRange(min=1, max=10000),
    help="pgbench clients serving the schedule [default: twice the CPU count].",
)
@click.option("-j", "--jobs", default="auto", show_default=True, metavar="N",
              help="pgbench threads: auto (one per client up to the CPU count), clients or a "
              "number.")  # fmt: skip
@click.option("-M", "--protocol", type=click.Choice(PROTOCOLS), default="simple",
              show_default=True, help="pgbench query protocol.")  # fmt: skip
@click.option(
    "-T",
    "--step-seconds",
    "duration",
    type=click.IntRange(min=1, max=3600),
    default=10,
    show_default=True,
    help="Seconds each step (one pgbench -R run) lasts.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1, max=20),
    default=5,
    show_default=True,
    help="Runs at each end of the interval: a rate is confirmed under (over) the target when "
    "all of them are; the interval covers the true capacity with >= 1 - 2 x 0.5^N.",
)
@click.option(
    "--precision",
    type=click.FloatRange(min=0.5, max=100),
    default=5.0,
    show_default=True,
    metavar="PCT",
    help="The bisection stops when the bracket is this narrow (in % of its lower rate).",
)
@click.option(
    "--dsn",
    metavar="CONNSTR",
    help="Sweep an existing server (libpq connection string or URI) instead of the sandbox.",
)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="A PostgreSQL setting for the sandbox during the sweep (repeatable).",
)
@click.option(
    "--keep-logs",
    "keep_files",
    is_flag=True,
    help="Keep pgbench's output and transaction logs (deleted once processed).",
)
@ssh_option
@click.option("--driver", type=click.Choice(DRIVERS), default="auto", show_default=True,
              help="With --ssh, where pgbench runs (as for bench).")  # fmt: skip
@click.option("--remote-pgbench", metavar="PATH",
              help="With --ssh, the pgbench to run on the remote host.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the steps, knee and capacity as JSON.")
@binaries_options
@workdir_options
@click.pass_context
def capacity(
    ctx: click.Context,
    /,
    p99: str | None,
    compare: tuple[int, int] | None,
    budget: str,
    workload: str,
    scale: str,
    clients: int | None,
    jobs: str,
    protocol: str,
    duration: int,
    repeats: int,
    precision: float,
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
    """Find the load the server carries while its p99 latency stays under a target.

    An open-loop sweep: pgbench -R at rising arrival rates (a Poisson schedule; latency counts
    from each transaction's scheduled start, so queueing shows) from a quarter of the
    closed-loop rate (the last closed-loop run of this cell, or one made first) until the p99
    goes over the target or the rate is not sustained, then a bisection near the boundary and
    repeats at both ends. Prints every step, the knee of the latency-throughput curve
    (Kneedle) and the capacity: the highest rate confirmed under the target, with the interval
    the true capacity lies in. Every step is stored as a run; a load generator that cannot
    keep up (pgbench's CPU) is said, never reported as the server's limit. --compare judges
    two stored sweeps (say, before and after a --set) on capacity: "B carries +18% [+9, +27]
    more load than A at p99 <= 5 ms". docs/capacity.md explains the method.

    \b
    Examples:
      pgdyno capacity -w select-only -s 10 --p99 2ms --budget 10m
      pgdyno capacity --p99 5ms -w tpcb-like -T 5 --repeats 3 --json
      pgdyno capacity --dsn "host=db1 user=bench dbname=postgres" --p99 10ms --budget 30m
      pgdyno capacity --compare 3 4 --json
    """
    env = environment(ctx)
    if compare is not None:
        _compare(env, compare, as_json)
        return
    if p99 is None:
        raise UsageError("--p99 is missing: give the latency target to sweep for, like --p99 2ms.")
    target_ms = parse_latency_ms(p99)
    budget_s = parse_budget(budget)
    dsn = dsn_with_its_password(env, dsn)
    settings = parse_assignments(assignments)
    check_target_settings(dsn, settings)
    check_remote_options(ssh, dsn, driver, remote_pgbench)
    host = read_host(env.proc_root, env.sys_root)
    spec = _spec(workload, scale, clients or 2 * host.cpu_count, jobs, protocol, duration)
    _check_budget(budget, budget_s, spec)
    plan = CapacityPlan(SweepPolicy(target_ms, duration, precision_pct=precision,
                                    repeats=repeats), budget_s)  # fmt: skip
    request = CapacityRequest(
        BenchRequest(spec, pick_binaries(env, pg_bin, pg_version), dsn=dsn, settings=settings,
                     keep_files=keep_files, ssh=ssh, driver=driver,
                     remote_pgbench=remote_pgbench),
        plan,
    )  # fmt: skip
    done = run_capacity(env, request, log=err(env).print,
                        progress=lambda: MatrixProgress(err(env)))  # fmt: skip
    outcome = done.outcome
    if as_json:
        print_json(env, _as_json(outcome, workload, spec, budget_s))
    else:
        console = out(env)
        console.print(capacity_screen(outcome.result))
        console.print(f"results database: {env.results} (session {outcome.session_id})")
    if outcome.failed and not outcome.result.steps:
        raise PgbenchFailed(
            f"the sweep's runs failed (runs {', '.join(map(str, outcome.failed))}); see "
            "`pgdyno runs show ID` for pgbench's error output."
        )


def _compare(env: Environment, sessions: tuple[int, int], as_json: bool) -> None:
    change = compare_sweeps(env, *sessions)
    if as_json:
        print_json(env, {"line": change_line(change), **to_json(change)})
    else:
        out(env).print(change_line(change))


def _spec(
    workload: str, scale: str, clients: int, jobs: str, protocol: str, duration: int
) -> BenchSpec:
    scales = parse_scales(scale)
    if len(scales) != 1:
        raise UsageError(f"-s/--scale {scale!r} names {len(scales)} scales: capacity sweeps one.")
    return make_spec(
        workloads=parse_workloads(workload, []), scales=scales, clients=[clients], jobs=jobs,
        duration_s=duration, protocol=protocol,
    )  # fmt: skip


def _check_budget(text: str, budget_s: float, spec: BenchSpec) -> None:
    per_step = seconds_per_run(spec)
    if budget_s < MIN_STEPS * per_step:
        raise UsageError(
            f"--budget {text} holds fewer than {MIN_STEPS} steps of about {per_step:.0f} s: "
            f"give at least {MIN_STEPS * per_step:.0f}s or shorter steps (-T)."
        )


def _as_json(
    outcome: CapacityOutcome, workload: str, spec: BenchSpec, budget_s: float
) -> dict[str, object]:
    found = outcome.result
    return {
        "session_id": outcome.session_id,
        "run_ids": [run_id for run_id, _ in outcome.records],
        "failed_run_ids": outcome.failed,
        "workload": workload,
        "scale": outcome.scale,
        "clients": spec.clients[0],
        "step_s": spec.duration_s,
        "budget_s": budget_s,
        **to_json(found),
    }
