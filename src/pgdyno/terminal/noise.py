"""The one screen of `pgdyno noise` (pure: renderables from a NoiseReport)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pgdyno.formatting import fmt
from pgdyno.stats.noise import NoiseReport, Resolution, about, span


def _pct(value: float | None, signed: bool = False) -> str:
    """
    >>> _pct(3.14159), _pct(-0.25, signed=True), _pct(None)
    ('3.1%', '-0.25%', '-')
    """
    if value is None:
        return "-"
    return f"{value:+.2f}%" if signed else f"{value:.1f}%"


def _drift(report: NoiseReport) -> str:
    if report.drift_pct_per_min is None:
        return "-"
    text = f"{_pct(report.drift_pct_per_min, signed=True)} per minute"
    if report.drift_low_pct is not None and report.drift_high_pct is not None:
        text += (
            f" [{report.drift_low_pct:+.2f}, {report.drift_high_pct:+.2f}] ({report.drift_method})"
        )
    return text


def _cv(report: NoiseReport) -> str:
    text = f"{_pct(report.cv_pct)} (sd of log TPS)"
    if report.flagged:
        text += f"; {_pct(report.cv_all_pct)} with the flagged runs"
    return text


def _interference(report: NoiseReport) -> str:
    if not report.flagged:
        return f"none: 0 of {report.runs} runs flagged"
    text = f"{report.flagged} of {report.runs} runs flagged and left out"
    if report.top_foreign:
        text += ": " + ", ".join(
            f"{command} {pct:.0f}% ({n} run{'s' if n > 1 else ''})"
            for command, pct, n in report.top_foreign
        )
    return text


def _figures(report: NoiseReport, cell: str) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("runs", f"{report.runs} ({report.used} used), {report.pairs} clean pairs; {cell}"),
        ("TPS median", fmt(report.tps_median)),
        ("run-to-run CV", _cv(report)),
        (
            "paired spread",
            f"{_pct(report.pair_sd_pct)} (sd of the log differences of runs "
            "1-2, 3-4, ...: what a paired verdict sees)",
        ),
        ("drift", _drift(report)),
        ("interference", _interference(report)),
        (
            "one round",
            f"{report.round_seconds:.1f} s (2 runs of {report.run_seconds:.1f} s "
            "each, overhead included)",
        ),
    ]
    for name, value in rows:
        table.add_row(name, Text(value))
    return table


def _resolution_table(rows: Sequence[Resolution]) -> Table:
    # Rounds of `compare --precision/--budget` on two sets: its 97.5% always-valid interval,
    # a true change of that size found about 80% of the time (pgdyno.stats.sequential); the
    # 90% interval of the forecast from that of the paired spread (pgdyno.stats.noise).
    table = Table(title="an A vs B compare here (adaptive)", title_justify="left")
    for name in ("to", "rounds (A+B)", "machine time", "90% interval"):
        table.add_column(name, justify="left" if name == "to" else "right")
    for row in rows:
        what = (
            f"resolve a {row.target} change"
            if row.kind == "change"
            else (f"reach {row.target} precision")
        )
        more = ">= " if row.capped else ""
        table.add_row(what, f"{more}{row.rounds}", f"{more}{about(row.seconds)}", span(row))
    return table


def noise_screen(report: NoiseReport, cell: str) -> RenderableType:
    """The calibration on one screen: the figures, the machine-time table, the conclusion.

    `cell` says what ran ("select-only, scale 4, 2 clients, 5 s runs")."""
    parts: list[RenderableType] = [
        Text("noise calibration (A/A)", style="bold"),
        _figures(report, cell),
    ]
    rows = [*report.resolve, *([report.precision] if report.precision else [])]
    if rows:
        parts.append(_resolution_table(rows))
    parts.append(Text(report.conclusion, style="bold"))
    return Group(*parts)
