"""The report's summary as a terminal table: what `pgdyno report` prints (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from pgdyno.formatting import fmt

# The columns of a comparison only: one group (a bench session) compares nothing.
COMPARING = ("change [CI]", "p99 change", "verdict")


def _columns(figure: str, comparing: bool) -> tuple[str, ...]:
    """The table's headings, the throughput ones named for what it is (TPS, NOPM or both).

    >>> _columns("TPS", False)
    ('cell', 'group', 'runs', 'TPS median', 'CV %', 'p99 ms', 'warnings')
    """
    names = (
        "cell", "group", "runs", f"{figure} median", "CV %", f"{figure} change [CI]", "p99 ms",
        "p99 change", "verdict", "warnings",
    )  # fmt: skip
    return tuple(n for n in names if comparing or not n.endswith(COMPARING))


def _cells(row: Mapping[str, Any]) -> dict[str, str]:
    """A summary row's cells by heading kind; the figures of runs that were all flagged for
    interference stand in for the "-" of a set with no clean run, marked as not judged."""
    flagged = row.get("flagged")
    figures = flagged or row
    runs = f"{flagged['runs']} flagged" if flagged else str(row["runs"])
    verdict = "not judged" if flagged and not row["baseline"] else row["verdict"] or "-"
    return {
        "cell": row["cell"], "group": row["group"], "runs": runs,
        "median": fmt(figures["tps_median"], 0), "CV %": fmt(figures["tps_cv_pct"]),
        "change [CI]": row["tps_change"], "p99 ms": fmt(figures["p99_median_ms"], 2),
        "p99 change": row["p99_change"], "verdict": verdict,
        "warnings": flagged["reason"] if flagged else "; ".join(row["warnings"]),
    }  # fmt: skip


def _row(row: Mapping[str, Any], columns: Sequence[str]) -> list[str]:
    cells = _cells(row)
    return [next(v for k, v in cells.items() if name.endswith(k)) for name in columns]


def summary_table(report: Mapping[str, Any]) -> Table:
    """One row per (cell, group) of a report built by `report.content.build`."""
    table = Table(title=f"{report['title']} ({report['source']})", title_justify="left")
    columns = _columns(report.get("figure_label", "TPS"), report.get("comparing", True))
    for name in columns:
        table.add_column(name, justify="left" if name in ("cell", "group", "warnings") else "right")
    for row in report["summary"]:
        table.add_row(*_row(row, columns))
    return table
