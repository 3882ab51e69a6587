"""Which runs a report covers, read from the results database (I/O).

A report covers one comparison (every run of it, with its sets), one bench session, the runs
named by id, or the newest comparison or session (`--last`). `load` returns plain data for the
pure builder in `report.content`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.store.comparisons import Comparisons
from pgdyno.store.results import ResultsStore


@dataclass(frozen=True)
class Selection:
    """What to report on; exactly one of the fields is set."""

    run_ids: tuple[int, ...] = ()
    comparison_id: int | None = None
    session_id: int | None = None
    last: bool = False


@dataclass(frozen=True)
class ReportInput:
    title: str
    source: str  # e.g. "comparison 3 (plan 002-shared-buffers)"
    runs: list[dict[str, Any]]  # full runs as ResultsStore.get_run returns them
    comparison: dict[str, Any] | None = None  # Comparisons.get, with its sets
    missing: list[int] = field(default_factory=list)  # run ids asked for that do not exist


def parse_run_ids(words: tuple[str, ...]) -> tuple[int, ...]:
    """Run ids from words like "3", "5-9", "3,4".

    >>> parse_run_ids(("3", "5-7,9"))
    (3, 5, 6, 7, 9)
    """
    ids: list[int] = []
    for word in words:
        for part in word.split(","):
            part = part.strip()
            low, dash, high = part.partition("-")
            try:
                first, last = (int(low), int(high)) if dash else (int(part), int(part))
            except ValueError:
                raise UsageError(
                    f"{part!r} is not a run id or range; give ids like 3, 5-9 or 3,4."
                ) from None
            if first > last or first < 1:
                raise UsageError(f"{part!r} is not a valid run id range; write it low-high.")
            ids.extend(range(first, last + 1))
    return tuple(dict.fromkeys(ids))


def _newest(store: ResultsStore) -> Selection:
    rows = store.query(
        "SELECT 'comparison' AS kind, id, started_at FROM comparisons"
        " UNION ALL SELECT 'session', id, started_at FROM sessions"
        " WHERE id IN (SELECT session_id FROM runs WHERE comparison_id IS NULL)"
        " ORDER BY started_at DESC LIMIT 1"
    )
    if not rows:
        raise UsageError(
            f"the results database {store.path} holds no run yet: run `pgdyno bench` or "
            "`pgdyno compare` first."
        )
    row = rows[0]
    if row["kind"] == "comparison":
        return Selection(comparison_id=int(row["id"]))
    return Selection(session_id=int(row["id"]))


def _full_runs(store: ResultsStore, ids: list[int]) -> list[dict[str, Any]]:
    runs = [store.get_run(run_id) for run_id in ids]
    return [run for run in runs if run is not None]


def load(store: ResultsStore, selection: Selection) -> ReportInput:
    if selection.last:
        selection = _newest(store)
    if selection.comparison_id is not None:
        comparisons = Comparisons(store)
        info = comparisons.get(selection.comparison_id)
        if info is None:
            raise UsageError(
                f"there is no comparison {selection.comparison_id} in {store.path}; "
                "`pgdyno report --last` reports the newest one."
            )
        ids = [int(r["id"]) for r in comparisons.runs(selection.comparison_id)]
        return ReportInput(
            title=f"compare {info['name']}",
            source=f"comparison {info['id']} (plan {info['plan_path']}, {info['status']})",
            runs=_full_runs(store, ids),
            comparison=info,
        )
    if selection.session_id is not None:
        rows = store.query(
            "SELECT id FROM runs WHERE session_id = ? ORDER BY id", (selection.session_id,)
        )
        if not rows:
            raise UsageError(
                f"bench session {selection.session_id} has no run in {store.path}; "
                "`pgdyno runs list` shows the sessions and their runs."
            )
        return ReportInput(
            title=f"bench session {selection.session_id}",
            source=f"bench session {selection.session_id}",
            runs=_full_runs(store, [int(r["id"]) for r in rows]),
        )
    runs = _full_runs(store, list(selection.run_ids))
    found = {int(r["id"]) for r in runs}
    missing = [i for i in selection.run_ids if i not in found]
    if not runs:
        raise UsageError(
            f"none of the runs {', '.join(map(str, selection.run_ids))} is in {store.path}; "
            "`pgdyno runs list` shows the runs there are."
        )
    return ReportInput(
        title=f"{len(runs)} runs",
        source="runs " + ", ".join(str(r["id"]) for r in runs),
        runs=runs,
        missing=missing,
    )
