"""`pgdyno runs ...`: what the results database holds."""

from __future__ import annotations

import click
from rich.text import Text

from pgdyno.cli.common import environment, json_option, out, print_json, workdir_options
from pgdyno.errors import UsageError
from pgdyno.records.interference import Interference
from pgdyno.render.terminal import run_detail, runs_table
from pgdyno.render.timeline import compact_table, timeline_csv
from pgdyno.store.encode import to_json
from pgdyno.store.interface import ResultsBackend
from pgdyno.store.results import ResultsStore
from pgdyno.textsafe import safe_text


@click.group()
def runs() -> None:
    """Runs kept in the results database.

    \b
    Example:
      pgdyno runs list
      pgdyno runs show 3 --json
    """


def _open(ctx: click.Context) -> ResultsBackend:
    env = environment(ctx)
    if not env.results_path.exists():
        raise UsageError(
            f"there is no results database at {env.results_path} yet: run `pgdyno bench` "
            "first or pass --results FILE."
        )
    return ResultsStore(env.results_path, writing=False)


@runs.command("list")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Show at most this many runs (0: all).",
)
@click.option("--session", type=int, help="Only the runs of this bench session.")
@json_option
@workdir_options
@click.pass_context
def list_runs(
    ctx: click.Context, /, limit: int, session: int | None, as_json: bool, **_: object
) -> None:
    """List runs, newest first.

    \b
    Example:
      pgdyno runs list --limit 10
    """
    env = environment(ctx)
    with _open(ctx) as store:
        rows = store.list_runs(limit or None, session)
    if as_json:
        print_json(env, [to_json(row) for row in rows])
    else:
        out(env).print(runs_table(rows))
        out(env).print(f"results database: {env.results_path}")


@runs.command("show")
@click.argument("run_id", type=int)
@click.option(
    "--timeline",
    is_flag=True,
    help="Show the per-second timeline: TPS, latency percentiles, CPU, disk, memory, "
    "checkpoints, WAL.",
)
@click.option(
    "--csv", "as_csv", is_flag=True, help="Print every per-second series of the run as CSV."
)
@json_option
@workdir_options
@click.pass_context
def show_run(
    ctx: click.Context, /, run_id: int, timeline: bool, as_csv: bool, as_json: bool, **_: object
) -> None:
    """Show one run: summary, health, environment, per-statement latencies, timeline.

    \b
    Examples:
      pgdyno runs show 1
      pgdyno runs show 1 --timeline
      pgdyno runs show 1 --csv > run1.csv
    """
    env = environment(ctx)
    with _open(ctx) as store:
        run = store.get_run(run_id)
        if run is None:
            raise UsageError(f"there is no run {run_id}: see `pgdyno runs list` for the ids.")
    samples = run.samples
    if as_csv:
        env.stdout.write(timeline_csv(run, samples))
        return
    if as_json:
        print_json(env, to_json(run))
        return
    console = out(env)
    if timeline:
        console.print(compact_table(run, samples))
        return
    tables = run_detail(run)
    found = run.interference
    if found is not None:  # the figures behind the run's "interference:" warning
        tables[0].add_row("interference", Text(safe_text(interference_row(found))))
    for table in tables:
        console.print(table)


def interference_row(found: Interference) -> str:
    """
    >>> interference_row(Interference(48.2, 0.0, (("yes", 47.5), ("make", 0.7))))
    'foreign CPU 48.2%, steal 0.0% of the machine; top: yes 47.5%, make 0.7%'
    """
    top = ", ".join(f"{command} {pct:.1f}%" for command, pct in found.top) or "-"
    return (
        f"foreign CPU {found.foreign_cpu_pct:.1f}%, steal {found.steal_pct:.1f}% of the "
        f"machine; top: {top}"
    )
