"""`pgdyno compare`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pgdyno.cli.common import (
    PLAN,
    SSH_NEEDS_DSN,
    adaptive_options,
    allow_options,
    dsn_with_its_password,
    environment,
    err,
    foreign_cpu_option,
    json_option,
    out,
    print_json,
    ssh_option,
    workdir_options,
)
from pgdyno.cli.progress import MatrixProgress
from pgdyno.environment import Environment
from pgdyno.errors import PgbenchFailed, UsageError
from pgdyno.experiment.compare import cell_count, unresolved_failures
from pgdyno.experiment.server_sets import ServerOptions
from pgdyno.experiment.storage_sets import describe_storage
from pgdyno.experiment.switching import plan_slow_settings
from pgdyno.formatting import burn_in_line
from pgdyno.lab.compare import CompareRequest, Executed, execute_compare
from pgdyno.plan.load import Plan, load_plan
from pgdyno.plan.model import applied_sets
from pgdyno.plan.policy import Allowed
from pgdyno.results.encode import rounds_json, to_json
from pgdyno.stats.analysis import Analysis
from pgdyno.stats.capacity import change_line
from pgdyno.terminal.capacity import sets_lines
from pgdyno.terminal.verdict_tables import (
    carryover_lines,
    design_line,
    ladder_tables,
    rounds_summary,
    switch_costs,
    verdict_table,
)


def server_options[F: Callable[..., Any]](func: F) -> F:
    """An existing server instead of the sandbox, and the consent to restart it."""
    for option in reversed([
        click.option("--dsn", metavar="CONNINFO", help="Run the plan on an existing server "
                     "instead of the sandbox ('' for the PG* variables): each set's settings "
                     "through ALTER SYSTEM, undone after it."),
        click.option("--yes", is_flag=True, help="With --dsn: consent to restart the server "
                     "when a set changes a setting that needs it."),
        click.option("--restart-command", metavar="CMD", help="With --dsn: how to restart the "
                     "server (e.g. 'systemctl restart postgresql')."),
        click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="With --dsn: the server's data directory on this host (restarts "
                     "with pg_ctl; allows host settings)."),
    ]):  # fmt: skip
        func = option(func)
    return func


def _server_options(
    env: Environment, dsn: str | None, yes: bool, restart_command: str | None,
    data_dir: Path | None,
) -> ServerOptions | None:  # fmt: skip
    if dsn is None:
        if yes or restart_command or data_dir:
            raise UsageError(
                "--yes, --restart-command and --data-dir go with --dsn: the sandbox needs none."
            )
        return None
    return ServerOptions(dsn_with_its_password(env, dsn), yes, restart_command, data_dir)


@click.command()
@PLAN
@click.option("--resume", is_flag=True, help="Continue the last run of this same plan file, "
              "skipping the runs it finished.")  # fmt: skip
@click.option("--keep-files", is_flag=True, help="Keep pgbench's output and logs of each run.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), metavar="N",
              help="Seed of the rounds' orders (default: drawn at random, printed and stored); "
              "the same seed replays the same orders.")  # fmt: skip
@server_options
@ssh_option
@adaptive_options
@foreign_cpu_option
@json_option
@allow_options
@workdir_options
@click.pass_context
def compare(
    ctx: click.Context, /, plan_file: Path, resume: bool, keep_files: bool, as_json: bool,
    allow_sysctl: tuple[str, ...], allow_pg: tuple[str, ...], precision: float | None,
    budget: str | None, dsn: str | None, yes: bool, restart_command: str | None,
    data_dir: Path | None, ssh: str | None, foreign_cpu_limit: float | None,
    seed: int | None = None, **_: object,
) -> None:  # fmt: skip
    """Compare configuration sets from a plan file: apply, run, restore, give a verdict.

    Each set's PostgreSQL settings, sysctls and block-device settings are applied in turn
    (host settings as root only, each old value journalled first and restored after the set
    and on any exit; `pgdyno rollback` restores them after a crash). The sets run in rounds,
    each round's order drawn from a carry-over-balanced design (every set runs at every
    position and right after every set equally often; --seed replays the orders), and each set
    is compared with the baseline round by round, on TPS and p99 latency. Every run lands in
    the results database.

    \b
    With --precision or --budget (or precision/budget in the plan's [matrix]) the rounds are
    adaptive: they go on until every TPS comparison is resolved (a verdict, or an interval
    narrower than the precision) or the budget is spent, with always-valid intervals so that
    looking after every round raises no false alarm; the result says why it stopped and, when
    the budget ran out, how much longer would resolve it. When every set changes only
    settings a reload makes current at once (the plan's [matrix] design = "auto", the default,
    or "inside"), adaptive rounds switch the sets inside one pgbench run instead, by periods.
    When a set changes a setting that needs a restart and the servers fit in memory side by
    side ("auto", or "twins"), each set runs on a sandbox of its own started once (twin
    servers), and the idle twins' CPU during each set's runs is reported. `pgdyno plan check`
    says which design runs and why. With capacity_p99 in the plan's [matrix] (like "5ms"),
    every set is then also swept on capacity (pgbench -R at rising rates, the sets' steps
    interleaved, capacity_budget shared) and judged against the baseline beside TPS: "b
    carries +18% [+9, +27] more load than a at p99 <= 5 ms" (docs/capacity.md).

    \b
    With --dsn the sets run on an existing server: each set's PostgreSQL settings are applied
    as `pgdyno tune --apply` does (ALTER SYSTEM, each old entry of postgresql.auto.conf
    journalled first, a reload) and undone before the next set and on any exit (`pgdyno
    rollback` after a crash). A setting that needs a restart is refused before anything runs
    unless --yes comes with --restart-command (or --data-dir, for pg_ctl). Host settings are
    applied only when the server's data directory is on this host; a set cannot change the
    server's PostgreSQL version.

    \b
    A plan may change only the kernel settings that matter for database performance and no
    PostgreSQL setting that runs commands, loads code or names files (the lists are in
    pgdyno's data/host_settings.toml and data/pg_settings_policy.toml); --allow-sysctl and
    --allow-pg-setting allow one more name each.

    \b
    Examples:
      pgdyno plan check examples/aa.toml
      pgdyno compare examples/aa.toml
      pgdyno compare examples/002-shared-buffers.toml --resume
      pgdyno compare examples/aa.toml --seed 1234
      pgdyno compare examples/004-ladder.toml --precision 3 --budget 30m
      pgdyno compare examples/002-shared-buffers.toml --dsn "host=db1 user=postgres" \\
          --yes --restart-command "systemctl restart postgresql"
      pgdyno compare examples/aa.toml --ssh db1 --dsn "host=/var/run/postgresql"
    """
    env = environment(ctx)
    server = _server_options(env, dsn, yes, restart_command, data_dir)
    _check_ssh(ssh, server)
    request = CompareRequest(
        load_plan(plan_file), Allowed.of(allow_sysctl, allow_pg), precision=precision,
        budget=budget, resume=resume, keep_files=keep_files, server=server, ssh=ssh,
        foreign_cpu_limit=foreign_cpu_limit, seed=seed,
    )  # fmt: skip
    done = execute_compare(
        env, request, log=err(env).print, progress=lambda: MatrixProgress(err(env))
    )
    outcome, runs, info, analysis, plan = (
        done.outcome, done.runs, done.info, done.analysis, done.plan
    )  # fmt: skip
    if as_json:
        print_json(
            env,
            {
                "comparison": to_json(info),
                "rounds": rounds_json(outcome.rounds.history()),
                "analysis": analysis.as_dict(),
                "carryover": [fit.as_dict() for fit in done.carryover],
                "runs": [to_json(r) for r in runs],
                "idle_twins": [share.as_dict() for share in outcome.idle],
                "capacity": _capacity_json(done),
                "slow_settings": plan_slow_settings(plan),
            },
        )
    else:
        _print_analysis(env, analysis, plan, outcome.comparison_id)
        sweeps = [(s.set_name, s.session_id, s.result) for s in outcome.sweeps]
        for line in sets_lines(sweeps, done.capacity):
            out(env).print(line)
        history = outcome.rounds.history()
        out(env).print(rounds_summary(history))
        slow = plan_slow_settings(plan)
        if slow is not None:
            out(env).print(slow)
        out(env).print(design_line(history))
        matrix = plan.spec.matrix
        switching = history.design == "switching"
        out(env).print(burn_in_line(matrix.burn_in if switching else matrix.warmup,
                                    switching=switching))  # fmt: skip
        for line in switch_costs(done.carryover):
            out(env).print(line)
        for share in outcome.idle:  # twin servers: the idle ones' work during each set's runs
            out(env).print(share.line())
        for line in carryover_lines(done.carryover, history.design):
            err(env).print(line)
        if outcome.skipped:
            err(env).print(
                f"{outcome.skipped} runs were finished before and not repeated (--resume)"
            )
    failed = unresolved_failures(runs)
    if failed:
        raise PgbenchFailed(
            f"{len(failed)} of {cell_count(runs)} runs failed; see `pgdyno runs show ID` for "
            f"pgbench's error output (runs {', '.join(str(r.id) for r in failed[:10])})."
        )


def _capacity_json(done: Executed) -> dict[str, Any] | None:
    """The sets compared on capacity (`[matrix] capacity_p99`), None without a sweep."""
    sweeps = done.outcome.sweeps
    if not sweeps:
        return None
    return {
        "target_p99_ms": sweeps[0].result.target_p99_ms,
        "sweeps": [{"set": s.set_name, "session_id": s.session_id, "run_ids": list(s.run_ids),
                    **to_json(s.result)} for s in sweeps],
        "changes": [{"line": change_line(c), **to_json(c)} for c in done.capacity],
    }  # fmt: skip


def _check_ssh(ssh: str | None, server: ServerOptions | None) -> None:
    """Over SSH, sets change PostgreSQL settings that need no restart, nothing of the host."""
    if ssh is None:
        return
    if server is None:
        raise UsageError(SSH_NEEDS_DSN)
    if server.consent or server.restart_command or server.data_dir:
        raise UsageError(
            "--yes, --restart-command and --data-dir restart a server on this host; over --ssh "
            "pgdyno restarts nothing: leave out the settings that need a restart."
        )


def _print_analysis(env: Environment, analysis: Analysis, plan: Plan, comparison_id: int) -> None:
    console = out(env)
    sets = applied_sets(plan.spec)
    storage = {s.name: describe_storage(s.storage) for s in sets if s.storage is not None}
    title = f"compare {plan.name} (comparison {comparison_id})"
    console.print(verdict_table(analysis, title, storage or None))
    for table in ladder_tables(analysis):
        console.print(table)
    console.print(f"results database: {env.results} (comparison {comparison_id})")
