"""`pgdyno runs list|show|export|import`: what the results store holds, read (or merged)
through one opening of the store each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.records.stored import RunListing, StoredComparison, StoredRun
from pgdyno.report.load import parse_run_ids
from pgdyno.results.exchange import export_runs, import_runs
from pgdyno.results.open import open_results
from pgdyno.results.store import ResultsStore
from pgdyno.results.transfer import Copied, selected_run_ids


@dataclass(frozen=True)
class Listed:
    """Runs as `runs list` shows them and, for `--comparison`, the comparison they were made
    for (None: not asked for, or no such comparison)."""

    rows: list[RunListing]
    comparison: StoredComparison | None = None


def listed(
    env: Environment, limit: int | None, session: int | None, comparison: int | None
) -> Listed:
    """The newest runs (all with `limit` None), or those of a bench session or comparison
    (with the comparison: its plan, status, and the design and seed of its rounds)."""
    with open_results(env.results, writing=False) as store:
        rows = store.list_runs(limit, session, comparison)
        info = store.comparisons.get(comparison) if comparison is not None else None
    return Listed(rows, info)


def one_run(env: Environment, run_id: int) -> StoredRun:
    """A stored run with everything kept of it; one sentence when there is none."""
    with open_results(env.results, writing=False) as store:
        run = store.get_run(run_id)
    if run is None:
        raise UsageError(f"there is no run {run_id}: see `pgdyno runs list` for the ids.")
    return run


def export(
    env: Environment,
    file: Path,
    words: tuple[str, ...],
    session: int | None,
    comparison: int | None,
) -> Copied:
    """Write the chosen runs (ids and ranges, a session, a comparison, or all) to `file`."""
    with open_results(env.results, writing=False) as store:
        return export_runs(store.db, file, _export_ids(store, words, session, comparison))


def import_(env: Environment, file: Path) -> Copied:
    """Merge an export's runs into the results store (runs it holds already are skipped)."""
    with open_results(env.results) as store:
        return import_runs(store.db, file)


def _export_ids(
    store: ResultsStore, words: tuple[str, ...], session: int | None, comparison: int | None
) -> list[int]:
    if sum([bool(words), session is not None, comparison is not None]) > 1:
        raise UsageError("choose one of run ids, --session and --comparison (or none: all runs).")
    if words:
        wanted = parse_run_ids(words)
        present = set(selected_run_ids(store.db))
        missing = [str(i) for i in wanted if i not in present]
        if missing:
            raise UsageError(
                f"there is no run {', '.join(missing)}: see `pgdyno runs list` for the ids."
            )
        return list(wanted)
    return selected_run_ids(store.db, session_id=session, comparison_id=comparison)
