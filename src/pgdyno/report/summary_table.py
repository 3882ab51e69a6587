"""The report's summary as a terminal table: what `pgdyno report` prints (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from pgdyno.formatting import fmt


def _columns(figure: str) -> tuple[str, ...]:
    """The table's headings, the throughput ones named for what it is (TPS, NOPM or both)."""
    return (
        "cell", "group", "runs", f"{figure} median", "CV %", f"{figure} change [CI]", "p99 ms",
        "p99 change", "verdict", "warnings",
    )  # fmt: skip


def summary_table(report: Mapping[str, Any]) -> Table:
    """One row per (cell, group) of a report built by `report.content.build`."""
    table = Table(title=f"{report['title']} ({report['source']})", title_justify="left")
    for name in _columns(report.get("figure_label", "TPS")):
        table.add_column(name, justify="left" if name in ("cell", "group", "warnings") else "right")
    for row in report["summary"]:
        table.add_row(
            row["cell"], row["group"], str(row["runs"]), fmt(row["tps_median"], 0),
            fmt(row["tps_cv_pct"]), row["tps_change"], fmt(row["p99_median_ms"], 2),
            row["p99_change"], row["verdict"] or "-", "; ".join(row["warnings"]),
        )  # fmt: skip
    return table
