"""The typed functions of postgres/ on a real server of every supported major (14 to 18): each
returns its frozen record with the values the server has, read back through psycopg's
`class_row` (a column the record lacks, or a record field the query lacks, fails here).

One sandbox per major, shared by the tests of that major (each puts back what it changes).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from conftest import sandbox_of_its_own
from pgdyno.collect.pgstats import queries_for
from pgdyno.errors import QueryRefused
from pgdyno.postgres import databases, server, stats
from pgdyno.postgres.binaries import resolve
from pgdyno.postgres.client import ServerInfo, connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import auto_conf_settings, pgdyno_databases
from pgdyno.postgres.settings import load_settings_meta
from pgdyno.postgres.stats import alone, combined, json_row

MAJORS = (14, 15, 16, 17, 18)


def frozen(record: object) -> bool:
    params = getattr(type(record), "__dataclass_params__", None)
    return dataclasses.is_dataclass(record) and params is not None and params.frozen


@pytest.fixture(scope="module", params=MAJORS, ids=[f"pg{m}" for m in MAJORS])
def major_box(request: pytest.FixtureRequest, cache_dir: Path) -> Iterator[Sandbox]:
    with sandbox_of_its_own(cache_dir, resolve(None, request.param, cache_dir)) as box:
        yield box


def test_server_facts_and_effective_settings(major_box: Sandbox):
    with connect(major_box.conninfo()) as client:
        info = client.server_info()
        found = server.effective_settings(client, ["shared_buffers", "DATESTYLE", "no_such"])
        every = server.effective_settings(client)
        non_default = server.non_default_settings(client)
        meta = load_settings_meta(client)
    assert isinstance(info, ServerInfo) and frozen(info)
    assert info.version_num // 10000 == int(info.version.split(".")[0]) == client_major(info)
    assert info.shared_buffers_bytes == 128 * 1024 * 1024 and type(info.shared_buffers_bytes) is int
    assert info.is_superuser is True and info.data_directory is not None
    assert Path(info.data_directory).resolve() == major_box.data_dir.resolve()
    assert sorted(found) == ["DateStyle", "shared_buffers"]  # pg_settings' own spelling
    buffers = found["shared_buffers"]
    assert frozen(buffers)
    assert (buffers.setting, buffers.shown, buffers.unit) == ("16384", "128MB", "8kB")
    assert (buffers.vartype, buffers.context) == ("integer", "postmaster")
    # the built-in default as these servers report it: 1024 buffers on 14, 16384 from 15
    assert buffers.boot_val == ("1024" if info.version_num < 150000 else "16384")
    assert buffers.pending_restart is False and buffers.source == "configuration file"
    assert every.keys() == meta.keys()  # every setting the role sees, as the metadata reader
    kept = {n for n, s in every.items() if s.source not in ("default", "override")}
    assert non_default.keys() == kept
    assert non_default["port"] == f"{major_box.state().port}"


def client_major(info: ServerInfo) -> int:
    return info.version_num // 10000


def test_reload_and_wait_and_the_file_errors(major_box: Sandbox):
    dsn = major_box.conninfo()
    with connect(dsn) as client:
        before = server.server_clock(client)
        assert isinstance(before, datetime) and before.tzinfo is not None
        server.alter_system_entry(client, "work_mem", "8MB")
        server.alter_system_entry(client, "shared_buffers", "256MB")  # waits for a restart
    server.reloaded(dsn, None, "the sandbox")
    with connect(dsn) as client:
        assert server.conf_loaded_since(client, before) is True
        found = server.effective_settings(client, ["work_mem", "shared_buffers"])
        errors = server.file_errors(client)
        entries = {e.name: e for e in auto_conf_settings(client)}
        for name in ("work_mem", "shared_buffers"):
            server.alter_system_entry(client, name, None)
    server.reloaded(dsn, None, "the sandbox")
    assert found["work_mem"].shown == "8MB" and found["work_mem"].pending_restart is False
    assert found["shared_buffers"].pending_restart is True
    assert found["shared_buffers"].shown == "128MB"  # the running value until a restart
    (refused,) = [e for e in errors if e.name == "shared_buffers"]
    assert frozen(refused) and refused.setting == "256MB"
    assert refused.error == "setting could not be applied"
    assert entries["work_mem"].setting == "8MB" and entries["work_mem"].applied is True
    assert frozen(entries["work_mem"])


def test_sessions_marker_and_cancel(major_box: Sandbox):
    with connect(major_box.conninfo()) as client, connect(major_box.conninfo()) as other:
        assert server.custom_setting(client, "pgdyno.changed_by") is None
        server.set_placeholder(client, "pgdyno.changed_by")
        assert server.custom_setting(client, "pgdyno.changed_by") == ""
        pid = server.backend_pid(other)
        assert isinstance(pid, int) and pid != server.backend_pid(client)
        server.ping(other)
        failure: list[BaseException] = []

        def sleep() -> None:
            try:
                other.run("SELECT pg_sleep(60)")
            except QueryRefused as exc:
                failure.append(exc)

        sleeper = threading.Thread(target=sleep)
        sleeper.start()
        deadline = time.monotonic() + 30
        while not any(
            look.event == "Timeout:PgSleep" for look in stats.wait_sample(client, "postgres")
        ):
            assert time.monotonic() < deadline, "the sleeping session never showed"
            time.sleep(0.05)
        server.cancel_backends(client, [pid])
        sleeper.join(30)
        sessions = stats.client_sessions(client, "postgres")
    assert not sleeper.is_alive() and sessions == 1  # `other`, idle again
    assert len(failure) == 1 and failure[0].sqlstate == "57014"  # query_canceled


def test_databases_templates_and_statistics(major_box: Sandbox):
    name = "pgdyno_tpl_s7"
    with connect(major_box.conninfo()) as client:
        databases.create_database(client, name)
        databases.comment_on_database(client, name, "pgdyno dataset v1 scale=7 init=dtgvp ready")
        templates = databases.templates(client)
        size = databases.database_size(client, name)
        comment = databases.database_comment(client, name)
        assert databases.database_comment(client, "no_such_db") is None
        # Each statement above was a transaction; PostgreSQL 14's statistics collector hears of
        # them over UDP a moment later (reads in autocommit see each new report): wait for it.
        xacts, deadline = stats.database_xacts(client, "postgres"), time.monotonic() + 30
        while not xacts:
            assert time.monotonic() < deadline, "no transaction of database postgres counted"
            time.sleep(0.1)
            xacts = stats.database_xacts(client, "postgres")
        assert stats.database_xacts(client, "no_such_db") is None
        listed = pgdyno_databases(client)
        version = client.server_info().version_num
        snapshot = json_row(client, combined(queries_for(version)), "postgres")
        each = {q: json_row(client, alone(q), "postgres") for q in queries_for(version)}
        check = stats.wait_sampling_check(client)
        databases.drop_database(client, name)
    with connect(major_box.conninfo()) as client:
        assert databases.has_extension(client, "plpgsql") is True
        assert databases.has_extension(client, "pg_prewarm") is False
    (template,) = templates
    assert frozen(template) and template.datname == name and template.size_bytes == size > 0
    assert comment == template.marker and comment.endswith(" ready")
    assert isinstance(xacts, int) and xacts > 0
    assert [d.name for d in listed] == [name]
    assert sorted(snapshot) == sorted(queries_for(version)) == sorted(each)
    assert all(isinstance(row, dict) and row for row in each.values())
    assert check is not None and frozen(check) and check.dbname == "postgres"
    assert check.created is False and check.period_ms is None
