"""`pgdyno report`: one self-contained HTML file, plus the same content as tables, JSON, CSV."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from pgdyno.cli.common import environment, out, workdir_options
from pgdyno.errors import UsageError
from pgdyno.report.export import report_on, summary_csv, write_page
from pgdyno.report.load import Selection, parse_run_ids
from pgdyno.report.selection import GROUP_BY
from pgdyno.report.summary_table import summary_table
from pgdyno.textsafe import safe_text, strict_json


def _selection(
    run_ids: tuple[str, ...],
    comparison: int | None,
    session: int | None,
    last: bool,
    everything: bool,
) -> Selection:
    chosen = sum([bool(run_ids), comparison is not None, session is not None, last, everything])
    if chosen != 1:
        raise UsageError(
            "say what to report on, once: run ids (e.g. `pgdyno report 3 5-9`), "
            "--comparison ID, --session ID, --last or --all."
        )
    if run_ids:
        return Selection(run_ids=parse_run_ids(run_ids))
    return Selection(comparison_id=comparison, session_id=session, last=last, all_runs=everything)


@click.command()
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID|FROM-TO]...")
@click.option("--comparison", type=int, metavar="ID", help="Every run of this comparison.")
@click.option("--session", type=int, metavar="ID", help="Every run of this bench session.")
@click.option("--last", is_flag=True, help="The newest comparison or bench session.")
@click.option("--all", "everything", is_flag=True, help="Every run in the results store.")
@click.option(
    "--by",
    type=click.Choice(sorted(GROUP_BY)),
    help="Group the runs by host, kernel, PostgreSQL version or set and compare the same "
    "cell across the groups (what else differs between them is listed).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write: the HTML report (default: <workdir>/reports/<title>-<time>.html), "
    "or with --json or --csv that content (default: printed; the HTML goes to its default "
    "place).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report's content as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the summary table as CSV.")
@workdir_options
@click.pass_context
def report(
    ctx: click.Context,
    /,
    run_ids: tuple[str, ...],
    comparison: int | None,
    session: int | None,
    last: bool,
    everything: bool,
    by: str | None,
    output: Path | None,
    as_json: bool,
    as_csv: bool,
    **_: object,
) -> None:
    """Write one self-contained HTML report and print its path.

    The page opens offline in any browser: the verdict table, TPS vs clients with confidence
    intervals, ladder waterfalls, and per cell the TPS/latency, disk, CPU and dirty-memory
    timelines with checkpoints marked, per-statement and worst-case latency; then a
    drill-down per run (settings that differ from the baseline, environment, pgbench
    command, warnings). TPC-C-like cells say NOPM where others say TPS, and add NOPM over
    time and latency per transaction type. The terminal gets the summary table; --json and
    --csv print the same content (the HTML path then goes to stderr).

    \b
    Examples:
      pgdyno report --last
      pgdyno report --comparison 2 -o shared-buffers.html
      pgdyno report 3 5-9 --csv
      pgdyno report --all --by host --results postgresql://pgdyno@results/pgdyno
    """
    env = environment(ctx)
    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv.")
    selection = replace(_selection(run_ids, comparison, session, last, everything), by=by)
    page = None if as_json or as_csv else output  # -o names the file of what was asked for
    built, path = report_on(env, selection, page)
    if as_json or as_csv:
        text = strict_json(built) + "\n" if as_json else summary_csv(built)
        if output is None:
            env.stdout.write(text)
        else:
            write_page(output, text)
            env.stderr.write(f"{'JSON' if as_json else 'CSV'}: {safe_text(output.resolve())}\n")
    else:
        out(env).print(summary_table(built))
        for note in built["notes"]:
            out(env).print(f"note: {note}")
    (env.stderr if as_json or as_csv else env.stdout).write(f"report: {safe_text(path)}\n")
