"""What callers may ask of a results store: the interface every backend implements.

results/store.py (SQLite) implements it; a PostgreSQL results store implements the same
methods and returns the same records (results/decode.py turns rows into them), so callers typed
against `ResultsBackend` need no change. Everything crossing this boundary is a record of
pgdyno.records, a plain value, or a `Mapping` the caller wrote itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Protocol

from pgdyno.records import RunRecord
from pgdyno.records.capacity import Capacity
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import (
    NewComparison,
    ReportSource,
    RunListing,
    RunOutcome,
    StoredComparison,
    StoredRun,
)
from pgdyno.records.waits import WaitProfile

CellDone = tuple[str, str, int, int, int]  # set, workload, scale, clients, repeat


class ComparisonsBackend(Protocol):
    """The comparison tables: a plan's sets as requested and in effect, and their runs."""

    def create(self, new: NewComparison) -> int: ...

    def resume(self, comparison_id: int) -> None: ...

    def latest(self, plan_digest: str) -> StoredComparison | None: ...

    def get(self, comparison_id: int) -> StoredComparison | None: ...

    def record_effective(
        self, comparison_id: int, set_name: str, effective: Mapping[str, object]
    ) -> None: ...

    def record_rounds(self, comparison_id: int, rounds: RoundHistory) -> None: ...
    def finish(self, comparison_id: int, status: str) -> None: ...

    def runs(self, comparison_id: int) -> list[RunOutcome]: ...

    def run_ids(self, comparison_id: int) -> list[int]: ...

    def finished_cells(self, comparison_id: int) -> set[CellDone]: ...


class ResultsBackend(Protocol):
    """Sessions and runs: written one run per transaction, read back as records."""

    @property
    def path(self) -> Path | str:
        """Where the results live, for messages (a file, or a server without password)."""
        ...

    @property
    def comparisons(self) -> ComparisonsBackend: ...

    def close(self) -> None: ...

    def __enter__(self) -> ResultsBackend: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def begin_session(
        self,
        command: list[str],
        target: str,
        host: Mapping[str, object],
        server: Mapping[str, object],
    ) -> int: ...

    def finish_session(self, session_id: int, status: str) -> None: ...

    def add_run(self, session_id: int, run: RunRecord) -> int: ...

    def list_runs(
        self,
        limit: int | None = 50,
        session_id: int | None = None,
        comparison_id: int | None = None,
    ) -> list[RunListing]: ...

    def get_run(self, run_id: int) -> StoredRun | None: ...

    def samples(self, run_id: int) -> dict[str, dict[int, float]]: ...

    def session_run_ids(self, session_id: int) -> list[int]: ...

    def newest_source(self) -> ReportSource | None: ...

    def recent_tps(
        self, workload: str, scale: int, clients: int, pg_version: str, target: str,
        *, closed_loop: bool = False,
    ) -> float | None: ...  # fmt: skip

    def record_capacity(self, session_id: int, found: Capacity) -> None: ...

    def capacity(self, session_id: int) -> Capacity | None: ...

    def comparison_capacities(self, comparison_id: int) -> list[tuple[str, Capacity]]: ...

    def comparison_sweeps(self, comparison_id: int) -> dict[str, tuple[int, Capacity]]: ...

    def latest_waits(self, target: str) -> tuple[int, WaitProfile] | None: ...
