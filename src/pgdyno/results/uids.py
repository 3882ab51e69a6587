"""Ids that stay the same in every results database a row is copied to (issue 22).

A row's database id depends on the database (and on how many rows came before it); its uid is
given once and kept wherever the row is copied. `runs import` adds a run only when its uid is
new, so importing the same export twice adds nothing.

New rows get a random uid. Rows written before uids existed get one derived from what makes
the row itself (the host, process and instant that started a session or comparison; the
session, start and cell of a run), so that a database that cannot be written (read-only
media) gives the same uids on every export; two rows that look the same are told apart by
their id, in id order.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from pgdyno.results.database import Database

Row = Mapping[str, Any]
# In this order: a run's uid is derived from its session's.
TABLES = ("sessions", "comparisons", "runs")


def new_uid() -> str:
    return uuid.uuid4().hex


def _digest(*parts: object) -> str:
    """
    >>> _digest("session", "db1", 42, None, "2026-11-26T10:00:00.000+00:00")
    '4f6fa8b1cf1345b895281d3e9d18b806'
    """
    text = json.dumps(parts, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _derived(table: str, row: Row) -> str:
    if table == "sessions":
        return _digest(
            "session", row["hostname"], row["pid"], row["owner_started"], row["started_at"]
        )
    if table == "comparisons":
        return _digest("comparison", row["hostname"], row["started_at"], row["plan_digest"])
    return _digest(
        "run", row["session_uid"], row["started_at"], row["workload"], row["scale"],
        row["clients"], row["repeat"], row["set_name"],
    )  # fmt: skip


_MISSING = {
    "sessions": "SELECT * FROM sessions WHERE uid IS NULL ORDER BY id",
    "comparisons": "SELECT * FROM comparisons WHERE uid IS NULL ORDER BY id",
    # A run's session has its uid by then (sessions come first), or gets it in the same pass.
    "runs": "SELECT r.*, s.uid AS session_uid FROM runs r JOIN sessions s ON s.id = r.session_id"
    " WHERE r.uid IS NULL ORDER BY r.id",
}


def missing(db: Database, table: str, sessions: Mapping[int, str] | None = None) -> dict[int, str]:
    """id -> the uid each row of `table` without one gets (computed, not written).

    `sessions`: uids just computed for sessions that have none in the database yet."""
    taken = {r["uid"] for r in db.query(f"SELECT uid FROM {table} WHERE uid IS NOT NULL")}
    found: dict[int, str] = {}
    for row in db.query(_MISSING[table]):
        if table == "runs" and row["session_uid"] is None:
            row = {**row, "session_uid": (sessions or {}).get(row["session_id"])}
        uid = _derived(table, row)
        if uid in taken:  # a row that looks like another: its id tells them apart
            uid = _digest(uid, row["id"])
        taken.add(uid)
        found[int(row["id"])] = uid
    return found


def fill_missing(db: Database) -> int:
    """Give rows written before uids existed theirs (once per database); how many got one."""
    filled = 0
    with db.transaction():
        for table in TABLES:
            for row_id, uid in missing(db, table).items():
                filled += db.execute(f"UPDATE {table} SET uid = ? WHERE id = ?", (uid, row_id))
    return filled


def any_missing(db: Database) -> bool:
    rows = db.query(
        "SELECT 1 AS x FROM sessions WHERE uid IS NULL UNION ALL"
        " SELECT 1 FROM comparisons WHERE uid IS NULL UNION ALL"
        " SELECT 1 FROM runs WHERE uid IS NULL LIMIT 1"
    )
    return bool(rows)
