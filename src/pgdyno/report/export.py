"""A report as files and text: the HTML page written in place, the summary as CSV.

`make` is what `pgdyno report` does between parsing and printing: load the runs, build the
content once, write the page; the CLI then prints the same content as a table, JSON or CSV.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgdyno import __version__
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.report import content, html
from pgdyno.report.load import Selection, load
from pgdyno.results.interface import ResultsBackend
from pgdyno.results.open import open_results

# `figure` came last (issue 21), so that scripts reading the columns by position still work.
CSV_COLUMNS = (
    "workload", "scale", "clients", "group", "baseline", "runs", "failed", "tps_median",
    "tps_mean", "tps_ci_low", "tps_ci_high", "tps_cv_pct", "tps_change_pct",
    "tps_change_ci_low_pct", "tps_change_ci_high_pct", "verdict", "p99_median_ms", "p99_change",
    "p99_verdict", "noisy", "repeats_needed", "warnings", "figure",
)  # fmt: skip


def summary_csv(report: Mapping[str, Any]) -> str:
    """The summary rows of a built report, one CSV line per (cell, group); `figure` says what
    the tps_* columns measure ("nopm" for TPC-C-like cells)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in report["summary"]:
        writer.writerow(
            "; ".join(row[c]) if c == "warnings" else ("" if row[c] is None else row[c])
            for c in CSV_COLUMNS
        )
    return buffer.getvalue()


def default_path(reports_dir: Path, report: Mapping[str, Any], stamp: str) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in report["title"]).strip("-")[:60]
    return reports_dir / f"{slug}-{stamp}.html"


def write_page(path: Path, page: str) -> None:
    """Write through a `.part` file renamed into place: a reader never sees half a page."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise UsageError(
            f"cannot write the report to {path} ({exc.strerror}); choose another --output."
        ) from exc


def report_on(
    env: Environment, selection: Selection, output: Path | None
) -> tuple[dict[str, Any], Path]:
    """`pgdyno report`: the report of `selection` from the results store (read only), its page
    written to `output` (default: <workdir>/reports/<title>-<time>.html)."""
    with open_results(env.results, writing=False) as store:
        return make(store, selection, datetime.now(UTC), output, env.data_dir / "reports")


def make(
    store: ResultsBackend,
    selection: Selection,
    now: datetime,
    output: Path | None,
    reports_dir: Path,
) -> tuple[dict[str, Any], Path]:
    """Build the report of `selection` and write its page; the content and where it went."""
    data = load(store, selection)
    built = content.build(data, now.isoformat(timespec="seconds"), __version__)
    sets = {s.name: s for s in data.comparison.sets} if data.comparison else {}
    path = (output or default_path(reports_dir, built, now.strftime("%Y%m%d-%H%M%S"))).resolve()
    write_page(path, html.render(built, sets))
    return built, path
