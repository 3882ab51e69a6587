"""Verdict tables for `pgdyno compare` (pure: renderables from an Analysis)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text

from pgdyno.formatting import (
    carryover_warnings,
    change_text,
    fmt,
    orders_line,
    switch_cost_line,
)
from pgdyno.records.rounds import RoundHistory
from pgdyno.stats.analysis import Analysis, SetResult
from pgdyno.stats.carryover import CarryOverFit
from pgdyno.stats.verdict import BETTER, SAME, WORSE, ChangeVerdict

_COLOUR = {BETTER: "green", WORSE: "red"}


def _p99_text(change: ChangeVerdict | None) -> str:
    """The change, with the verdict only when there is one to tell."""
    if change is None or change.verdict == SAME:
        return change_text(change)
    return f"{change_text(change)} {change.verdict}"


def _verdict(change: ChangeVerdict | None, is_baseline: bool) -> Text:
    # A Text style, not markup: consoles print strings as written (cli.common.SafeConsole).
    if is_baseline:
        return Text("baseline")
    if change is None:
        return Text("-")
    return Text(change.verdict, style=_COLOUR.get(change.verdict, ""))


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.1f} min"


def rounds_summary(rounds: RoundHistory) -> str:
    """One sentence on how many rounds ran and why they stopped.

    >>> rounds_summary(RoundHistory("fixed", 3, (), 95.0, "repeats"))
    '3 rounds (fixed repeats), 1.6 min; paired by round.'
    >>> text = rounds_summary(RoundHistory("adaptive", 9, (), 300.0, "budget", unresolved=1,
    ...     more_rounds=12, more_seconds=400.0, precision_pct=2.0, budget_s=300.0))
    >>> print(text.replace("; ", ";" + chr(10)))
    9 rounds (adaptive), 5.0 min: the budget of 5.0 min is spent with 1 interval unresolved;
    about 12 more rounds (6.7 min) would resolve it at this noise.
    """
    head = f"{rounds.rounds} rounds"
    took = _minutes(rounds.seconds)
    if not rounds.adaptive:
        return f"{head} (fixed repeats), {took}; paired by round."
    stopped = rounds.stopped
    if stopped == "resolved":
        why = f"every interval resolved (a verdict, or +-{rounds.precision_pct}% or less)"
    elif stopped == "budget":
        left = rounds.unresolved
        why = (
            f"the budget of {_minutes(rounds.budget_s)} is spent with {left} interval"
            f"{'s' if left != 1 else ''} unresolved"
        )
        if rounds.more_rounds is not None:
            why += (
                f"; about {rounds.more_rounds} more rounds "
                f"({_minutes(rounds.more_seconds)}) would resolve "
                f"{'it' if left == 1 else 'them'} at this noise"
            )
        else:
            why += "; too few usable runs to estimate how much longer it would take"
    else:
        why = f"stopped: {stopped}"
    return f"{head} (adaptive), {took}: {why}."


def design_line(rounds: RoundHistory) -> str:
    """How the rounds were ordered, and how to replay the orders (`formatting.orders_line`).

    >>> design_line(RoundHistory("fixed", 3, (), 95.0, "repeats"))
    'Orders: rotation (A B C, B C A, ...).'
    """
    return orders_line(rounds.design, rounds.seed)


def carryover_lines(fits: Sequence[CarryOverFit], design: str) -> list[str]:
    """One warning line per set whose carry-over (the effect on the run right after it) or
    switch cost (the effect on its own run right after another set) is large and
    significant; nothing when none is (`formatting.carryover_warnings`).

    >>> from pgdyno.stats.carryover import CarryOver
    >>> fit = CarryOverFit("a", (CarryOver("c", -0.041, 0.006, 1e-6, 12),), 20)
    >>> [line[:40] for line in carryover_lines([fit], "balanced")]
    ['Warning: runs right after set c were 4.1']
    """
    return carryover_warnings(fits, design)


def switch_costs(fits: Sequence[CarryOverFit]) -> list[str]:
    """Every set's estimated switch cost, when the design let it be estimated
    (`formatting.switch_cost_line`); nothing otherwise."""
    line = switch_cost_line(fits)
    return [line] if line else []


def level(analysis: Analysis) -> str:
    """The confidence level every interval of the analysis is at (the plan-wide error's share).

    >>> from pgdyno.stats.family import ErrorControl
    >>> level(Analysis("a", "sets", (), (), ErrorControl(2))), level(
    ...     Analysis("a", "sets", (), (), ErrorControl(8)))
    ('97.5%', '99.38%')
    """
    return f"{100.0 * (1.0 - analysis.error_control.alpha):.4g}%"


def figure_name(figures: Sequence[str]) -> str:
    """What the throughput columns measure: TPS, NOPM (the TPC-C-like workload), or both.

    >>> figure_name(["tps"]), figure_name(["nopm", "nopm"]), figure_name(["tps", "nopm"])
    ('TPS', 'NOPM', 'TPS/NOPM')
    """
    found = {f.upper() for f in figures}
    return "/".join(name for name in ("TPS", "NOPM") if name in found) or "TPS"


def _worst_text(result: SetResult) -> str:
    """The median of the runs' worst transactions, and the worst of all (seed 001's figure).

    >>> from pgdyno.stats.summary import describe
    >>> r = SetResult(("w", 1, 1), "a", 2, 0, 0, None, None, None, None, (),
    ...               max_ms=describe([40.0, 2300.0]), worst_ms=2300.0)
    >>> _worst_text(r)
    '1,170 (worst 2,300)'
    """
    if result.max_ms is None:
        return "-"
    return f"{fmt(result.max_ms.median, 0)} (worst {fmt(result.worst_ms, 0)})"


WAITS_HEADING = "wait share, baseline -> set"


def wait_changes_text(result: SetResult) -> str:
    """The wait events whose share of database time moved most against the baseline.

    >>> from pgdyno.stats.waits import WaitChange
    >>> r = SetResult(("w", 1, 1), "b", 2, 0, 0, None, None, None, None, (),
    ...               wait_changes=(WaitChange("LWLock:WALWrite", 0.31, 0.09),))
    >>> wait_changes_text(r)
    'LWLock:WALWrite 31% -> 9%'
    """
    return "; ".join(c.text() for c in result.wait_changes)


CPU_HEADING = "CPU share, baseline -> set"


def cpu_changes_text(result: SetResult) -> str:
    """The functions whose share of the server's CPU moved most against the baseline.

    >>> from pgdyno.records.profile import FunctionMove
    >>> r = SetResult(("w", 1, 1), "b", 2, 0, 0, None, None, None, None, (),
    ...               cpu_changes=(FunctionMove("XLogInsertRecord", 0.14, 0.06),))
    >>> cpu_changes_text(r)
    'XLogInsertRecord 14% -> 6%'
    """
    return "; ".join(c.text() for c in result.cpu_changes)


def verdict_table(
    analysis: Analysis, title: str, storage: Mapping[str, str] | None = None
) -> Table:
    """One row per (cell, set); `storage` (set name to its filesystems) adds a column."""
    table = Table(title=title, title_justify="left")
    table.caption = f"error control: {analysis.error_control.text}"
    figure = figure_name([r.figure for r in analysis.results])
    shown = ["cell", "set", *(["storage"] if storage else []), "runs", f"{figure} median",
             "CV %", f"{figure} change vs baseline [{level(analysis)} CI]", "p99 ms",
             "p99 change", "max ms", f"verdict ({figure})", "notes"]  # fmt: skip
    waits = any(r.wait_changes for r in analysis.results)
    shown += [WAITS_HEADING] if waits else []
    cpu = any(r.cpu_changes for r in analysis.results)
    shown += [CPU_HEADING] if cpu else []
    for name in shown:
        left = name in ("cell", "set", "storage", "notes", WAITS_HEADING, CPU_HEADING)
        table.add_column(name, justify="left" if left else "right")
    for r in analysis.results:
        workload, scale, clients = r.cell
        is_base = r.set_name == analysis.baseline
        table.add_row(
            f"{workload} s{scale} c{clients}", r.set_name,
            *([storage.get(r.set_name, "-")] if storage else []),
            f"{r.runs}" + (f" ({r.failed} failed)" if r.failed else "")
            + (f" ({r.discarded} discarded)" if r.discarded else ""),
            fmt(r.tps.median if r.tps else None), fmt(r.tps.cv_pct if r.tps else None),
            change_text(r.tps_change), fmt(r.p99_ms.median if r.p99_ms else None, 2),
            _p99_text(r.p99_change), _worst_text(r),
            _verdict(r.tps_change, is_base), "; ".join(r.warnings),
            *([wait_changes_text(r)] if waits else []),
            *([cpu_changes_text(r)] if cpu else []),
        )  # fmt: skip
    return table


def ladder_tables(analysis: Analysis) -> list[Table]:
    tables = []
    figures = {r.cell: r.figure for r in analysis.results}
    for (workload, scale, clients), lad in analysis.ladders:
        table = Table(title=f"ladder: {workload} s{scale} c{clients}", title_justify="left")
        figure = figure_name([figures.get((workload, scale, clients), "tps")])
        for name in ("step", f"{figure} median", "level", f"step gain [{level(analysis)} CI]",
                     "verdict", "cumulative"):  # fmt: skip
            table.add_column(name, justify="left" if name == "step" else "right")
        for step in lad.steps:
            table.add_row(
                step.name, fmt(step.stats.median), f"{step.level_pct:.0f}%",
                change_text(step.step_gain), _verdict(step.step_gain, step.step_gain is None),
                change_text(step.cumulative),
            )  # fmt: skip
        if lad.total is not None:
            table.caption = f"total: {change_text(lad.total)}, {lad.total.verdict}"
        tables.append(table)
    return tables
