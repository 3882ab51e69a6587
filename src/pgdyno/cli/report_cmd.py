"""`pgdyno report`: one self-contained HTML file, plus the same content as tables, JSON, CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from pgdyno import __version__
from pgdyno.cli.common import environment, out, print_json, workdir_options
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.render.terminal import fmt
from pgdyno.report import content, html
from pgdyno.report.load import Selection, load, parse_run_ids
from pgdyno.store.results import ResultsStore
from pgdyno.textsafe import safe_text

CSV_COLUMNS = (
    "workload", "scale", "clients", "group", "baseline", "runs", "failed", "tps_median",
    "tps_mean", "tps_ci_low", "tps_ci_high", "tps_cv_pct", "tps_change_pct",
    "tps_change_ci_low_pct", "tps_change_ci_high_pct", "verdict", "p99_median_ms", "p99_change",
    "p99_verdict", "noisy", "repeats_needed", "warnings",
)  # fmt: skip


def _selection(
    run_ids: tuple[str, ...], comparison: int | None, session: int | None, last: bool
) -> Selection:
    chosen = sum([bool(run_ids), comparison is not None, session is not None, last])
    if chosen != 1:
        raise UsageError(
            "say what to report on, once: run ids (e.g. `pgdyno report 3 5-9`), "
            "--comparison ID, --session ID or --last."
        )
    if run_ids:
        return Selection(run_ids=parse_run_ids(run_ids))
    return Selection(comparison_id=comparison, session_id=session, last=last)


def _default_path(env: Environment, report: dict[str, Any], stamp: str) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in report["title"]).strip("-")[:60]
    return env.data_dir / "reports" / f"{slug}-{stamp}.html"


def summary_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"{report['title']} ({report['source']})", title_justify="left")
    for name in ("cell", "group", "runs", "TPS median", "CV %", "TPS change [CI]", "p99 ms",
                 "p99 change", "verdict", "warnings"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("cell", "group", "warnings") else "right")
    for row in report["summary"]:
        table.add_row(
            row["cell"], row["group"], str(row["runs"]), fmt(row["tps_median"], 0),
            fmt(row["tps_cv_pct"]), row["tps_change"], fmt(row["p99_median_ms"], 2),
            row["p99_change"], row["verdict"] or "-", "; ".join(row["warnings"]),
        )  # fmt: skip
    return table


def summary_csv(report: dict[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in report["summary"]:
        writer.writerow(
            "; ".join(row[c]) if c == "warnings" else ("" if row[c] is None else row[c])
            for c in CSV_COLUMNS
        )
    return buffer.getvalue()


def _write(path: Path, page: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise UsageError(
            f"cannot write the report to {path} ({exc.strerror}); choose another --output."
        ) from exc


@click.command()
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID|FROM-TO]...")
@click.option("--comparison", type=int, metavar="ID", help="Every run of this comparison.")
@click.option("--session", type=int, metavar="ID", help="Every run of this bench session.")
@click.option("--last", is_flag=True, help="The newest comparison or bench session.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write (default: <workdir>/reports/<title>-<time>.html).",
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
    command, warnings). The terminal gets the summary table; --json and --csv print the same
    content (the HTML path then goes to stderr).

    \b
    Examples:
      pgdyno report --last
      pgdyno report --comparison 2 -o shared-buffers.html
      pgdyno report 3 5-9 --csv
    """
    env = environment(ctx)
    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv.")
    selection = _selection(run_ids, comparison, session, last)
    if not env.results_path.is_file():
        raise UsageError(
            f"there is no results database at {env.results_path} yet: run `pgdyno bench` "
            "first or pass --results FILE."
        )
    with ResultsStore(env.results_path) as store:
        data = load(store, selection)
    now = datetime.now(UTC)
    built = content.build(data, now.isoformat(timespec="seconds"), __version__)
    sets = {s["name"]: s for s in data.comparison["sets"]} if data.comparison else {}
    path = (output or _default_path(env, built, now.strftime("%Y%m%d-%H%M%S"))).resolve()
    _write(path, html.render(built, sets))
    if as_json:
        print_json(env, built)
    elif as_csv:
        env.stdout.write(summary_csv(built))
    else:
        out(env).print(summary_table(built))
        for note in built["notes"]:
            out(env).print(f"note: {note}")
    (env.stderr if as_json or as_csv else env.stdout).write(f"report: {safe_text(path)}\n")
