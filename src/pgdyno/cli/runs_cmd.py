"""`pgdyno runs ...`: what the results database holds."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import click
from rich.text import Text

from pgdyno.cli.common import environment, json_option, out, print_json, workdir_options
from pgdyno.environment import CPU_PROFILE_ENV, Environment
from pgdyno.errors import UsageError
from pgdyno.lab import runs as runs_in
from pgdyno.postgres.settings import shown_settings
from pgdyno.records.interference import Interference
from pgdyno.records.stored import StoredRun
from pgdyno.results.encode import profile_json, to_json
from pgdyno.results.transfer import Copied
from pgdyno.terminal.profile import profile_tables
from pgdyno.terminal.tables import comparison_head, run_detail, runs_table
from pgdyno.terminal.timeline import compact_table, timeline_csv
from pgdyno.terminal.waits import waits_tables
from pgdyno.textsafe import safe_text


@click.group()
def runs() -> None:
    """Runs kept in the results database.

    \b
    Example:
      pgdyno runs list
      pgdyno runs show 3 --json
    """


@runs.command("list")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Show at most this many runs (0: all).",
)
@click.option("--session", type=int, help="Only the runs of this bench session.")
@click.option("--comparison", type=int, metavar="ID", help="Only the runs of this comparison.")
@json_option
@workdir_options
@click.pass_context
def list_runs(
    ctx: click.Context,
    /,
    limit: int,
    session: int | None,
    comparison: int | None,
    as_json: bool,
    **_: object,
) -> None:
    """List runs, newest first; a comparison's runs with the comparison and set they were made
    for.

    \b
    Examples:
      pgdyno runs list --limit 10
      pgdyno runs list --comparison 4
    """
    env = environment(ctx)
    found = runs_in.listed(env, limit or None, session, comparison)
    if as_json:
        print_json(env, [to_json(row) for row in found.rows])
    else:
        if found.comparison is not None:
            out(env).print(comparison_head(found.comparison))
        out(env).print(runs_table(found.rows))
        out(env).print(f"results database: {env.results}")


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
@click.option(
    "--waits",
    is_flag=True,
    help="Show the run's wait-event profile: the events its sessions spent their time in, "
    "with % of database time and average active sessions.",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Show the run's on-CPU profile (bench's --cpu-profile, on by default): the server's "
    "CPU by process type and each type's top functions, as % of the server's CPU samples.",
)
@json_option
@workdir_options
@click.pass_context
def show_run(
    ctx: click.Context,
    /,
    run_id: int,
    timeline: bool,
    as_csv: bool,
    waits: bool,
    profile: bool,
    as_json: bool,
    **_: object,
) -> None:
    """Show one run: summary, health, environment, per-statement latencies, timeline.

    \b
    Examples:
      pgdyno runs show 1
      pgdyno runs show 1 --timeline
      pgdyno runs show 1 --waits
      pgdyno runs show 1 --profile
      pgdyno runs show 1 --csv > run1.csv
    """
    env = environment(ctx)
    run = runs_in.one_run(env, run_id)
    samples = run.samples
    if as_csv:
        env.stdout.write(timeline_csv(run, samples))
        return
    if profile:
        _show_profile(env, run_id, run, as_json)
        return
    if as_json:
        print_json(env, to_json(run))
        return
    console = out(env)
    if timeline:
        console.print(compact_table(run, samples))
        return
    if waits:
        if run.waits is None:
            raise UsageError(_no_wait_profile(run_id, run.status))
        for table in waits_tables(run_id, run.waits):
            console.print(table)
        return
    tables = run_detail(replace(run, settings=shown_settings(run.settings)))  # as SHOW has them
    found = run.interference
    if found is not None:  # the figures behind the run's "interference:" warning
        tables[0].add_row("interference", Text(safe_text(interference_row(found))))
    for table in tables:
        console.print(table)


def _show_profile(env: Environment, run_id: int, run: StoredRun, as_json: bool) -> None:
    if run.profile is None:
        raise UsageError(_no_cpu_profile(run_id, run.status))
    if as_json:
        print_json(env, {"id": run_id, "profile": profile_json(run.profile)})
        return
    console = out(env)
    for table in profile_tables(run_id, run.profile):
        console.print(table)


def _no_cpu_profile(run_id: int, status: str) -> str:
    """Why a run has no CPU profile.

    >>> _no_cpu_profile(7, "ok")[:61]
    'run 7 has no CPU profile: it ran with --no-cpu-profile (or in'
    """
    return _missing(run_id, status, "CPU profile") or (
        f"run {run_id} has no CPU profile: it ran with --no-cpu-profile (or in an environment "
        f"with {CPU_PROFILE_ENV}=off), or perf could not sample the server (the bench's log said "
        "why); bench again with --cpu-profile."
    )


def _no_wait_profile(run_id: int, status: str) -> str:
    """Why a run has no wait profile: a run that did not end well has none to show.

    >>> _no_wait_profile(7, "interrupted")[:62]
    'run 7 has no wait profile because it was interrupted before on'
    """
    return _missing(run_id, status, "wait profile") or (
        f"run {run_id} has no wait profile: it ran with --wait-sample-hz 0, without PostgreSQL "
        "statistics, or before pgdyno sampled wait events; bench again."
    )


def _missing(run_id: int, status: str, what: str) -> str:
    """Why a run that did not end well has no `what` ("" for one that did)."""
    ended = {"failed": "failed", "interrupted": "was interrupted"}.get(status)
    if ended is None:
        return ""
    return (
        f"run {run_id} has no {what} because it {ended} before one was kept: "
        f"`pgdyno runs show {run_id}` says why."
    )


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


@runs.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID|FROM-TO]...")
@click.option("--session", type=int, metavar="ID", help="Every run of this bench session.")
@click.option("--comparison", type=int, metavar="ID", help="Every run of this comparison.")
@json_option
@workdir_options
@click.pass_context
def export_runs_cmd(
    ctx: click.Context,
    /,
    file: Path,
    run_ids: tuple[str, ...],
    session: int | None,
    comparison: int | None,
    as_json: bool,
    **_: object,
) -> None:
    """Write runs to one portable file (all runs unless a selection is given).

    The file holds the runs with their timelines, statements, samples, events, settings,
    sessions (host identity included) and comparisons; `pgdyno runs import FILE` merges it
    into any results store, and `--results FILE` reads it as it is.

    \b
    Examples:
      pgdyno runs export host1.pgdyno
      pgdyno runs export cmp4.pgdyno --comparison 4
      pgdyno runs export some.pgdyno 3 5-9
    """
    env = environment(ctx)
    copied = runs_in.export(env, file, run_ids, session, comparison)
    _print_copied(env, as_json, copied, f"exported to {safe_text(file)}")


@runs.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@workdir_options
@click.pass_context
def import_runs_cmd(ctx: click.Context, /, file: Path, as_json: bool, **_: object) -> None:
    """Merge an export's runs into the results store; runs it holds already are skipped.

    Ids are given anew in this store (the export's run 3 may become run 41); importing the
    same file again adds nothing. A damaged or foreign file is refused and nothing is added.

    \b
    Example:
      pgdyno runs import host1.pgdyno --results postgresql://pgdyno@results/pgdyno
    """
    env = environment(ctx)
    copied = runs_in.import_(env, file)
    _print_copied(env, as_json, copied, f"imported into {env.results}")


def _print_copied(env: Environment, as_json: bool, copied: Copied, where: str) -> None:
    if as_json:
        print_json(env, asdict(copied))
        return
    out(env).print(
        f"{copied.runs} runs {where} ({copied.sessions} sessions, {copied.comparisons} "
        f"comparisons added; {copied.already} runs were there already)"
    )
