"""The PostgreSQL client turns the driver's errors into pgdyno's own, against a real sandbox
(PostgreSQL 18): a refused statement, a missing privilege, a name of another version, a server
that cannot run a statement, a terminated session and a stopped server."""

from __future__ import annotations

import ast
from pathlib import Path

import psycopg
import pytest

import pgdyno
from conftest import plain_role
from pgdyno.errors import (
    ConnectionFailed,
    ConnectionLost,
    InsufficientPrivilege,
    QueryRefused,
    ServerTrouble,
    UndefinedObject,
)
from pgdyno.postgres.client import Client, compose, connect, describe, identifier
from pgdyno.postgres.cluster import Sandbox


def refusal(client: Client, query: str) -> QueryRefused:
    with pytest.raises(QueryRefused) as caught:
        client.rows(query)
    assert not isinstance(caught.value, psycopg.Error)  # nothing of the driver leaks out
    assert client.rows("SELECT 1") == [(1,)]  # the session is still usable
    return caught.value


def test_a_syntax_error_is_a_refused_query_with_the_servers_words(box: Sandbox):
    with connect(box.conninfo()) as client:
        exc = refusal(client, "SELEC 1")
    assert type(exc) is QueryRefused
    assert exc.sqlstate == "42601"
    assert exc.reason == 'syntax error at or near "SELEC"'
    assert str(exc) == (
        f"PostgreSQL at {describe(box.conninfo())} refused a statement "
        '(syntax error at or near "SELEC"); check the server\'s log.'
    )
    assert "\n" not in str(exc)


def test_a_plain_role_gets_insufficient_privilege(box: Sandbox):
    with connect(plain_role(box, "plain")) as client:
        with pytest.raises(InsufficientPrivilege) as caught:
            client.execute(compose("CREATE DATABASE {}", identifier("not_mine")))
        assert client.rows("SELECT 1") == [(1,)]
        checkpoint = refusal(client, "CHECKPOINT")  # superuser or pg_checkpoint only
    exc = caught.value
    assert exc.sqlstate == "42501"
    assert exc.reason == "permission denied to create database"
    assert str(exc).endswith(
        "(permission denied to create database); connect as a role that has the privilege, "
        "e.g. a superuser."
    )
    assert isinstance(checkpoint, InsufficientPrivilege)
    assert checkpoint.reason.startswith("permission denied to execute CHECKPOINT")


def test_a_column_or_view_of_another_version_is_an_undefined_object(box: Sandbox):
    with connect(box.conninfo()) as client:
        column = refusal(client, "SELECT wal_write FROM pg_stat_wal")  # gone in 18
        view = refusal(client, "SELECT * FROM pg_stat_no_such_view")
    assert isinstance(column, UndefinedObject) and isinstance(view, UndefinedObject)
    assert (column.sqlstate, view.sqlstate) == ("42703", "42P01")
    assert column.reason == 'column "wal_write" does not exist'
    assert view.reason.startswith('relation "pg_stat_no_such_view" does not exist')


def test_a_cancelled_statement_is_server_trouble_and_the_session_stays(box: Sandbox):
    with connect(box.conninfo()) as client:
        client.rows("SET statement_timeout = '50ms'")
        exc = refusal(client, "SELECT pg_sleep(5)")
    assert isinstance(exc, ServerTrouble)
    assert exc.sqlstate == "57014"
    assert exc.reason == "canceling statement due to statement timeout"
    assert " could not run a statement " in str(exc)


def test_a_terminated_session_is_a_lost_connection(box: Sandbox):
    with connect(box.conninfo()) as admin, connect(box.conninfo()) as client:
        ((pid,),) = client.rows("SELECT pg_backend_pid()")
        assert admin.rows("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid}) == [(True,)]
        with pytest.raises(ConnectionLost) as caught:
            client.rows("SELECT 1")
        with pytest.raises(ConnectionLost):  # and stays lost
            client.execute(compose("CHECKPOINT"))
    exc = caught.value
    assert isinstance(exc, ConnectionFailed) and not isinstance(exc, QueryRefused)
    assert str(exc) == (
        f"lost the connection to PostgreSQL at {describe(box.conninfo())} (terminating "
        "connection due to administrator command); check that the server is still running."
    )


def test_a_stopped_server_is_a_lost_connection(box: Sandbox):
    with connect(box.conninfo()) as client:
        assert client.rows("SELECT 1") == [(1,)]
        assert box.stop()
        with pytest.raises(ConnectionLost, match="check that the server is still running"):
            client.rows("SELECT 1")


def test_only_the_postgres_package_imports_the_driver():
    """One owner of psycopg: a module elsewhere that imports it would catch the driver's errors
    itself instead of pgdyno's."""
    package = Path(pgdyno.__file__).parent
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name.split(".")[0] == "psycopg" for name in names):
                importers.add(path.relative_to(package).parts[0])
    assert importers == {"postgres"}
