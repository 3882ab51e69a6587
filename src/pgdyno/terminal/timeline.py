"""A run's timeline as rows: the compact terminal view and the full CSV export (pure)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

from rich.table import Table

from pgdyno.catalogs.metrics import compact_columns, with_derived
from pgdyno.formatting import fmt
from pgdyno.records.stored import StoredRun, second_values


def data_device(run: StoredRun) -> str | None:
    data = run.device("data")
    return None if data is None or data.name is None else str(data.name)


def _series(
    run: StoredRun, samples: Mapping[str, Mapping[int, float]]
) -> dict[str, dict[int, float]]:
    """Every per-second value of a run by name, run_seconds columns and samples alike."""
    series: dict[str, dict[int, float]] = {name: dict(values) for name, values in samples.items()}
    for row in run.seconds:
        for name, value in second_values(row):
            series.setdefault(name, {})[row.t] = value
    return with_derived(series)  # e.g. pg.wal_mb_per_s, as the catalog defines it


def _seconds(series: Mapping[str, Mapping[int, float]]) -> list[int]:
    return sorted({t for values in series.values() for t in values})


def _event_marks(run: StoredRun) -> dict[int, str]:
    marks: dict[int, str] = {}
    for event in run.events:
        mark = {"checkpoint_start": "C>", "checkpoint_complete": "<C"}.get(event.kind, "*")
        t = int(event.t)
        marks[t] = (marks.get(t, "") + " " + mark).strip()
    return marks


def compact_table(run: StoredRun, samples: Mapping[str, Mapping[int, float]]) -> Table:
    series = _series(run, samples)
    device = data_device(run) or "?"
    # The catalog's compact columns; a per-device metric shows the data directory's device.
    columns = [(m.column or m.name, m.named(device), m.digits) for m in compact_columns()]
    columns = [c for c in columns if c[1] in series]
    table = Table(
        title=f"run {run.id} timeline (data device {device}; C> checkpoint start, <C complete)",
        title_justify="left",
    )
    table.add_column("s", justify="right")
    for header, _, _ in columns:
        table.add_column(header, justify="right")
    table.add_column("events")
    marks = _event_marks(run)
    seconds = _seconds(series)
    t0 = seconds[0] if seconds else 0
    for t in seconds:
        table.add_row(
            str(t - t0),
            *(fmt(series[src].get(t), digits) for _, src, digits in columns),
            marks.get(t, ""),
        )
    return table


def timeline_csv(run: StoredRun, samples: Mapping[str, Mapping[int, float]]) -> str:
    """Every series of a run, one row per second: t (epoch), elapsed, then one column each."""
    series = _series(run, samples)
    names = sorted(series)
    marks = _event_marks(run)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["t", "elapsed_s", *names, "events"])
    seconds = _seconds(series)
    t0 = seconds[0] if seconds else 0
    for t in seconds:
        writer.writerow(
            [t, t - t0, *(_csv_value(series[n].get(t)) for n in names), marks.get(t, "")]
        )
    return buffer.getvalue()


def _csv_value(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
