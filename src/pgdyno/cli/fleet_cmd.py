"""`pgdyno fleet`: one plan on several hosts at once over SSH, and the state of such a run."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from pgdyno.cli.common import environment, err, json_option, out, print_json, workdir_options
from pgdyno.environment import Environment
from pgdyno.errors import PgdynoError
from pgdyno.fleet.run import fleet_run as run_on_hosts
from pgdyno.fleet.status import FleetState, latest_state


@click.group()
def fleet() -> None:
    """Fleet runs: one plan on several hosts at once, over SSH (see docs/fleet.md).

    \b
    Example:
      pgdyno fleet run examples/aa.toml --hosts hosts.toml --results postgresql://results/pgdyno
      pgdyno fleet status
    """


@fleet.command("run")
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--hosts",
    "hosts_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The hosts: [[host]] tables with name, ssh and dsn (docs/fleet.md).",
)
@json_option
@workdir_options
@click.pass_context
def fleet_run(
    ctx: click.Context, /, plan_file: Path, hosts_file: Path, as_json: bool, **_: object
) -> None:
    """Run a plan on every host of the hosts file at once, each on its own server.

    Each host runs `pgdyno compare PLAN --ssh HOST --dsn DSN` driven from here: its agent, its
    OS timeline, pgbench beside its server, its settings journalled and restored (PostgreSQL
    settings that need no restart; host settings are not changed over SSH). Progress is shown
    per host; a host that fails does not stop the others and is named at the end. All runs land
    in the results store (--results: a PostgreSQL store takes them directly; a SQLite file
    gets each host's runs imported as the host ends). Ctrl-C stops every host, each restoring
    its server.

    \b
    Example:
      pgdyno fleet run examples/aa.toml --hosts hosts.toml
    """
    env = environment(ctx)
    log = err(env).print
    outcome = run_on_hosts(env, plan_file, hosts_file, lambda line: log(line, markup=False))
    _show(env, outcome.state, as_json)
    problem = outcome.unfinished(env.results)
    if problem is not None:
        raise PgdynoError(problem)
    log(f"results: {env.results}; the hosts' own logs: {outcome.directory}")


@fleet.command("status")
@json_option
@workdir_options
@click.pass_context
def fleet_status(ctx: click.Context, /, as_json: bool, **_: object) -> None:
    """The state of each host in the latest fleet run of this work directory.

    \b
    Example:
      pgdyno fleet status
    """
    env = environment(ctx)
    _show(env, latest_state(env.data_dir), as_json)


def _show(env: Environment, state: FleetState, as_json: bool) -> None:
    gone = state.controller_gone
    if as_json:
        data = {"plan": state.plan, "started_at": state.started_at,
                "finished_at": state.finished_at, "controller_gone": gone,
                "results": state.results,
                "hosts": [vars(h) for h in state.hosts]}  # fmt: skip
        print_json(env, data)
        return
    title = f"fleet {Path(state.plan).name}, started {state.started_at}"
    if state.finished_at:
        title += f", finished {state.finished_at}"
    elif gone:
        title += " (its controller ended without finishing: states as it left them)"
    table = Table(title=title, title_justify="left")
    for column in ("host", "ssh", "state", "runs", "last message"):
        table.add_column(column)
    for h in state.hosts:
        runs = f"{h.runs_done}/{h.runs_planned}" if h.runs_planned else "-"
        table.add_row(h.name, h.ssh, h.state, runs, h.message)
    out(env).print(table)
