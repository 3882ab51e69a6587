"""A run's per-second values as chart series, and the notes of the charts drawn from them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgdyno.collect.timeline import PROGRESS_METRIC
from pgdyno.records.stored import StoredRun, second_values
from pgdyno.report.charts import Series

# The captions of the charts drawn from a run's series.
TIMELINE_NOTE = (
    "The repeat with the median TPS of each group. Latency: dotted p50, solid p99, dashed max "
    "(log scale). Shaded spans and ▼ mark checkpoints (hover for buffers written and timings)."
)
DISK_NOTE = "Solid: write MB/s, dotted: read MB/s, same definitions as iostat -x."
CPU_NOTE = "CPU: solid user, dashed system, dotted iowait. Memory: solid Dirty, dotted Writeback."


def chart(chart_id: str, figure: Mapping[str, Any], note: str) -> dict[str, Any]:
    """A chart as the report lists it: its id, its figure and its caption."""
    return {"id": chart_id, "figure": figure, "note": note}


def _checkpoints(run: StoredRun, t0: float) -> list[dict[str, Any]]:
    """Checkpoint spans from start to complete events, as seconds into the run."""
    spans: list[dict[str, Any]] = []
    start: float | None = None
    for event in run.events:
        if event.kind == "checkpoint_start":
            start = float(event.t)
        elif event.kind == "checkpoint_complete":
            begin = start if start is not None else float(event.t)
            detail = event.detail or {}
            text = "checkpoint: " + ", ".join(
                f"{k.replace('_', ' ')} {v}" for k, v in detail.items() if v is not None
            )
            spans.append(
                {
                    "x0": round(begin - t0, 3),
                    "x1": round(float(event.t) - t0, 3),
                    "text": text[:300],
                }
            )
            start = None
    if start is not None:
        spans.append(
            {
                "x0": round(start - t0, 3),
                "x1": round(start - t0, 3),
                "text": "checkpoint started, not complete by the end of the run",
            }
        )
    return spans


def first_second(run: StoredRun) -> float:
    """The start of the first second any series of a run measured: 0 on its charts' time axis.

    pgbench's log and the samplers file each figure under the epoch second it covers; the
    samplers start before pgbench and may hold a second the log's first whole second does not.
    pgbench's own -P lines are left out: each is filed under the second it overlaps most,
    which is now and then the partial second pgbench started in.
    """
    starts = [row.t for row in run.seconds]
    starts += [t for name, s in run.samples.items() if name != PROGRESS_METRIC for t in s]
    return float(min(starts)) if starts else 0.0


def run_series(run: StoredRun, group: str, colour: str) -> Series:
    """Every per-second value of a run, drawn at the end of the second it covers (x = seconds
    since the start of its first measured second), as pgbench -P and iostat stamp an interval:
    the line then reaches the end of the last second measured instead of stopping a second
    short of it."""
    t0 = first_second(run)
    values: dict[str, list[tuple[float, float]]] = {}
    for row in run.seconds:
        for name, value in second_values(row):
            values.setdefault(name, []).append((row.t + 1 - t0, float(value)))
    for name, points in run.samples.items():
        values[name] = [(t + 1 - t0, float(v)) for t, v in sorted(points.items())]
    return Series(group, colour, values, _checkpoints(run, t0), tuple(devices(run)))


def devices(run: StoredRun) -> list[tuple[str, str]]:
    """(role, kernel name) of the data device, then the WAL device when it is another one."""
    out: list[tuple[str, str]] = []
    for role in ("data", "wal"):
        dev = run.device(role)
        name = dev.name if dev is not None else None
        if name and all(name != n for _, n in out):
            out.append((role, str(name)))
    return out
