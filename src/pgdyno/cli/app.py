"""The `pgdyno` command group. Commands only translate options, call the library, render."""

from __future__ import annotations

import click

from pgdyno import __version__
from pgdyno.cli.bench_cmd import bench
from pgdyno.cli.compare_cmd import compare
from pgdyno.cli.datasets_cmd import datasets
from pgdyno.cli.doctor_cmd import doctor
from pgdyno.cli.fleet_cmd import fleet
from pgdyno.cli.noise_cmd import noise
from pgdyno.cli.pg_cmd import pg
from pgdyno.cli.plan_cmd import plan
from pgdyno.cli.report_cmd import report
from pgdyno.cli.rollback_cmd import rollback
from pgdyno.cli.runs_cmd import runs
from pgdyno.cli.sandbox_cmd import sandbox
from pgdyno.cli.tune_cmd import tune

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="pgdyno")
@click.option(
    "--traceback",
    is_flag=True,
    help="On an error, also print the Python traceback (for bug reports); also accepted after "
    "the command.",
)
def cli(traceback: bool) -> None:
    """pgdyno: a performance lab for PostgreSQL on Linux.

    Runs pgbench matrices on a sandbox PostgreSQL it manages (or on an existing server) and keeps
    every run, with its per-second series, in a results database.

    \b
    Example:
      pgdyno bench --workload select-only -c 1,2 -T 10
      pgdyno runs list
    """
    # main() reads --traceback from the raw arguments: it must work before parsing finishes.
    del traceback


cli.add_command(bench)
cli.add_command(sandbox)
cli.add_command(runs)
cli.add_command(pg)
cli.add_command(compare)
cli.add_command(plan)
cli.add_command(rollback)
cli.add_command(report)
cli.add_command(doctor)
cli.add_command(noise)
cli.add_command(tune)
cli.add_command(datasets)
cli.add_command(fleet)
