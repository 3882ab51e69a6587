"""What a report shows of runs flagged for interference where no clean run is left (pure).

The verdicts leave flagged runs out (stats/analysis.py), yet the charts draw them: on a busy
host every run of a set, or of a whole ladder, may be flagged. Rather than a "-" beside a
chart that plots them, or a waterfall that silently disappears, the report shows their
figures greyed, unjudged, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pgdyno.records.stored import StoredRun
from pgdyno.report.selection import cell_key, cell_label, throughput
from pgdyno.stats.analysis import CellKey, Judging
from pgdyno.stats.ladder import Ladder, ladder
from pgdyno.stats.summary import describe


def finished(run: StoredRun) -> bool:
    """A run with figures, flagged or not."""
    return run.status == "ok" and bool(throughput(run))


def interference_reason(runs: Iterable[StoredRun]) -> str:
    """Why flagged runs are not judged: the worst run's interference, in one sentence.

    >>> interference_reason([])
    ''
    """
    runs = list(runs)
    flagged = [r for r in runs if r.interference is not None]
    if not flagged:
        return ""
    many = len(flagged) > 1
    return (
        f"{len(flagged)} run{'s' if many else ''} flagged for interference, left out of the "
        f"verdicts ({'the worst: ' if many else ''}{_worst(flagged)})"
    )


def summary_figures(
    runs: Sequence[StoredRun], groups: Mapping[int, str]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (cell label, group) whose finished runs were all flagged: their figures (median
    throughput, CV, median p99) and the reason they are not judged."""
    by_key: dict[tuple[str, str], list[StoredRun]] = {}
    for run in runs:
        if finished(run):
            by_key.setdefault((cell_label(cell_key(run)), groups[run.id]), []).append(run)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, found in by_key.items():
        if not all(r.interfered for r in found):
            continue
        stats = describe([throughput(r) for r in found])
        p99 = [float(r.latency_p99_ms) for r in found if r.latency_p99_ms]
        out[key] = {
            "runs": len(found),
            "tps_median": stats.median,
            "tps_cv_pct": stats.cv_pct,
            "p99_median_ms": describe(p99).median if p99 else None,
            "reason": interference_reason(found),
        }
    return out


def _by_round(runs: Sequence[StoredRun]) -> dict[int, float]:
    """A step's figure per round (the geometric mean of two runs of one round), as the
    analysis pairs them."""
    values: dict[int, list[float]] = {}
    for run in runs:
        values.setdefault(run.repeat, []).append(throughput(run))
    return {r: math.exp(sum(map(math.log, v)) / len(v)) for r, v in values.items()}


def _worst(runs: Iterable[StoredRun]) -> str:
    found = [r.interference for r in runs if r.interference is not None]
    if not found:
        return ""
    return max(found, key=lambda i: (i.foreign_cpu_pct, i.steal_pct)).text()


def _why(steps: Mapping[str, Sequence[StoredRun]]) -> str:
    """Why a ladder has no verdicts: its steps without a clean run, and the worst
    interference.

    >>> _why({"a": [], "b": []})
    'steps a, b have no finished run'
    """
    done = {name: [r for r in runs if finished(r)] for name, runs in steps.items()}
    missing = [name for name, runs in done.items() if not runs]
    flagged = [name for name, runs in done.items() if runs and all(r.interfered for r in runs)]
    parts = []
    if flagged:
        which = "every step" if len(flagged) == len(steps) else "step " + ", ".join(flagged)
        parts.append(f"every run of {which} was flagged for interference")
    if missing:
        noun = "step " if len(missing) == 1 else "steps "
        parts.append(noun + ", ".join(missing) + (" has" if len(missing) == 1 else " have")
                     + " no finished run")  # fmt: skip
    worst = _worst(r for runs in done.values() for r in runs)
    return "; ".join(parts) + (f" (the worst: {worst})" if worst else "")


def ladders(
    runs: Sequence[StoredRun],
    steps: Sequence[str],
    judged: Iterable[CellKey],
    judging: Judging,
) -> list[tuple[CellKey, Ladder | None, str]]:
    """For each cell of a ladder plan whose ladder the analysis could not judge: the ladder of
    its finished runs, flagged ones included (None when fewer than two steps have one), and
    why it is not judged."""
    per_cell: dict[CellKey, dict[str, list[StoredRun]]] = {}
    for run in runs:
        per_cell.setdefault(cell_key(run), {}).setdefault(str(run.set_name), []).append(run)
    out: list[tuple[CellKey, Ladder | None, str]] = []
    for cell in sorted(set(per_cell) - set(judged)):
        of_cell = {name: per_cell[cell].get(name, []) for name in steps}
        values = [(n, _by_round([r for r in rs if finished(r)])) for n, rs in of_cell.items()]
        drawn = [(name, v) for name, v in values if v]
        found = ladder(drawn, judge=judging.__call__) if len(drawn) > 1 else None
        out.append((cell, found, _why(of_cell)))
    return out
