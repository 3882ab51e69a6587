"""A capacity sweep in the report: its latency-throughput curves and its result (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgdyno.records.capacity import Capacity
from pgdyno.report import charts
from pgdyno.report.series import chart
from pgdyno.stats.capacity import curve_of

CURVES_NOTE = (
    "pgbench -R at each asked rate: p99 (solid), p95 (dashed) and p50 (dotted) latency, "
    "measured from each transaction's scheduled start, against the achieved rate; medians of "
    "the runs at a rate, sustained ones only. The dashed red line is the p99 target, the cross "
    "the knee (Kneedle: where the p99 curve bends most)."
)


def curve_charts(
    capacities: Sequence[tuple[str, Capacity]], colours: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One chart per latency target: every sweep's curve at that target, one colour a sweep."""
    by_target: dict[float, list[charts.Curve]] = {}
    for i, (label, found) in enumerate(capacities):
        knee = found.knee
        by_target.setdefault(found.target_p99_ms, []).append(charts.Curve(
            label, colours.get(label, charts.colour(i)),
            [(c.achieved_tps, c.p50_ms, c.p95_ms, c.p99_ms) for c in curve_of(found.steps)],
            None if knee is None else (knee.achieved_tps, knee.p99_ms),
        ))  # fmt: skip
    figures = []
    for n, (target, curves) in enumerate(sorted(by_target.items())):
        fig = charts.latency_throughput(
            curves, target, f"Latency against throughput, p99 target {target:g} ms"
        )
        if fig is not None:
            figures.append(chart(f"capacity-{n}", fig, CURVES_NOTE))
    return figures


def rows(capacities: Sequence[tuple[str, Capacity]]) -> list[dict[str, Any]]:
    """Each sweep's result as the report's JSON and page show it.

    >>> rows([("s1", Capacity(2.0, (), 900.0, 700.0, 740.0, 0.9375, None, "bracketed", 5))])
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'group': 's1', 'target_p99_ms': 2.0, 'capacity_tps': 700.0, 'over_tps': 740.0,
      'confidence_pct': 93.75, 'knee_tps': None, 'knee_p99_ms': None, 'stopped': 'bracketed',
      'steps': 0, 'notes': []}]
    """
    return [_row(label, found) for label, found in capacities]


def _row(label: str, found: Capacity) -> dict[str, Any]:
    knee = found.knee
    return {
        "group": label, "target_p99_ms": found.target_p99_ms,
        "capacity_tps": found.capacity_tps, "over_tps": found.over_tps,
        "confidence_pct": round(100 * found.confidence, 3),
        "knee_tps": knee.achieved_tps if knee else None,
        "knee_p99_ms": knee.p99_ms if knee else None,
        "stopped": found.stopped, "steps": len(found.steps), "notes": list(found.notes),
    }  # fmt: skip
