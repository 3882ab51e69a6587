"""The report's wait-event views (pure): active sessions by wait type over time, the events
whose share of database time moved most against the baseline, each group's database time by
wait type, and a run's top events.

A wait type has one colour everywhere on the page (`WAIT_COLOURS`), so a stacked area, a table
chip and a drill-down row of the same type agree.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pgdyno.catalogs.metrics import get
from pgdyno.records.stored import StoredRun
from pgdyno.records.waits import WaitProfile, event_type
from pgdyno.report.charts import (
    Figure,
    Series,
    axis_spec,
    checkpoint_shapes,
    figure_layout,
    row_domains,
)
from pgdyno.report.selection import cell_key, cell_label
from pgdyno.report.timelines import time_range
from pgdyno.stats.analysis import Analysis, CellKey
from pgdyno.stats.waits import wait_type_of

# Each wait type's colour, in stacking order (bottom first): CPU* green, IO blue, LWLock
# orange-red, Lock purple. Types PostgreSQL adds later take one of OTHER_COLOURS by name.
WAIT_COLOURS: Mapping[str, str] = {
    "CPU*": "#2e9e5b",
    "IO": "#2f6db3",
    "LWLock": "#e0632a",
    "Lock": "#8a5fbf",
    "IPC": "#d4a017",
    "BufferPin": "#8c6245",
    "Client": "#2aa6b8",
    "Timeout": "#8a8a8a",
    "Activity": "#a3a13a",
    "Extension": "#d46aa8",
    "InjectionPoint": "#1c3d6e",
}
OTHER_COLOURS = ("#5b8c85", "#b35a00", "#6b4c9a", "#9c9c3c", "#c06c84", "#3c6e71")
TOP_RUN_EVENTS = 5  # events a run's drill-down lists

WAITS_NOTE = (
    "Average active sessions of the benchmark database's client backends by wait event type, "
    "sampled (stacked: the top edge is all active sessions; CPU* is active with no wait event). "
    "Background processes (checkpointer, walwriter, autovacuum, I/O workers) are in the smaller "
    "row below, not in database time. Shaded spans and ▼ mark checkpoints."
)


def type_colour(wait_type: str) -> str:
    """
    >>> type_colour("CPU*"), type_colour("IO"), type_colour("NewType") == type_colour("NewType")
    ('#2e9e5b', '#2f6db3', True)
    """
    known = WAIT_COLOURS.get(wait_type)
    if known is not None:
        return known
    return OTHER_COLOURS[zlib.crc32(wait_type.encode()) % len(OTHER_COLOURS)]


def stack_order(types: Iterable[str]) -> list[str]:
    """Known types in `WAIT_COLOURS` order, then the others by name.

    >>> stack_order(["Lock", "Zed", "IO", "CPU*"])
    ['CPU*', 'IO', 'Lock', 'Zed']
    """
    rank = {t: i for i, t in enumerate(WAIT_COLOURS)}
    return sorted(set(types), key=lambda t: (rank.get(t, len(rank)), t))


# -- the chart ---------------------------------------------------------------------------------

ROW_PX, BACKGROUND_WEIGHT, GAP = 230, 0.55, 0.05
Points = Sequence[tuple[float, float]]


def _by_type(s: Series, background: bool) -> dict[str, Points]:
    out = {}
    for name, points in s.values.items():
        parsed = wait_type_of(name)
        if parsed is not None and parsed[1] == background and points:
            out[parsed[0]] = points
    return out


def _rows(series: Sequence[Series]) -> list[tuple[Series, bool, dict[str, Points]]]:
    rows = []
    for s in series:
        for background in (False, True):
            found = _by_type(s, background)
            if found:
                rows.append((s, background, found))
    return rows


def _area(wait_type: str, points: Points, row: int, where: str) -> dict[str, Any]:
    colour = type_colour(wait_type)
    return {
        "type": "scatter",
        "mode": "lines",
        "stackgroup": f"row{row}",
        "name": wait_type,
        "legendgroup": wait_type,
        "x": [p[0] for p in points],
        "y": [p[1] for p in points],
        "line": {"color": colour, "width": 0.6},
        "fillcolor": colour,
        "xaxis": "x" if row == 1 else f"x{row}",
        "yaxis": "y" if row == 1 else f"y{row}",
        "hovertemplate": f"%{{y:.2f}} {wait_type}<extra>{where}</extra>",
    }


def _row_title(s: Series, background: bool, single: bool) -> str:
    if single:
        return get("waits_bg.{type}_aas" if background else "waits.{type}_aas").label
    group = s.group if len(s.group) <= 24 else s.group[:23] + "…"
    return f"{group}<br>{'background' if background else 'active sessions'}"


def _checkpoint_marks(
    s: Series, rows: Sequence[int], span: tuple[float, float], overlay: int, single: bool
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """`checkpoint_shapes` of one group, moved onto its rows: spans over them, markers on an
    invisible axis over its first row; named after the group when there are several."""
    shapes, markers = checkpoint_shapes([s])
    for shape in shapes:
        shape.update(yref="paper", y0=span[0], y1=span[1])
    first = rows[0]
    for trace in markers:
        trace.update(xaxis="x" if first == 1 else f"x{first}", yaxis=f"y{overlay}")
        if not single:
            trace.update(name=s.group, showlegend=False)
    axis = {"overlaying": "y" if first == 1 else f"y{first}", "range": [0, 1.05]}
    return shapes, markers, {f"yaxis{overlay}": {**axis, "visible": False}}


def sessions_by_type(series: Sequence[Series], title: str) -> Figure | None:
    """Stacked active sessions per wait type, one row per group (its representative run) and a
    smaller row of its background processes; None when no run has wait series."""
    rows = _rows(series)
    if not rows:
        return None
    single = len({id(s) for s, _, _ in rows}) == 1
    weights = [BACKGROUND_WEIGHT if background else 1.0 for _, background, _ in rows]
    domains = row_domains(weights, GAP)
    data: list[dict[str, Any]] = []
    layout = figure_layout(title, height=int(90 + ROW_PX * sum(weights)))
    shown: set[str] = set()
    for row, ((s, background, by_type), domain) in enumerate(zip(rows, domains, strict=True), 1):
        where = f"{s.group}: {'background' if background else 'client backends'}"
        for wait_type in stack_order(by_type):
            trace = _area(wait_type, by_type[wait_type], row, where)
            trace["showlegend"] = wait_type not in shown
            shown.add(wait_type)
            data.append(trace)
        last = row == len(rows)
        suffix = "" if row == 1 else str(row)
        layout[f"xaxis{suffix}"] = axis_spec(
            "seconds into the run" if last else "",
            anchor=f"y{suffix}",
            showticklabels=last,
            **({} if row == 1 else {"matches": "x"}),
        )
        layout[f"yaxis{suffix}"] = axis_spec(
            _row_title(s, background, single), domain=list(domain), rangemode="tozero"
        )
    overlay = len(rows) + 1
    shapes: list[Any] = []
    for s in series:
        own = [i for i, (r, _, _) in enumerate(rows, 1) if r is s]
        if not own:
            continue
        span = (domains[own[-1] - 1][0], domains[own[0] - 1][1])
        spans, markers, axis = _checkpoint_marks(s, own, span, overlay, single)
        if markers:
            shapes += spans
            data += markers
            layout.update(axis)
            overlay += 1
    if shapes:
        layout["shapes"] = shapes
    seconds = time_range(series)
    if seconds:  # every timeline's of the cell, so that they line up
        layout["xaxis"]["range"] = seconds
    return {"data": data, "layout": layout}


# -- tables ------------------------------------------------------------------------------------


def _pct(share: float) -> float:
    return round(100.0 * share, 3)


def change_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """Per cell and group, the events whose share of database time moved most against the
    baseline (`SetResult.wait_changes`), in points of percent."""
    rows = []
    for r in analysis.results:
        for c in r.wait_changes:
            rows.append(
                {
                    "cell": cell_label(r.cell),
                    "group": r.set_name,
                    "baseline_group": analysis.baseline,
                    "event": c.event,
                    "colour": type_colour(event_type(c.event)),
                    "baseline_pct": _pct(c.before),
                    "group_pct": _pct(c.after),
                    "change_points": _pct(c.after - c.before),
                }
            )
    return rows


def pooled_types(profiles: Sequence[WaitProfile]) -> list[tuple[str, float]]:
    """Each wait type's share of the database time of several runs, weighted by their
    database time, largest first.

    >>> a = WaitProfile("x", 10, 10, 1.0, (("CPU*", 1.0),), ())
    >>> b = WaitProfile("x", 10, 10, 3.0, (("IO", 0.5), ("CPU*", 0.5)), ())
    >>> pooled_types([a, b])
    [('CPU*', 0.625), ('IO', 0.375)]
    """
    total = sum(p.db_time_s for p in profiles)
    if total <= 0:
        return []
    time: dict[str, float] = {}
    for p in profiles:
        for wait_type, share in p.by_type:
            time[wait_type] = time.get(wait_type, 0.0) + share * p.db_time_s
    return sorted(((t, v / total) for t, v in time.items()), key=lambda tv: (-tv[1], tv[0]))


def profile_rows(
    runs: Sequence[StoredRun], groups: Mapping[int, str], names: Sequence[str]
) -> list[dict[str, Any]]:
    """Per cell and group, the database time of its runs by wait type."""
    by_cell: dict[CellKey, dict[str, list[WaitProfile]]] = {}
    for run in runs:
        if run.waits is not None:
            of_cell = by_cell.setdefault(cell_key(run), {})
            of_cell.setdefault(groups[run.id], []).append(run.waits)
    rows = []
    for cell in sorted(by_cell):
        for name in (n for n in names if n in by_cell[cell]):
            profiles = by_cell[cell][name]
            rows.append(
                {
                    "cell": cell_label(cell),
                    "group": name,
                    "runs": len(profiles),
                    "db_time_s": round(sum(p.db_time_s for p in profiles), 3),
                    "types": [
                        {"type": t, "colour": type_colour(t), "share_pct": _pct(share)}
                        for t, share in pooled_types(profiles)
                    ],
                }
            )
    return rows


def run_waits(run: StoredRun) -> dict[str, Any] | None:
    """A run's top events for its drill-down; None when it was not sampled."""
    found = run.waits
    if found is None:
        return None
    return {
        "source": found.source,
        "sample_hz": found.sample_hz,
        "db_time_s": found.db_time_s,
        "top": [
            {
                "event": w.event,
                "colour": type_colour(event_type(w.event)),
                "share_pct": _pct(w.share),
                "aas": w.aas,
            }
            for w in found.top[:TOP_RUN_EVENTS]
        ],
    }
