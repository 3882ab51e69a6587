"""A connection to a PostgreSQL database that holds pgdyno's results (issue 22).

The results tables' statements are written once with `?` placeholders (results/database.py);
here they become psycopg's `%s`. Driver errors become one-sentence StoreErrors naming the
server and database, never the password, which travels beside the connection string and is
kept nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from pgdyno.errors import StoreError, StoreUnavailable
from pgdyno.postgres.client import CONNECT_TIMEOUT_S, describe, error_reason, split_password
from pgdyno.textsafe import scrub_secrets

# pg_advisory_xact_lock key held while the schema is created or migrated, so that pgdyno
# processes starting at once on many hosts apply each migration exactly once.
SCHEMA_LOCK = 0x70676479  # "pgdy"
# The same for copies of runs (`runs import`): two at once would both find a run missing and
# both insert it, and the second would fail on its unique uid.
COPY_LOCK = 0x70676463  # "pgdc"
_UNAVAILABLE = ("08", "28", "3D", "42501", "57P", "53")  # connection, auth, no db, privilege


def qmark_to_format(statement: str) -> str:
    """`?` placeholders as psycopg's `%s` (a literal % doubled).

    >>> qmark_to_format("SELECT x FROM t WHERE a = ? AND b LIKE 'p%'")
    "SELECT x FROM t WHERE a = %s AND b LIKE 'p%%'"
    """
    return statement.replace("%", "%%").replace("?", "%s")


class ResultsConnection:
    """One autocommit session to the results database; `transaction()` groups statements."""

    def __init__(self, conninfo: str, *, read_only: bool = False) -> None:
        """`read_only`: a reading command's session, where every transaction is read-only."""
        self.dsn, password = split_password(conninfo, option="--results")
        self.label = describe(self.dsn)
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": "pgdyno results",
            "row_factory": dict_row,
        }
        if password is not None:
            kwargs["password"] = password
        if read_only:  # set as the session starts, beside the string's own (a search_path)
            given = conninfo_to_dict(self.dsn).get("options")
            kwargs["options"] = f"{given or ''} -c default_transaction_read_only=on".strip()
        try:
            self.conn: psycopg.Connection[dict[str, Any]] = psycopg.connect(self.dsn, **kwargs)
        except psycopg.Error as exc:
            reason = scrub_secrets(error_reason(exc)).removeprefix("connection failed: ")
            raise StoreUnavailable(
                f"cannot connect to the results database at {self.label} ({reason}): check "
                "--results / PGDYNO_RESULTS and that the server accepts this user."
            ) from None

    @property
    def where(self) -> str:
        return f"postgresql {self.label}"

    def close(self) -> None:
        self.conn.close()

    def _explain(self, exc: psycopg.Error) -> StoreError:
        reason = scrub_secrets(error_reason(exc))
        state = exc.sqlstate or ""
        if self.conn.broken or state.startswith(_UNAVAILABLE):
            return StoreUnavailable(
                f"the results database at {self.label} cannot be used ({reason}): check that "
                "the server is up and this user may create and write tables there."
            )
        return StoreError(f"the results database at {self.label} failed ({reason}).")

    @contextmanager
    def _own_errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            raise self._explain(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._own_errors(), self.conn.transaction():
            yield

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._own_errors(), self.conn.cursor() as cur:
            cur.execute(qmark_to_format(sql).encode(), params)
            return cur.fetchall() if cur.description else []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._own_errors(), self.conn.cursor() as cur:
            cur.execute(qmark_to_format(sql).encode(), params)
            return cur.rowcount

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.query(sql, params)[0]["id"])

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._own_errors(), self.conn.cursor() as cur:
            cur.executemany(qmark_to_format(sql).encode(), list(rows))

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Many rows into one table by COPY (an order of magnitude faster than INSERTs);
        `table` and `columns` are pgdyno's own names."""
        statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        with self._own_errors(), self.conn.cursor() as cur, cur.copy(statement.encode()) as copy:
            for row in rows:
                copy.write_row(row)

    def script(self, sql: str) -> None:
        """Several statements without parameters (a migration), in the current transaction."""
        with self._own_errors(), self.conn.cursor() as cur:
            cur.execute(sql.encode())

    def lock_schema(self) -> None:
        """Wait for any other pgdyno creating or migrating the tables; held to the commit."""
        self.query("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))

    def lock_copies(self) -> None:
        """Wait for any other pgdyno copying runs into this database; held to the commit."""
        self.query("SELECT pg_advisory_xact_lock(?)", (COPY_LOCK,))

    def has_table(self, name: str) -> bool:
        return bool(self.query("SELECT to_regclass(?) IS NOT NULL AS found", (name,))[0]["found"])
