"""Runs copied between results databases: `runs export` and `runs import` (issue 22).

An export is a results database itself (a SQLite file holding the chosen runs with their
sessions, comparisons, timelines, statements, samples and events, and an `export_info` table
saying where they came from), so `runs list --results FILE` reads it as it is. Copying keeps
rows as they are except their ids: each database numbers its rows, and a copied run points at
its copied session and comparison by their new ids. A run whose uid (results/uids.py) the target
already holds is not copied again, and everything is copied in one transaction: a failure
leaves the target as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pgdyno.errors import StoreUnavailable
from pgdyno.results.database import Database
from pgdyno.results.uids import missing

Row = dict[str, Any]
CHILDREN = ("run_seconds", "run_statements", "run_samples", "run_events")
_CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits
_RUNS_AT_ONCE = 20  # runs whose children (thousands of samples each) are held in memory at once


@dataclass(frozen=True)
class Copied:
    """What one copy added, and the runs the target already held."""

    runs: int
    sessions: int
    comparisons: int
    already: int


def _chunks[T](items: Sequence[T], size: int = _CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _rows_of(
    db: Database, table: str, column: str, ids: Iterable[int], chunk_size: int = _CHUNK
) -> list[Row]:
    """Every row of `table` whose `column` is one of `ids` (table and column: pgdyno's own)."""
    rows: list[Row] = []
    for chunk in _chunks(sorted(set(ids)), chunk_size):
        marks = ", ".join("?" for _ in chunk)
        rows += db.query(f"SELECT * FROM {table} WHERE {column} IN ({marks})", tuple(chunk))
    return rows


def _insert(db: Database, table: str, row: Row) -> int:
    columns = [c for c in row if c != "id"]
    return db.insert(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        f"({', '.join('?' for _ in columns)}) RETURNING id",
        tuple(row[c] for c in columns),
    )


def _insert_many(db: Database, table: str, rows: list[Row]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    db.copy_rows(table, columns, [tuple(row[c] for c in columns) for row in rows])


def _known(db: Database, table: str, uids: Iterable[str]) -> dict[str, int]:
    """uid -> id of the rows of `table` the database already holds."""
    found: dict[str, int] = {}
    for chunk in _chunks(sorted(set(uids))):
        marks = ", ".join("?" for _ in chunk)
        for row in db.query(f"SELECT uid, id FROM {table} WHERE uid IN ({marks})", tuple(chunk)):
            found[row["uid"]] = int(row["id"])
    return found


def _catch_up(db: Database, table: str, row_id: int, source: Row) -> None:
    """A session or comparison copied while it ran, copied again once it ended: its status
    and end follow (the runs it made since are new runs and are copied as such)."""
    if source["status"] != "running":
        db.execute(
            f"UPDATE {table} SET status = ?, finished_at = ? WHERE id = ? AND status = 'running'",
            (source["status"], source["finished_at"], row_id),
        )


def selected_run_ids(db: Database, *, session_id: int | None = None,
                     comparison_id: int | None = None) -> list[int]:  # fmt: skip
    """Every run's id, or those of one session or comparison, in the order they ran."""
    if session_id is not None:
        rows = db.query("SELECT id FROM runs WHERE session_id = ? ORDER BY id", (session_id,))
    elif comparison_id is not None:
        rows = db.query("SELECT id FROM runs WHERE comparison_id = ? ORDER BY id", (comparison_id,))
    else:
        rows = db.query("SELECT id FROM runs ORDER BY id")
    return [int(r["id"]) for r in rows]


class _Copy:
    """One copy in progress: the source's rows and the ids they got in the target."""

    def __init__(self, source: Database, target: Database) -> None:
        self.source, self.target = source, target
        self.session_ids: dict[int, int] = {}
        self.session_uids: dict[int, str] = {}
        self.comparison_ids: dict[int, int] = {}
        self.added = {"sessions": 0, "comparisons": 0}

    def _give_uids(self, table: str, rows: list[Row]) -> None:
        """Rows of a source that cannot be written and predates uids get the uids it would
        have given them (results/uids.py), so that every export of it gives the same."""
        if any(row["uid"] is None for row in rows):
            # Every session's, not only those copied: a run's uid derives from its session's.
            sessions = missing(self.source, "sessions") | self.session_uids
            derived = missing(self.source, table, sessions)
            for row in rows:
                row["uid"] = row["uid"] or derived[row["id"]]

    def sessions(self, ids: Iterable[int]) -> None:
        rows = _rows_of(self.source, "sessions", "id", ids)
        self._give_uids("sessions", rows)
        for row in rows:
            self.session_uids[row["id"]] = row["uid"]
        known = _known(self.target, "sessions", (r["uid"] for r in rows))
        for row in rows:
            if row["uid"] in known:
                self.session_ids[row["id"]] = known[row["uid"]]
                _catch_up(self.target, "sessions", known[row["uid"]], row)
            else:
                self.session_ids[row["id"]] = _insert(self.target, "sessions", row)
                self.added["sessions"] += 1

    def comparisons(self, ids: Iterable[int]) -> None:
        rows = _rows_of(self.source, "comparisons", "id", ids)
        self._give_uids("comparisons", rows)
        known = _known(self.target, "comparisons", (r["uid"] for r in rows))
        for row in rows:
            if row["uid"] in known:
                self.comparison_ids[row["id"]] = known[row["uid"]]
                _catch_up(self.target, "comparisons", known[row["uid"]], row)
                continue
            new_id = _insert(self.target, "comparisons", row)
            self.comparison_ids[row["id"]] = new_id
            self.added["comparisons"] += 1
            sets = _rows_of(self.source, "comparison_sets", "comparison_id", [row["id"]])
            _insert_many(self.target, "comparison_sets",
                         [{**s, "comparison_id": new_id} for s in sets])  # fmt: skip

    def runs(self, rows: list[Row]) -> tuple[int, int]:
        """(runs added, runs the target already held)."""
        self._give_uids("runs", rows)
        known = _known(self.target, "runs", (r["uid"] for r in rows))
        new_ids: dict[int, int] = {}
        for row in rows:
            if row["uid"] in known:
                continue
            row["session_id"] = self.session_ids[row["session_id"]]
            if row["comparison_id"] is not None:
                row["comparison_id"] = self.comparison_ids[row["comparison_id"]]
            new_ids[row["id"]] = _insert(self.target, "runs", row)
        for some in _chunks(sorted(new_ids), _RUNS_AT_ONCE):
            for table in CHILDREN:
                children = _rows_of(self.source, table, "run_id", some)
                _insert_many(self.target, table,
                             [{**c, "run_id": new_ids[c["run_id"]]} for c in children])  # fmt: skip
        return len(new_ids), len(rows) - len(new_ids)


def _check_whole(source: Database, runs: list[Row]) -> None:
    """Refuse a source whose runs point at sessions or comparisons it does not hold (a file
    edited or damaged outside pgdyno) before anything is written."""
    for table, column in (("sessions", "session_id"), ("comparisons", "comparison_id")):
        wanted = {r[column] for r in runs if r[column] is not None}
        held = {int(r["id"]) for r in _rows_of(source, table, "id", wanted)}
        orphan = next((r for r in runs if r[column] is not None and r[column] not in held), None)
        if orphan is not None:
            raise StoreUnavailable(
                f"run {orphan['id']} in {source.where} belongs to {table[:-1]} "
                f"{orphan[column]}, which is missing there: the file was changed outside "
                "pgdyno; nothing was copied."
            )


def copy_runs(source: Database, target: Database, run_ids: Sequence[int]) -> Copied:
    """The runs `run_ids` of `source`, with what they belong to and hold, into `target`."""
    runs = _rows_of(source, "runs", "id", run_ids)
    _check_whole(source, runs)
    copy = _Copy(source, target)
    with target.transaction():
        target.lock_copies()  # a concurrent import of the same runs finds them there
        copy.sessions(r["session_id"] for r in runs)
        copy.comparisons(r["comparison_id"] for r in runs if r["comparison_id"] is not None)
        added, already = copy.runs(runs)
    return Copied(added, copy.added["sessions"], copy.added["comparisons"], already)
