"""The screen of `pgdyno capacity` (pure: renderables from a Capacity)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pgdyno.formatting import fmt
from pgdyno.records.capacity import OVER, UNDER, Capacity, CapacityChange, CapacityStep
from pgdyno.stats.capacity import change_line

_STYLE = {UNDER: "green", OVER: "red"}


def _rate(value: float | None) -> str:
    """
    >>> _rate(1234.5), _rate(None)
    ('1,234', 'closed loop')
    """
    return "closed loop" if value is None else f"{value:,.0f}"


def _cpu(step: CapacityStep) -> str:
    if step.client_cpu_pct is None:
        return "-"
    return f"{step.client_cpu_pct:.0f}% of {step.client_capacity_pct or 0:.0f}%"


def steps_table(found: Capacity) -> Table:
    """One line a step: the rate asked and achieved, the percentiles, the lag, pgbench's CPU
    and the verdict."""
    table = Table(title=f"capacity sweep, p99 target {found.target_p99_ms:g} ms")
    for name in ("#", "run", "phase", "asked tx/s", "achieved tx/s", "p50 ms", "p95 ms",
                 "p99 ms", "lag avg ms", "pgbench CPU", "verdict"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("phase", "verdict") else "right")
    for n, s in enumerate(found.steps, 1):
        table.add_row(
            str(n), "-" if s.run_id is None else str(s.run_id), s.phase, _rate(s.asked_tps),
            f"{s.achieved_tps:,.0f}", fmt(s.p50_ms, 2), fmt(s.p95_ms, 2), fmt(s.p99_ms, 2),
            fmt(s.lag_avg_ms, 2), _cpu(s), Text(s.verdict, style=_STYLE.get(s.verdict, "")),
        )  # fmt: skip
    return table


def knee_line(found: Capacity) -> str:
    """
    >>> from pgdyno.records.capacity import Knee
    >>> knee_line(Capacity(2.0, (), 1000.0, None, None, 0.9, Knee(800.0, 797.0, 1.4), "", 5))
    'knee (Kneedle, p99 against achieved rate): 797 tx/s asked 800, p99 1.40 ms'
    """
    if found.knee is None:
        return "knee: not found (fewer than three sustained rates, or no bend in the curve)"
    k = found.knee
    return (f"knee (Kneedle, p99 against achieved rate): {k.achieved_tps:,.0f} tx/s asked "
            f"{k.asked_tps:,.0f}, p99 {k.p99_ms:.2f} ms")  # fmt: skip


def capacity_line(found: Capacity) -> str:
    """
    >>> capacity_line(Capacity(2.0, (), 1000.0, 800.0, 860.0, 0.9375, None, "bracketed", 5))
    ... # doctest: +NORMALIZE_WHITESPACE
    'capacity at p99 <= 2 ms: 800 tx/s, interval [800, 860] (>= 93.8% confidence,
     5 runs at each end)'
    >>> capacity_line(Capacity(2.0, (), 1000.0, None, None, 0.9375, None, "budget", 5))
    'capacity at p99 <= 2 ms: not confirmed (stopped: budget)'
    """
    head = f"capacity at p99 <= {found.target_p99_ms:g} ms: "
    if found.capacity_tps is None:
        return head + f"not confirmed (stopped: {found.stopped})"
    upper = "open" if found.over_tps is None else f"{found.over_tps:,.0f}"
    level = (f">= {100 * found.confidence:.1f}% confidence" if found.confidence > 0
             else "no stated confidence")  # fmt: skip
    runs = "1 run" if found.repeats == 1 else f"{found.repeats} runs"
    return head + (f"{found.capacity_tps:,.0f} tx/s, interval [{found.capacity_tps:,.0f}, "
                   f"{upper}] ({level}, {runs} at each end)")  # fmt: skip


def capacity_screen(found: Capacity) -> RenderableType:
    lines: list[RenderableType] = [steps_table(found), Text(knee_line(found)),
                                   Text(capacity_line(found), style="bold")]  # fmt: skip
    lines += [Text(f"note: {note}") for note in found.notes]
    return Group(*lines)


def sets_lines(
    sweeps: Sequence[tuple[str, int, Capacity]], changes: Sequence[CapacityChange]
) -> list[str]:
    """A plan's sets compared on capacity (`[matrix] capacity_p99`): each set's capacity, then
    each set against the baseline.

    >>> a = Capacity(5.0, (), 9000.0, 800.0, 860.0, 0.9375, None, "bracketed", 5)
    >>> change = CapacityChange("a", "b", 5.0, 18.0, 9.0, 27.0, 0.875, "more")
    >>> for line in sets_lines([("a", 4, a)], [change]):
    ...     print(line)
    set a (session 4): capacity at p99 <= 5 ms: 800 tx/s, interval [800, 860] (>= 93.8% confidence, 5 runs at each end)
    b carries +18% [+9, +27] more load than a at p99 <= 5 ms (>= 87.5% confidence)
    """  # noqa: E501
    found = [f"set {name} (session {session}): {capacity_line(c)}" for name, session, c in sweeps]
    return found + [change_line(change) for change in changes]
