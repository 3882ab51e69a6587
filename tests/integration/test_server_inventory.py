"""The doctor's server facts against a real sandbox (PostgreSQL 18), as a superuser and as a
role with LOGIN only."""

from __future__ import annotations

import json
from datetime import datetime
from importlib.resources import files
from pathlib import Path

from psycopg import pq

from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.inventory import is_local, queries_for, read_server

CACHE = {"blks_hit", "blks_read", "temp_files", "temp_bytes", "deadlocks"}
SETTING = {"setting", "unit", "vartype", "source", "sourcefile", "sourceline", "pending_restart",
           "context", "boot_val", "min_val", "max_val", "enumvals"}  # fmt: skip


def watcher_dsn(box: Sandbox) -> str:
    """A role with LOGIN only, on the Unix socket (trusted there, like every role)."""
    return f"host={box.socket_dir} port={box.state().port} user=watcher dbname=postgres"


def assert_usable(client: Client) -> None:
    """No aborted transaction left behind: the next statement runs."""
    assert client.conn.info.transaction_status == pq.TransactionStatus.IDLE
    assert client.rows("SELECT 1") == [(1,)]


def test_a_superuser_reads_every_field(box: Sandbox):
    with connect(box.conninfo()) as client:
        server, unread = read_server(client, box.conninfo())
        assert_usable(client)
    assert unread == {}
    assert json.loads(json.dumps(server)) == server  # plain JSON types only
    assert server["version_num"] >= 180000 and server["version"].startswith("18")
    assert server["is_superuser"] is True
    assert server["local"] is True

    settings = server["settings"]
    shared = settings["shared_buffers"]
    assert set(shared) == SETTING
    assert shared["unit"] == "8kB" and shared["vartype"] == "integer"
    assert shared["context"] == "postmaster" and shared["setting"].isdigit()
    assert shared["source"] == "configuration file"
    assert shared["sourcefile"].endswith(".conf") and isinstance(shared["sourceline"], int)
    assert shared["pending_restart"] is False
    assert settings["shared_memory_size_in_huge_pages"]["context"] == "internal"
    assert "huge_pages_status" in settings
    assert Path(settings["data_directory"]["setting"]).resolve() == box.data_dir.resolve()

    sizes = {db["name"]: db["bytes"] for db in server["databases"]}
    assert sizes["postgres"] > 0 and "template1" in sizes and "template0" not in sizes

    checkpoints = server["checkpoints"]
    assert isinstance(checkpoints["timed"], int) and isinstance(checkpoints["requested"], int)
    assert checkpoints["stats_reset"] is None or datetime.fromisoformat(checkpoints["stats_reset"])

    connections = server["connections"]
    assert connections["total"] >= connections["active"] >= 1  # the audit's own session
    assert connections["idle_in_transaction"] == 0

    assert set(server["cache"]) == CACHE
    assert all(isinstance(value, int) for value in server["cache"].values())
    assert server["cache"]["blks_hit"] > 0


def test_a_login_only_role_reads_what_it_may_and_says_what_it_may_not(box: Sandbox):
    with connect(box.conninfo()) as admin:
        admin.rows("CREATE ROLE watcher LOGIN")
    with connect(watcher_dsn(box)) as client:
        assert client.rows(
            "SELECT rolsuper, pg_has_role('watcher', 'pg_monitor', 'MEMBER') "
            "FROM pg_roles WHERE rolname = current_user"
        ) == [(False, False)]
        server, unread = read_server(client, watcher_dsn(box))
        assert_usable(client)
    assert json.loads(json.dumps(server)) == server
    assert set(unread) == {
        "server.settings.sourcefile",
        "server.settings.data_directory",
        "server.connections",
    }
    assert "pg_read_all_settings" in unread["server.settings.sourcefile"]
    assert "pg_read_all_stats" in unread["server.connections"]
    assert server["version_num"] >= 180000 and server["is_superuser"] is False

    settings = server["settings"]
    assert settings["shared_buffers"]["unit"] == "8kB"
    assert settings["shared_buffers"]["source"] == "configuration file"
    assert all(row["sourcefile"] is None and row["sourceline"] is None for row in settings.values())
    assert "data_directory" not in settings  # superuser-only: not a row at all
    assert server["local"] is False  # so the data directory cannot be placed here

    assert server["connections"] is None
    assert {db["name"] for db in server["databases"]} >= {"postgres", "template1"}
    assert all(db["bytes"] > 0 for db in server["databases"])
    assert isinstance(server["checkpoints"]["timed"], int)
    assert set(server["cache"]) == CACHE


def test_a_refused_query_leaves_one_field_out_and_the_connection_usable(box: Sandbox):
    with connect(box.conninfo()) as admin:
        admin.rows("CREATE ROLE watcher LOGIN")
        admin.rows("CREATE DATABASE private")
        admin.rows("REVOKE CONNECT ON DATABASE private FROM PUBLIC")
        admin.rows("REVOKE SELECT ON pg_stat_checkpointer FROM PUBLIC")
        everything, _ = read_server(admin, box.conninfo())
    with connect(watcher_dsn(box)) as client:
        server, unread = read_server(client, watcher_dsn(box))
        assert_usable(client)
    assert server["checkpoints"] is None
    assert unread["server.checkpoints"] == (
        "the checkpoint counters could not be read: permission denied for view "
        "pg_stat_checkpointer (a superuser can read it)."
    )
    assert set(server["cache"]) == CACHE  # read after the refused query
    assert "private" in {db["name"] for db in everything["databases"]}
    assert "private" not in {db["name"] for db in server["databases"]}
    assert "private" in unread["server.databases"] and "CONNECT" in unread["server.databases"]


def test_is_local(tmp_path: Path):
    here = str(tmp_path)
    assert is_local(f"host={tmp_path} port=5432", here)
    assert is_local("", here)  # libpq's default socket
    assert is_local("host=localhost port=5433", here)
    assert is_local("postgresql://127.0.0.1:5432/x", here)
    assert not is_local("host=db.example.com", here)  # a path that happens to exist here
    assert not is_local("host=10.1.2.3", here)
    assert not is_local("host=localhost hostaddr=10.1.2.3", here)
    assert not is_local(f"host={tmp_path}", str(tmp_path / "missing"))
    assert not is_local(f"host={tmp_path}", None)


def test_every_doctor_query_file_is_used():
    folder = files("pgdyno.postgres.queries")
    on_disk = {
        entry.name.removesuffix(".sql")
        for entry in folder.iterdir()
        if entry.name.startswith("doctor_") and entry.name.endswith(".sql")
    }
    used = {name for version in range(140000, 190000, 10000)
            for name in queries_for(version).values()}  # fmt: skip
    assert used == on_disk
