"""Which runs a report covers, read from the results database (I/O).

A report covers one comparison (every run of it, with its sets), one bench session, the runs
named by id, or the newest comparison or session (`--last`). `load` returns records for the
pure builder in `report.content`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pgdyno.errors import UsageError
from pgdyno.records.capacity import Capacity
from pgdyno.records.stored import StoredComparison, StoredRun
from pgdyno.results.interface import ResultsBackend


@dataclass(frozen=True)
class Selection:
    """What to report on (exactly one of the first five is set) and how to group it."""

    run_ids: tuple[int, ...] = ()
    comparison_id: int | None = None
    session_id: int | None = None
    last: bool = False
    all_runs: bool = False
    by: str | None = None  # a key of report.selection.GROUP_BY; None: the selection's own


@dataclass(frozen=True)
class ReportInput:
    title: str
    source: str  # e.g. "comparison 3 (plan 002-shared-buffers)"
    runs: list[StoredRun]
    comparison: StoredComparison | None = None  # with its sets
    missing: list[int] = field(default_factory=list)  # run ids asked for that do not exist
    by: str | None = None  # grouping asked for (Selection.by)
    # Capacity sweeps among the runs: (label, sweep), for the latency-throughput curves.
    capacities: tuple[tuple[str, Capacity], ...] = ()


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


def _newest(store: ResultsBackend) -> Selection:
    newest = store.newest_source()
    if newest is None:
        raise UsageError(
            f"the results database {store.path} holds no run yet: run `pgdyno bench` or "
            "`pgdyno compare` first."
        )
    if newest.kind == "comparison":
        return Selection(comparison_id=newest.id)
    return Selection(session_id=newest.id)


def _full_runs(store: ResultsBackend, ids: list[int]) -> list[StoredRun]:
    runs = [store.get_run(run_id) for run_id in ids]
    return [run for run in runs if run is not None]


def _comparison(store: ResultsBackend, comparison_id: int) -> ReportInput:
    info = store.comparisons.get(comparison_id)
    if info is None:
        raise UsageError(
            f"there is no comparison {comparison_id} in {store.path}; "
            "`pgdyno report --last` reports the newest one."
        )
    return ReportInput(
        title=f"compare {info.name}",
        source=f"comparison {info.id} (plan {info.plan_path}, {info.status})",
        runs=_full_runs(store, store.comparisons.run_ids(comparison_id)),
        comparison=info,
        capacities=tuple(store.comparison_capacities(comparison_id)),
    )


def _session(store: ResultsBackend, session_id: int) -> ReportInput:
    ids = store.session_run_ids(session_id)
    if not ids:
        raise UsageError(
            f"bench session {session_id} has no run in {store.path}; "
            "`pgdyno runs list` shows the sessions and their runs."
        )
    found = store.capacity(session_id)
    kind = "bench" if found is None else "capacity"
    return ReportInput(
        title=f"{kind} session {session_id}",
        source=f"{kind} session {session_id}",
        runs=_full_runs(store, ids),
        capacities=() if found is None else ((f"session {session_id}", found),),
    )


def load(store: ResultsBackend, selection: Selection) -> ReportInput:
    return replace(_load(store, selection), by=selection.by)


def _all(store: ResultsBackend) -> ReportInput:
    ids = sorted(row.id for row in store.list_runs(limit=None))
    if not ids:
        raise UsageError(
            f"the results database {store.path} holds no run yet: run `pgdyno bench` or "
            "`pgdyno compare` first."
        )
    return ReportInput(title=f"all {len(ids)} runs", source=f"every run in {store.path}",
                       runs=_full_runs(store, ids))  # fmt: skip


def _load(store: ResultsBackend, selection: Selection) -> ReportInput:
    if selection.last:
        selection = replace(_newest(store), by=selection.by)
    if selection.all_runs:
        return _all(store)
    if selection.comparison_id is not None:
        return _comparison(store, selection.comparison_id)
    if selection.session_id is not None:
        return _session(store, selection.session_id)
    runs = _full_runs(store, list(selection.run_ids))
    found = {r.id for r in runs}
    missing = [i for i in selection.run_ids if i not in found]
    if not runs:
        raise UsageError(
            f"none of the runs {', '.join(map(str, selection.run_ids))} is in {store.path}; "
            "`pgdyno runs list` shows the runs there are."
        )
    return ReportInput(
        title=f"{len(runs)} runs",
        source="runs " + ", ".join(str(r.id) for r in runs),
        runs=runs,
        missing=missing,
    )
