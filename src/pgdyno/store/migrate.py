"""Versioned schema: numbered `.sql` files applied in order, recorded in `schema_migrations`."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from importlib.resources import files

from pgdyno.errors import StoreError

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration shipped with pgdyno, in order."""
    found = []
    for entry in files("pgdyno.store.migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text()))
    return sorted(found)


def latest_version() -> int:
    return migrations()[-1][0]


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, target: int | None = None) -> list[int]:
    """Bring the schema up to date (or to `target`), each migration in its own transaction.

    Returns the versions applied."""
    have = current_version(conn)
    if have > latest_version():
        raise StoreError(
            f"the results database has schema version {have}, newer than this pgdyno knows "
            f"({latest_version()}): upgrade pgdyno or use another --results file."
        )
    applied = []
    for version, name, script in migrations():
        if version <= have or (target is not None and version > target):
            continue
        now = datetime.now(UTC).isoformat(timespec="seconds")
        # executescript commits first; BEGIN/COMMIT inside keeps each migration atomic.
        conn.executescript(
            f"BEGIN;\n{script}\nINSERT INTO schema_migrations VALUES "
            f"({version}, '{name}', '{now}');\nCOMMIT;"
        )
        applied.append(version)
    return applied
