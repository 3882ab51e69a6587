"""The report's tuning ladders (pure): per cell of a ladder plan, its table rows and its
waterfall; a ladder the analysis could not judge (no clean run in some step) is drawn from the
runs that finished, greyed, with the reason (report/flagged.py), never left out silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pgdyno.formatting import change_text
from pgdyno.report import charts, flagged, tpcc
from pgdyno.report.charts import Step
from pgdyno.report.load import ReportInput
from pgdyno.report.selection import cell_label
from pgdyno.report.series import chart
from pgdyno.stats.analysis import Analysis, CellKey, Judging
from pgdyno.stats.ladder import Ladder
from pgdyno.stats.verdict import ChangeVerdict

LADDER_NOTE = (
    "Each step adds its settings to the previous one; bars show the median {unit} as "
    "% of the first step, error bars the 97.5% interval of the cumulative change, "
    "hover for each step's own gain."
)
FLAGGED_LADDER_NOTE = (
    "Not judged, greyed: {reason}. The bars show the median {unit} of the finished runs, "
    "flagged ones included, as % of the first step, without intervals; run the ladder again "
    "on a quiet host for verdicts."
)


def _figures(analysis: Analysis) -> dict[CellKey, str]:
    return {r.cell: r.figure for r in analysis.results}


LadderEntry = tuple[CellKey, Ladder | None, str]  # the cell, its ladder, why not judged ("")


def entries(analysis: Analysis, data: ReportInput, judging: Judging) -> list[LadderEntry]:
    """Every cell of a ladder plan: its judged ladder, or the ladder of its flagged runs greyed
    with the reason (report/flagged.py), so no waterfall disappears silently."""
    entries: list[LadderEntry] = [(cell, lad, "") for cell, lad in analysis.ladders]
    if data.comparison is None or analysis.mode != "ladder":
        return entries
    judge = replace(judging, alpha=analysis.error_control.alpha)
    steps = [s.name for s in data.comparison.sets]
    entries += flagged.ladders(data.runs, steps, (c for c, _, _ in entries), judge)
    return sorted(entries, key=lambda e: e[0])


def rows(analysis: Analysis, entries: Sequence[LadderEntry]) -> list[dict[str, Any]]:
    out = []
    figures = _figures(analysis)
    for cell, lad, reason in entries:
        judged = not reason
        out.append(
            {
                "cell": cell_label(cell),
                "figure": figures.get(cell, "tps"),
                # False: no clean runs to judge; the steps are the flagged runs', greyed.
                "judged": judged,
                "reason": reason or None,
                "total": change_text(lad.total) if lad else "-",
                "total_verdict": lad.total.verdict if lad and lad.total and judged else None,
                "steps": [
                    {
                        "name": s.name,
                        "tps_median": s.stats.median,
                        "level_pct": s.level_pct,
                        "step_gain": change_text(s.step_gain),
                        "verdict": _step_verdict(s.step_gain, judged),
                        "cumulative": change_text(s.cumulative),
                    }
                    for s in (lad.steps if lad else ())
                ],
            }
        )
    return out


def _step_verdict(gain: ChangeVerdict | None, judged: bool) -> str:
    if gain is None:
        return "first step"
    return gain.verdict if judged else "not judged"


def waterfalls(analysis: Analysis, entries: Sequence[LadderEntry]) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    judged_on = _figures(analysis)
    for cell, lad, reason in entries:
        if lad is None:
            continue
        unit = tpcc.label(judged_on.get(cell, "tps"))
        steps = []
        for s in lad.steps:
            cum = s.cumulative
            low = high = None  # no interval on a ladder not judged: its bars are only levels
            if not reason and cum and cum.ci_low_pct is not None and cum.ci_high_pct is not None:
                low, high = 100 + cum.ci_low_pct, 100 + cum.ci_high_pct
            steps.append(Step(s.name, s.level_pct, low, high, change_text(s.step_gain)))
        total = f"{change_text(lad.total)}, {lad.total.verdict}" if lad.total else "-"
        title = f"Tuning ladder: {cell_label(cell)}"
        if reason:
            total = f"{change_text(lad.total)}, not judged" if lad.total else "-"
            title += " (not judged: runs flagged)"
        fig = charts.waterfall(steps, total, title, unit, greyed=bool(reason))
        if fig:
            note = (
                FLAGGED_LADDER_NOTE.format(reason=reason, unit=unit)
                if reason
                else LADDER_NOTE.format(unit=unit)
            )
            figures.append(chart(f"ladder-{len(figures)}", fig, note))
    return figures
