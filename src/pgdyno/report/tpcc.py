"""The report's TPC-C-like parts (pure): NOPM over time, latency per transaction type, a run's
TPC-C figures, and the name of the figure a cell is judged on.

A TPC-C-like cell is judged on NOPM (new orders per minute) as the others are on TPS
(stats/analysis.py), so its throughput charts and summary say NOPM; seed 004 drew its tuning
ladder's throughput the same way, before and after each step.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from pgdyno.records.stored import StoredRun
from pgdyno.report import charts, timelines
from pgdyno.report.charts import Figure, Point, Series
from pgdyno.report.selection import spread
from pgdyno.report.series import TIMELINE_NOTE, chart
from pgdyno.results.encode import tpcc_json

NOPM_METRIC = "tpcc.nopm"  # the per-second series a TPC-C-like run records (data/metrics.toml)
FIGURE_LABELS = {"tps": "TPS", "nopm": "NOPM"}
TYPE_LABELS = {
    "new_order": "new-order",
    "payment": "payment",
    "order_status": "order-status",
    "delivery": "delivery",
    "stock_level": "stock-level",
}

NOPM_TIMELINE_NOTE = (
    "New orders per minute, second by second, of the repeat with the median NOPM of each group "
    "(seed 004's before/after throughput figures). Shaded spans and ▼ mark checkpoints (hover "
    "for buffers written and timings)."
)
TYPES_NOTE = (
    "p90 latency of each transaction type, the percentile HammerDB's time profiles report: "
    "median over the repeats, error bars from the best to the worst repeat; hover for the "
    "medians of p50, p99 and max."
)
# The TPS timeline of a TPC-C-like cell shows the repeat picked by its NOPM.
TPCC_TIMELINE_NOTE = TIMELINE_NOTE.replace("median TPS", "median NOPM")


def figure_of(runs: Sequence[StoredRun]) -> str:
    """What runs are judged on, as the analysis names it: "nopm" when any is TPC-C-like."""
    return "nopm" if any(r.tpcc is not None for r in runs) else "tps"


def label(figure: str) -> str:
    """
    >>> label("nopm"), label("tps")
    ('NOPM', 'TPS')
    """
    return FIGURE_LABELS.get(figure, figure.upper())


def summary_label(rows: Sequence[Mapping[str, Any]]) -> str:
    """The figure the summary's columns are headed by: TPS, NOPM, or both when cells differ.

    >>> summary_label([{"figure": "nopm"}]), summary_label([{"figure": "tps"}, {"figure": "nopm"}])
    ('NOPM', 'TPS or NOPM')
    """
    figures = list(dict.fromkeys(str(r["figure"]) for r in rows)) or ["tps"]
    return " or ".join(label(f) for f in figures)


def _whole_seconds(s: Series) -> Series:
    """The NOPM of the seconds the TPS line has: the transaction log also counts the partial
    seconds at either end of the run, which hold only part of a second's new orders."""
    nopm = s.values.get(NOPM_METRIC) or ()
    tps = [x for x, _ in s.values.get("tps") or ()]
    if tps:
        nopm = [(x, y) for x, y in nopm if min(tps) <= x <= max(tps)]
    return replace(s, values={NOPM_METRIC: nopm})


def nopm_timeline(series: Sequence[Series], title: str) -> Figure | None:
    """NOPM per second, one line per group, checkpoints shaded and marked as on the TPS one."""
    seconds = timelines.time_range(series)  # the cell's other timelines', to line up with them
    series = [_whole_seconds(s) for s in series]
    data = charts.series_lines(series, charts.labelled([(NOPM_METRIC, "", "solid", 1.8)]))
    if not data:
        return None
    shapes, markers = charts.checkpoint_shapes(series)
    layout = charts.figure_layout(
        title,
        height=380,
        xaxis=charts.axis_spec("seconds into the run", **({"range": seconds} if seconds else {})),
        yaxis=charts.axis_spec("NOPM", rangemode="tozero"),
    )
    if markers:
        layout["yaxis3"] = {"overlaying": "y", "range": [0, 1.05], "visible": False}
        layout["shapes"] = shapes
    return {"data": charts.legend_once(data, len(series) == 1) + markers, "layout": layout}


def _type_points(runs: Sequence[StoredRun], group: str, colour: str) -> list[Point]:
    """Per transaction type that some run measured: the median of the runs' p90 with its range,
    the medians of p50, p99 and max in the hover text."""
    per_type: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for t in run.tpcc.transactions if run.tpcc else ():
            values = per_type.setdefault(t.name, {"p50": [], "p90": [], "p99": [], "max": []})
            for key, value in (("p50", t.p50_ms), ("p90", t.p90_ms), ("p99", t.p99_ms),
                               ("max", t.max_ms)):  # fmt: skip
                if value is not None:
                    values[key].append(float(value))
    points = []
    for name, values in per_type.items():
        if not values["p90"]:
            continue
        p90 = spread(values["p90"])
        others = ", ".join(
            f"{key} {statistics.median(values[key]):.3g} ms"
            for key in ("p50", "p99", "max")
            if values[key]
        )
        text = f"p90 of {p90.n} runs, range {p90.low:.3g}-{p90.high:.3g} ms; medians: {others}"
        points.append(
            Point(group, colour, TYPE_LABELS.get(name, name), p90.median, p90.low, p90.high, text)
        )
    return points


def cell_charts(
    by_group: Mapping[str, Sequence[StoredRun]],
    series: Sequence[Series],
    colours: Mapping[str, str],
    cell: str,
    index: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A TPC-C-like cell's NOPM timeline (to go first) and per-type latency (to go after the
    timelines); ([], []) for other cells."""
    if not any(r.tpcc is not None for runs in by_group.values() for r in runs):
        return [], []
    first, last = [], []
    timeline = nopm_timeline(series, f"NOPM over time: {cell}")
    if timeline:
        first.append(chart(f"cell-{index}-nopm", timeline, NOPM_TIMELINE_NOTE))
    points = [p for g, runs in by_group.items() for p in _type_points(runs, g, colours[g])]
    bars = charts.grouped_bars(points, f"Latency per transaction type: {cell}", "p90 latency ms")
    if bars:
        last.append(chart(f"cell-{index}-types", bars, TYPES_NOTE))
    return first, last


def run_figures(run: StoredRun) -> dict[str, Any] | None:
    """A TPC-C-like run's figures for its drill-down: as `runs show --json` has them, plus the
    types as rows in the specification's order with their labels; None for other runs."""
    if run.tpcc is None:
        return None
    out = tpcc_json(run.tpcc)
    out["transaction_rows"] = [
        {"label": TYPE_LABELS.get(t.name, t.name), **asdict(t)} for t in run.tpcc.transactions
    ]
    return out


def run_charts(run: StoredRun, series: Series) -> list[dict[str, Any]]:
    """A TPC-C-like run's NOPM timeline for its drill-down; [] for other runs."""
    timeline = nopm_timeline([series], "NOPM over time") if run.tpcc is not None else None
    if timeline is None:
        return []
    return [chart(f"run-{run.id}-nopm", timeline, "New orders per minute, second by second.")]
