"""What the results tables need of a database connection, whichever engine holds them.

Statements are written once, in the SQL both engines read, with `?` placeholders; each
connection (results/sqlite_db.py, postgres/results_db.py) runs them its own way and turns its
driver's errors into one-sentence StoreErrors naming the database. Rows come back as dicts,
decoded into records by results/decode.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

Params = Sequence[Any]


class Database(Protocol):
    """One open connection to a results database."""

    @property
    def where(self) -> Path | str:
        """The file, or the server and database (never a password), for messages."""
        ...

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        """Rows of a SELECT (or of a statement with RETURNING)."""
        ...

    def execute(self, sql: str, params: Params = ()) -> int:
        """A statement without rows to read; the number of rows it changed."""
        ...

    def insert(self, sql: str, params: Params) -> int:
        """An INSERT ... RETURNING id; the new row's id."""
        ...

    def executemany(self, sql: str, rows: Iterable[Params]) -> None: ...

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Params]) -> None:
        """Many rows into one of pgdyno's tables, the fastest way the engine has."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Everything inside commits together or not at all; the writers of other processes
        wait (SQLite) or proceed on other rows (PostgreSQL)."""
        ...

    def lock_copies(self) -> None:
        """Inside a transaction: wait for any other copy of runs into this database (`runs
        import`) to commit, so that the runs it added are seen as already there; held to the
        commit."""
        ...

    def migrate(self) -> list[int]:
        """Bring the schema up to date; the versions applied (none when it already was)."""
        ...

    def schema_version(self) -> int:
        """The newest migration applied; 0 for a database that holds no results yet."""
        ...

    def close(self) -> None: ...
