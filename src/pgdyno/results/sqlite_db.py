"""A results database in a SQLite file: the default, one file per work directory.

A writing command opens the file in WAL mode, so readers never block the one writer. A reading
command opens it read-only (`mode=ro`): nothing in the file changes, not even its journal mode,
so an export read with `--results FILE` keeps its checksum; on read-only media, where even a
read-only connection cannot make its shared-memory file, it is read as it is (`immutable`) when
nothing is pending in its WAL. Reading never migrates the file: an older schema is read
through a private copy (results/open.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgdyno.errors import StoreError, StoreUnavailable
from pgdyno.results.database import Params
from pgdyno.results.migrate import SCHEMA_TABLE, pending


def _explain(path: Path, exc: sqlite3.Error) -> StoreError:
    """One sentence for a failure of the database file; the file itself is never touched."""
    reason = str(exc)
    if "not a database" in reason or "malformed" in reason:
        return StoreUnavailable(
            f"{path} is not a usable results database ({reason}) and was left as it is: move "
            "it aside or pass another --results file."
        )
    if "readonly" in reason or "unable to open" in reason or "access permission" in reason:
        return StoreUnavailable(
            f"the results database {path} cannot be opened for writing ({reason}): check the "
            "file, its directory and their permissions, or pass another --results file."
        )
    if "disk is full" in reason or "disk I/O" in reason:
        hint = "free some disk space and run again"
    else:
        hint = "pass another --results file if this one is damaged"
    return StoreError(f"the results database {path} failed ({reason}): {hint}.")


def _readable_as_is(path: Path) -> bool:
    """A database file whose every committed change is in the file itself (no pending WAL)."""
    wal = path.with_name(path.name + "-wal")
    return path.is_file() and (not wal.exists() or wal.stat().st_size == 0)


def schema_version(conn: sqlite3.Connection) -> int:
    """The newest migration applied; 0 for a file without pgdyno's tables (nothing written)."""
    have = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if have is None:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, target: int | None = None) -> list[int]:
    """Bring the file's schema up to date (or to `target`), each migration in its own
    transaction; the versions applied.

    Several pgdyno processes may open a new file at once (four imports as a fleet's hosts end):
    each migration records its version first, under the file's write lock, so the second
    process to get the lock fails on that row, not half-way through the migration, and goes
    on from the version the first recorded."""
    applied = []
    conn.execute(SCHEMA_TABLE)
    while due := pending(schema_version(conn), target):
        version, name, script = due[0]
        now = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            # executescript commits first; BEGIN/COMMIT inside keeps each migration atomic.
            conn.executescript(
                f"BEGIN IMMEDIATE;\nINSERT INTO schema_migrations VALUES ({version}, '{name}', "
                f"'{now}');\n{script}\nCOMMIT;"
            )
        except sqlite3.IntegrityError:
            _rollback(conn)
            if schema_version(conn) < version:  # not another process's doing
                raise
            continue
        except BaseException:
            _rollback(conn)
            raise
        applied.append(version)
    return applied


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class SqliteDatabase:
    """store.database.Database on one SQLite file.

    `writing`: the command will store runs, so a file it cannot write is refused at once
    (before any run) instead of when the first run is to be kept."""

    def __init__(self, path: Path, *, writing: bool = True, shown_as: Path | None = None) -> None:
        self.path = path
        self.shown_as = shown_as or path  # a private copy is named as the file it copies
        if path.is_dir():
            raise StoreUnavailable(
                f"the results database path {path} is a directory: pass --results with a file "
                "path, or move the directory away."
            )
        if writing:
            try:
                self.conn = self._open()
            except sqlite3.Error as exc:
                raise _explain(path, exc) from exc
        else:
            self.conn = self._open_for_reading()

    @property
    def where(self) -> Path:
        return self.shown_as

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create the results database {self.path} ({exc.strerror}): pass another "
                "--results file."
            ) from exc
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            self.conn = conn
            self.migrate()
            conn.execute("DELETE FROM schema_migrations WHERE 0")  # a no-op write
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_for_reading(self) -> sqlite3.Connection:
        """The file read-only, as it is; on read-only media (no shared-memory file can be
        made beside it) immutable, when nothing is pending in its WAL."""
        if not self.path.is_file():
            raise StoreUnavailable(
                f"there is no results database {self.path}: pass the --results file to read."
            )
        try:
            conn = self._connect_read_only("mode=ro")
        except sqlite3.Error as exc:
            if not _readable_as_is(self.path):
                raise _explain(self.path, exc) from exc
            try:
                conn = self._connect_read_only("mode=ro&immutable=1")
            except sqlite3.Error:
                raise _explain(self.path, exc) from exc
        return conn

    def _connect_read_only(self, query: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            f"{self.path.as_uri()}?{query}", uri=True, isolation_level=None, timeout=30
        )
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the file now
        except BaseException:
            conn.close()
            raise
        return conn

    def schema_version(self) -> int:
        return schema_version(self.conn)

    def migrate(self, target: int | None = None) -> list[int]:
        return migrate(self.conn, target)

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _explain(self.shown_as, exc) from exc

    def lock_copies(self) -> None:
        """Nothing to take: `transaction` began with the file's write lock (BEGIN IMMEDIATE),
        which already keeps every other writer out until the commit."""

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        try:
            return [dict(row) for row in self.conn.execute(sql, params).fetchall()]
        except sqlite3.Error as exc:
            raise _explain(self.shown_as, exc) from exc

    def execute(self, sql: str, params: Params = ()) -> int:
        try:
            return self.conn.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise _explain(self.shown_as, exc) from exc

    def insert(self, sql: str, params: Params) -> int:
        rows = self.query(sql, params)
        return int(rows[0]["id"])

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Params]) -> None:
        marks = ", ".join("?" for _ in columns)
        self.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        try:
            self.conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise _explain(self.shown_as, exc) from exc
