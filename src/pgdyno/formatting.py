"""Numbers and changes as text, written the same way in every output: the terminal tables
(terminal/), the HTML report and its exports (report/). Pure; it sits below both so that neither
renderer imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pgdyno.stats.verdict import ChangeVerdict


def fmt(value: float | None, digits: int = 1) -> str:
    """
    >>> fmt(1234.567), fmt(None), fmt(0.01234, 3)
    ('1,234.6', '-', '0.012')
    """
    return "-" if value is None else f"{value:,.{digits}f}"


def change_text(change: ChangeVerdict | None) -> str:
    """A change against the baseline with its interval, in percent.

    >>> from pgdyno.stats.verdict import ChangeVerdict
    >>> change_text(ChangeVerdict(4.2, 1.05, 7.49, "better", False, None))
    '+4.2% [+1.1, +7.5]'
    >>> change_text(None)
    '-'
    """
    if change is None:
        return "-"
    if change.ci_low_pct is None or change.ci_high_pct is None:
        return f"{change.change_pct:+.1f}%"
    return f"{change.change_pct:+.1f}% [{change.ci_low_pct:+.1f}, {change.ci_high_pct:+.1f}]"
