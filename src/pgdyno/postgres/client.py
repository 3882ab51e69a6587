"""The only module that talks to PostgreSQL through a driver (psycopg 3)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg import sql
from psycopg.rows import class_row

from pgdyno.errors import (
    ConnectionFailed,
    ConnectionLost,
    InsufficientPrivilege,
    QueryRefused,
    ServerTrouble,
    UndefinedObject,
    UsageError,
)
from pgdyno.postgres.queries import load
from pgdyno.textsafe import scrub_secrets

CONNECT_TIMEOUT_S = 10

Row = TypeVar("Row")


@dataclass(frozen=True)
class ServerInfo:
    version_num: int
    version: str
    data_directory: str | None
    shared_buffers_bytes: int
    is_superuser: bool
    can_create_db: bool


def split_password(dsn: str, option: str = "--dsn") -> tuple[str, str | None]:
    """Take the password out of a connection string, so it is never stored or shown.

    >>> split_password("host=db user=ann password=s3cret dbname=x")
    ('host=db user=ann dbname=x', 's3cret')
    >>> split_password("postgresql://ann:pw@db:5433/x")
    ('host=db port=5433 user=ann dbname=x', 'pw')
    """
    try:
        params = pg_conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        # libpq quotes the whole string, password included: scrub it from the reason.
        reason = " ".join(scrub_secrets(str(exc)).split())
        raise UsageError(
            f"{option} is not a valid connection string ({reason}): write key=value pairs or a "
            "postgresql:// URI."
        ) from None
    password = params.pop("password", None)
    return _join(params), None if password is None else str(password)


def with_password(dsn: str, password: str) -> str:
    """`dsn` with `password` put in (replacing any): the one connection string that carries it.

    >>> with_password("host=db dbname=x", "s3 cret")
    "host=db dbname=x password='s3 cret'"
    """
    return with_param(dsn, "password", password)


def with_param(dsn: str, key: str, value: str) -> str:
    """
    >>> with_param("host=db dbname=x", "application_name", "pgdyno")
    'host=db dbname=x application_name=pgdyno'
    """
    return _join({**pg_conninfo.conninfo_to_dict(dsn), key: value})


_FIRST = ("host", "hostaddr", "port", "user", "dbname")


def _join(params: Mapping[str, object]) -> str:
    """A conninfo string with the usual keys first (libpq's own order puts host last)."""
    keys = [k for k in _FIRST if k in params] + sorted(k for k in params if k not in _FIRST)
    return " ".join(f"{k}={_quote(str(params[k]))}" for k in keys if params[k] is not None)


def _quote(value: str) -> str:
    """A conninfo value, quoted the way libpq reads it.

    >>> _quote("db"), _quote("a b"), _quote("it's")
    ('db', "'a b'", "'it\\\\'s'")
    """
    if value and not any(c in value for c in " '\\"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def with_dbname(dsn: str, dbname: str) -> str:
    """
    >>> with_dbname("host=/tmp port=5 dbname=postgres", "bench")
    'host=/tmp port=5 dbname=bench'
    """
    return _join({**pg_conninfo.conninfo_to_dict(dsn), "dbname": dbname})


def endpoint(dsn: str) -> tuple[str, int]:
    """(host, port) of a connection string: an address, or for a Unix socket the socket file.

    >>> endpoint("host=/run/postgresql port=5433 dbname=x"), endpoint("host=db1")
    (('/run/postgresql/.s.PGSQL.5433', 5433), ('db1', 5432))
    """
    params = pg_conninfo.conninfo_to_dict(dsn)
    host, port = str(params.get("hostaddr") or params.get("host") or ""), params.get("port")
    try:
        number = int(str(port or 5432))
    except ValueError:
        raise UsageError(f"the port in {describe(dsn)!r} is not a number.") from None
    if not host or "," in host:
        raise UsageError(
            "a server reached over SSH needs one host= in its connection string (its socket "
            "directory or address as the remote host sees it)."
        )
    return (f"{host}/.s.PGSQL.{number}" if host.startswith("/") else host), number


def with_endpoint(dsn: str, host: str, port: int) -> str:
    """
    >>> with_endpoint("host=/run/pg port=5 dbname=b user=u", "127.0.0.1", 40001)
    'host=127.0.0.1 port=40001 user=u dbname=b'
    """
    params = {k: v for k, v in pg_conninfo.conninfo_to_dict(dsn).items() if k != "hostaddr"}
    return _join({**params, "host": host, "port": str(port)})


def dbname_of(dsn: str) -> str | None:
    value = pg_conninfo.conninfo_to_dict(dsn).get("dbname")
    return None if value is None else str(value)


def describe(dsn: str) -> str:
    """Where a connection string points, for messages (never includes a password).

    >>> describe("host=/run/pg port=5433 user=x dbname=db password=no")
    '/run/pg:5433/db'
    """
    params = pg_conninfo.conninfo_to_dict(dsn)
    host = params.get("host") or "the default socket"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"


# -- composing statements: callers outside postgres/ never touch the driver's sql module --------

Statement = sql.SQL | sql.Composed


def identifier(name: str) -> sql.Identifier:
    """A quoted name (database, role, ...) to put into a statement with `compose`."""
    return sql.Identifier(name)


def literal(value: object) -> sql.Literal:
    """A quoted constant, for statements that take no parameters (COMMENT ON ... IS)."""
    return sql.Literal(value)


def compose(template: LiteralString, *parts: sql.Composable) -> sql.Composed:
    """`template` with each `{}` replaced by a part, quoted as the part says.

    >>> compose("DROP DATABASE {}", identifier("my db")).as_string()
    'DROP DATABASE "my db"'
    """
    return sql.SQL(template).format(*parts)


class Client:
    """A connection in autocommit mode (pgdyno runs DDL such as CREATE DATABASE).

    Driver errors leave it as pgdyno's own: ConnectionLost when the session is gone, else a
    QueryRefused (InsufficientPrivilege, UndefinedObject, ServerTrouble) and the session stays
    usable, as autocommit leaves no aborted transaction behind.
    """

    def __init__(self, dsn: str, password: str | None = None) -> None:
        self.dsn = dsn
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if password is not None:
            kwargs["password"] = password
        try:
            self.conn = psycopg.connect(dsn, **kwargs)
        except psycopg.OperationalError as exc:
            reason = _first_line(str(exc))
            raise ConnectionFailed(
                f"cannot connect to PostgreSQL at {describe(dsn)} ({reason}); check --dsn / PG* "
                "variables and that the server is running."
            ) from exc

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def server_version_num(self) -> int:
        """`server_version_num` as the server announced it when connecting (no query)."""
        return self.conn.info.server_version

    @property
    def host(self) -> str:
        """The host (or socket directory) the connection really went to."""
        return self.conn.info.host

    def rows(self, query: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Positional rows: for the typed functions of postgres/ only (tests/unit/
        test_postgres_layer.py keeps every other module away from it)."""
        # Queries come from pgdyno's .sql files; values always travel as parameters.
        with self._own_errors(), self.conn.cursor() as cur:
            cur.execute(query.encode(), params)
            return cur.fetchall() if cur.description else []

    def records(
        self, query: str, row: type[Row], params: Mapping[str, Any] | None = None
    ) -> list[Row]:
        """Rows as frozen records, each column passed to `row` by its name (psycopg's
        `class_row`); for the typed functions of postgres/ only."""
        with self._own_errors(), self.conn.cursor(row_factory=class_row(row)) as cur:
            cur.execute(query.encode(), params)
            return cur.fetchall() if cur.description else []

    def run(self, script: str, params: Mapping[str, Any] | None = None) -> None:
        """Run a workload's own statements (a `.sql` file of its schema or data steps) and keep
        no rows."""
        with self._own_errors(), self.conn.cursor() as cur:
            cur.execute(script.encode(), params)

    def execute(self, statement: Statement) -> None:
        """Run a statement made with `compose` (DDL, where values cannot be parameters)."""
        with self._own_errors(), self.conn.cursor() as cur:
            cur.execute(statement)

    @contextmanager
    def _own_errors(self) -> Iterator[None]:
        """A broken connection becomes ConnectionLost; a failed statement a QueryRefused, whose
        class tells a missing privilege or view from other failures."""
        try:
            yield
        except psycopg.Error as exc:
            if connection_lost(exc, self.conn.broken or self.conn.closed):
                raise ConnectionLost(
                    f"lost the connection to PostgreSQL at {describe(self.dsn)} "
                    f"({error_reason(exc)}); check that the server is still running."
                ) from exc
            raise refused(exc, describe(self.dsn)) from exc

    def server_info(self) -> ServerInfo:
        return self.records(load("server_info"), ServerInfo)[0]


@contextmanager
def connect(dsn: str, password: str | None = None) -> Iterator[Client]:
    client = Client(dsn, password)
    try:
        yield client
    finally:
        client.close()


# SQLSTATEs of a server that ended the session: admin shutdown, crash shutdown, cannot connect
# now (starting up or recovering); class 08 is a connection exception.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: psycopg.Error, broken: bool) -> bool:
    """True when `exc` means the session is gone rather than that one statement failed.

    >>> connection_lost(psycopg.errors.AdminShutdown(), False)
    True
    >>> connection_lost(psycopg.errors.DiskFull(), False), connection_lost(psycopg.Error(), True)
    (False, True)
    """
    state = exc.sqlstate or ""
    return broken or state in _SESSION_ENDED or state.startswith("08")


_PRIVILEGE = "42501"
# undefined table or view, column, function, object, schema
_UNDEFINED = frozenset({"42P01", "42703", "42883", "42704", "3F000"})
_ADVICE: dict[type[QueryRefused], str] = {
    InsufficientPrivilege: "connect as a role that has the privilege, e.g. a superuser",
    UndefinedObject: "this server's version or schema lacks it: check that pgdyno supports it",
    ServerTrouble: "check the server's log, its free disk space and memory",
    QueryRefused: "check the server's log",
}


def refusal_class(exc: psycopg.Error) -> type[QueryRefused]:
    """Which of pgdyno's errors a failed statement is.

    >>> refusal_class(psycopg.errors.InsufficientPrivilege()).__name__
    'InsufficientPrivilege'
    >>> refusal_class(psycopg.errors.UndefinedColumn()).__name__
    'UndefinedObject'
    >>> refusal_class(psycopg.errors.DiskFull()).__name__, refusal_class(psycopg.Error()).__name__
    ('ServerTrouble', 'QueryRefused')
    """
    if exc.sqlstate == _PRIVILEGE:
        return InsufficientPrivilege
    if exc.sqlstate in _UNDEFINED:
        return UndefinedObject
    # The driver's own grouping: resources, cancellation, locks, conflicts, ...
    if isinstance(exc, psycopg.OperationalError):
        return ServerTrouble
    return QueryRefused


def refused(exc: psycopg.Error, where: str) -> QueryRefused:
    """A failed statement as one of pgdyno's errors, with one sentence and the server's words."""
    kind = refusal_class(exc)
    verb = "could not run" if kind is ServerTrouble else "refused"
    return kind(
        f"PostgreSQL at {where} {verb} a statement ({error_reason(exc)}); {_ADVICE[kind]}.",
        exc.sqlstate,
        str(exc).strip(),
    )


def error_reason(exc: psycopg.Error) -> str:
    """The first line of a driver error, for a one-sentence message."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("connection failed: ").rstrip(".")
    return "no reason given"
