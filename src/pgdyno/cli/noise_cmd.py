"""`pgdyno noise`: an A/A calibration of this host on the sandbox (what it can resolve)."""

from __future__ import annotations

from pathlib import Path

import click

from pgdyno.cli.common import (
    binaries_options,
    environment,
    err,
    out,
    pick_binaries,
    print_json,
    workdir_options,
)
from pgdyno.cli.progress import MatrixProgress
from pgdyno.errors import PgbenchFailed, UsageError
from pgdyno.experiment.matrix import BenchSpec, make_spec, parse_scales, parse_workloads
from pgdyno.experiment.noise import NoiseOutcome
from pgdyno.experiment.rounds import parse_budget
from pgdyno.host.machine import read_host
from pgdyno.lab.noise import NoiseRequest
from pgdyno.lab.noise import noise as run_noise
from pgdyno.pgbench.command import BUILTINS
from pgdyno.stats.noise import PLAN_COMPARISONS
from pgdyno.terminal.noise import noise_screen


@click.command()
@click.option(
    "--budget",
    default="3m",
    show_default=True,
    metavar="TIME",
    help="Machine time for the runs, like 90s, 3m or 1h (the dataset is prepared first, "
    "outside it); at least 6 runs are made however small it is.",
)
@click.option(
    "-w",
    "--workload",
    default="select-only",
    show_default=True,
    type=click.Choice(BUILTINS),
    help="The built-in workload every run uses.",
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
    help="pgbench clients [default: the CPU count].",
)
@click.option(
    "-T",
    "--seconds",
    "duration",
    type=click.IntRange(min=1, max=3600),
    default=5,
    show_default=True,
    help="Seconds each run lasts (the figures hold for runs of this length).",
)
@click.option(
    "--comparisons",
    type=click.IntRange(min=1, max=10000),
    default=PLAN_COMPARISONS,
    show_default=True,
    help="Comparisons of the plan the forecasts are for, which share its 5% error: a plan of "
    "S sets and C cells makes 2(S-1)C, a ladder 3(S-1)C (a compare prints it under its "
    "verdicts).",
)
@click.option("--json", "as_json", is_flag=True, help="Print every figure and the run ids as JSON.")
@binaries_options
@workdir_options
@click.pass_context
def noise(
    ctx: click.Context,
    /,
    budget: str,
    workload: str,
    scale: str,
    clients: int | None,
    duration: int,
    comparisons: int,
    as_json: bool,
    pg_bin: Path | None,
    pg_version: int | None,
    **_: object,
) -> None:
    """Measure what differences this host can tell from noise (an A/A calibration).

    Runs the same pgbench cell on the sandbox back to back until the budget is spent, stores
    the runs as a bench session, and reports on one screen the run-to-run CV, the spread of
    paired runs, the drift per minute (Theil-Sen slope), the runs other processes disturbed,
    and the machine time `compare --precision/--budget` needs here to resolve a change of 10%,
    5% and 2%, each with its 90% prediction interval (a simulation of that compare at its
    share of the plan's error, from this calibration's own paired differences). The sandbox
    only: an existing server's host is not this one.

    \b
    Examples:
      pgdyno noise
      pgdyno noise --budget 10m -w tpcb-like -c 4 -T 15
      pgdyno noise --budget 40s -T 2 --json
    """
    env = environment(ctx)
    budget_s = parse_budget(budget)
    host = read_host(env.proc_root, env.sys_root)
    spec = _spec(workload, scale, clients or host.cpu_count, duration)
    binaries = pick_binaries(env, pg_bin, pg_version)
    outcome = run_noise(
        env, NoiseRequest(spec, budget_s, binaries, comparisons), log=err(env).print,
        progress=lambda: MatrixProgress(err(env)),
    )  # fmt: skip
    cell = f"{workload}, scale {outcome.scale}, {spec.clients[0]} clients, {duration} s runs"
    if as_json:
        print_json(env, {**_as_json(outcome, workload, spec, budget_s), "comparisons": comparisons})
    else:
        console = out(env)
        console.print(noise_screen(outcome.report, cell))
        console.print(f"results database: {env.results} (session {outcome.session_id})")
    if outcome.failed:
        raise PgbenchFailed(
            f"{len(outcome.failed)} of {len(outcome.records)} runs failed (runs "
            f"{', '.join(map(str, outcome.failed))}); see `pgdyno runs show ID` for pgbench's "
            "error output."
        )


def _spec(workload: str, scale: str, clients: int, duration: int) -> BenchSpec:
    scales = parse_scales(scale)
    if len(scales) != 1:
        raise UsageError(f"-s/--scale {scale!r} names {len(scales)} scales: noise runs one.")
    return make_spec(
        workloads=parse_workloads(workload, []), scales=scales, clients=[clients],
        duration_s=duration,
    )  # fmt: skip


def _as_json(
    outcome: NoiseOutcome, workload: str, spec: BenchSpec, budget_s: float
) -> dict[str, object]:
    return {
        "session_id": outcome.session_id,
        "run_ids": [run_id for run_id, _ in outcome.records],
        "failed_run_ids": outcome.failed,
        "workload": workload,
        "scale": outcome.scale,
        "clients": spec.clients[0],
        "jobs": outcome.records[0][1].cell.jobs,
        "duration_s": spec.duration_s,
        "budget_s": budget_s,
        "wall_seconds": [round(s, 2) for s in outcome.wall_seconds],
        **outcome.report.as_dict(),
    }
