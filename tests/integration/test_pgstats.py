"""The statistics sampler and the server log tail against a real sandbox (PostgreSQL 18):
which views it reads, under which names, and how it reacts when the server refuses a query or
the connection goes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import wait_for
from pgdyno import process
from pgdyno.catalogs.metrics import find
from pgdyno.collect.pgstats import PgStatsSampler, pg_sample
from pgdyno.collect.sampler import TimelineSampler
from pgdyno.errors import ConnectionLost
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.serverlog import CheckpointEvent, LogTail

PREFIXES = ("pgstat_bgwriter.", "pgstat_checkpointer.", "pgstat_wal.", "pgstat_database.",
            "pgstat_io.", "pgstat_io_rows.")  # fmt: skip
DENIED = [
    f"PostgreSQL statistics: {query} not collected (permission denied for view pg_stat_io)"
    for query in ("pgstat_io", "pgstat_io_rows")
]
ROW_COUNTERS = "pgstat_io_rows.counters."  # one key per non-zero counter: which ones varies
# The keys a superuser's snapshot had on PostgreSQL 18.6 (recorded: tests/data/pgstats/README.md).
RECORDED_18 = json.loads(
    (Path(__file__).parents[1] / "data" / "pgstats" / "pg18.json").read_text()
)["snapshots"][0]["values"]


def fixed(snapshot: dict[str, float]) -> set[str]:
    return {key for key in snapshot if not key.startswith(ROW_COUNTERS)}


def row_counters(snapshot: dict[str, float]) -> set[str]:
    return {key for key in snapshot if key.startswith(ROW_COUNTERS)}


def sampler(client: Client, notes: list[str]) -> PgStatsSampler:
    version = client.server_info().version_num
    assert version >= 180000
    return PgStatsSampler(client, version, "bench", notes.append)


def watcher_dsn(box: Sandbox) -> str:
    """A plain login role on the Unix socket (trusted there, like every role)."""
    return f"host={box.socket_dir} port={box.state().port} user=watcher dbname=postgres"


def test_snapshot_keys_and_a_write_load(box: Sandbox, binaries: Binaries):
    pgbench = binaries.tool("pgbench")
    with connect(box.conninfo()) as client:
        client.rows("CREATE DATABASE bench")
        process.run([pgbench, "-i", "-q", "-s", "1", box.conninfo("bench")], what="pgbench -i")
        notes: list[str] = []
        stats = sampler(client, notes)
        before = stats.snapshot()
        started = time.monotonic()
        process.run(
            [pgbench, "-n", "-c", "2", "-T", "2", box.conninfo("bench")], what="pgbench", timeout=60
        )
        after = stats.snapshot()
        deadline = time.monotonic() + 5  # backends flush their counters at most once a second
        while after["pgstat_database.xact_commit"] == before["pgstat_database.xact_commit"]:
            assert time.monotonic() < deadline, "the run's commits never showed"
            time.sleep(0.2)
            after = stats.snapshot()
        seconds = time.monotonic() - started
    assert notes == []
    # numbers only: no timestamp, no null
    assert fixed(before) == fixed(after) == fixed(RECORDED_18)
    assert len(fixed(before)) == 37 and all(key.startswith(PREFIXES) for key in before)
    assert row_counters(before) <= row_counters(after)
    assert ROW_COUNTERS + "client_backend.relation.normal.hits" in after
    assert all(type(value) is float for value in after.values())
    for key in ("pgstat_wal.wal_bytes", "pgstat_database.blks_hit", "pgstat_database.xact_commit"):
        assert after[key] > before[key], key
    sample = pg_sample(before, after, seconds)
    assert sample["pg.wal_bytes_per_s"] > 0
    assert sample["pg.xact_commit_per_s"] > 0
    assert 0 < sample["pg.cache_hit_pct"] <= 100
    assert all(value >= 0 for value in sample.values())


def test_a_checkpoint_is_seen_by_the_log_tail(box: Sandbox):
    tail = LogTail(box.log_file)
    tail.start()
    began = time.time()
    with connect(box.conninfo()) as client:
        client.rows("CHECKPOINT")
    ended = time.time()
    found: list[CheckpointEvent] = []
    deadline = time.monotonic() + 10
    while len(found) < 2 and time.monotonic() < deadline:
        found += tail.read_events()
        time.sleep(0.05)
    start, complete = found
    assert (start.phase, complete.phase) == ("start", "complete")
    assert start.kind == complete.kind == "checkpoint"
    assert start.reason.startswith("immediate force wait") and complete.reason == start.reason
    assert began - 1 <= start.at <= complete.at <= ended + 1
    assert complete.buffers is not None and complete.total_s is not None
    assert complete.slru_buffers is not None and complete.lsn is not None  # the 18 format
    assert tail.read_events() == []


def test_a_role_without_pg_monitor_gets_every_query(box: Sandbox):
    with connect(box.conninfo()) as admin:
        admin.rows("CREATE ROLE watcher LOGIN")
        admin.rows("CREATE DATABASE bench")
        everything = sampler(admin, []).snapshot()
    with connect(watcher_dsn(box)) as client:
        assert client.rows(
            "SELECT rolsuper, pg_has_role('watcher', 'pg_monitor', 'MEMBER') "
            "FROM pg_roles WHERE rolname = current_user"
        ) == [(False, False)]
        notes: list[str] = []
        values = sampler(client, notes).snapshot()
    # pg_stat_bgwriter, _checkpointer, _wal, _io and _database are readable by PUBLIC.
    assert notes == []
    assert fixed(values) == fixed(everything)
    assert row_counters(everything) <= row_counters(values)  # what moved since, added


def test_a_view_revoked_from_public_is_switched_off_with_one_line(box: Sandbox):
    with connect(box.conninfo()) as admin:
        admin.rows("CREATE ROLE watcher LOGIN")
        admin.rows("CREATE DATABASE bench")
        admin.rows("REVOKE SELECT ON pg_stat_io FROM PUBLIC")
        everything = sampler(admin, []).snapshot()
    with connect(watcher_dsn(box)) as client:
        notes: list[str] = []
        stats = sampler(client, notes)
        first = stats.snapshot()
        second = stats.snapshot()
    assert notes == DENIED
    io = ("pgstat_io.", "pgstat_io_rows.")
    assert set(first) == set(second) == {k for k in everything if not k.startswith(io)}
    assert any(k.startswith("pgstat_io.") for k in everything)
    assert any(k.startswith(ROW_COUNTERS) for k in everything)


def no_note(message: str) -> None:
    raise AssertionError(f"unexpected log line: {message}")


def temp_files(client: Client, dbname: str) -> float:
    values = PgStatsSampler(client, client.server_info().version_num, dbname, no_note).snapshot()
    return values["pgstat_database.temp_files"]


def test_the_database_counters_are_those_of_the_named_database(box: Sandbox):
    """A sort that spills in `bench` shows in bench's counters, not in postgres's."""
    with connect(box.conninfo()) as admin:
        admin.rows("CREATE DATABASE bench")
        assert temp_files(admin, "bench") == temp_files(admin, "postgres") == 0
        with connect(box.conninfo("bench")) as bench:
            bench.rows("SET work_mem = '64kB'")
            bench.rows("SELECT g FROM generate_series(1, 200000) AS g ORDER BY g DESC LIMIT 1")
        # The backend flushed its counters when it exited.
        assert wait_for(lambda: temp_files(admin, "bench") >= 1, timeout=5)
        assert temp_files(admin, "postgres") == 0


def test_a_database_that_is_gone_gives_no_row_no_values_and_no_log_line(box: Sandbox):
    with connect(box.conninfo()) as client:
        notes: list[str] = []
        stats = PgStatsSampler(client, client.server_info().version_num, "gone", notes.append)
        values = stats.snapshot()
    assert notes == []
    assert not any(key.startswith("pgstat_database.") for key in values)
    assert {key.split(".")[0] for key in values} == {
        "pgstat_bgwriter", "pgstat_checkpointer", "pgstat_wal", "pgstat_io", "pgstat_io_rows",
    }  # fmt: skip
    assert len(stats.queries) == 6  # nothing switched off: it may come back


def test_queries_of_another_version_are_switched_off_with_one_line_each(box: Sandbox):
    """17's files on an 18 server: pg_stat_wal lost wal_write, pg_stat_io op_bytes. PostgreSQL
    refuses the three that read them; the sampler says so once and keeps what works."""
    with connect(box.conninfo()) as client:
        notes: list[str] = []
        stats = PgStatsSampler(client, 170000, "postgres", notes.append)
        first = stats.snapshot()
        second = stats.snapshot()
    assert notes == [
        'PostgreSQL statistics: pgstat_wal not collected (column "wal_write" does not exist)',
        'PostgreSQL statistics: pgstat_io not collected (column "op_bytes" does not exist)',
        'PostgreSQL statistics: pgstat_io_rows not collected (column "op_bytes" does not exist)',
    ]
    assert stats.queries == [
        "pgstat_bgwriter_post170000", "pgstat_checkpointer_post170000", "pgstat_database",
    ]  # fmt: skip
    assert set(first) == set(second)
    assert {key.split(".")[0] for key in first} == {
        "pgstat_bgwriter", "pgstat_checkpointer", "pgstat_database",
    }  # fmt: skip


def test_a_lost_connection_is_raised_not_switched_off(box: Sandbox):
    with connect(box.conninfo()) as admin, connect(box.conninfo()) as client:
        notes: list[str] = []
        stats = sampler(client, notes)
        assert stats.snapshot()
        ((pid,),) = client.rows("SELECT pg_backend_pid()")
        assert admin.rows("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid}) == [(True,)]
        with pytest.raises(ConnectionLost, match="terminating connection due to administrator"):
            stats.snapshot()
    assert notes == [] and len(stats.queries) == 6  # nothing switched off


def last_statement(admin: Client, pid: int) -> str:
    """What the session of backend `pid` ran last, as the server saw it (its first 1 kB)."""
    ((query,),) = admin.rows("SELECT query FROM pg_stat_activity WHERE pid = %(pid)s", {"pid": pid})
    return str(query)


def backend_pid(client: Client) -> int:
    return int(client.rows("SELECT pg_backend_pid()")[0][0])


def prepared(client: Client) -> list[str]:
    """The statements psycopg prepared in this session (it does once one has run 5 times)."""
    return [str(row[0]) for row in client.rows("SELECT statement FROM pg_prepared_statements")]


def test_a_snapshot_is_one_statement_prepared_after_a_few_ticks(box: Sandbox):
    """One round trip a second, planned once: the cheapest way to ask the server."""
    with connect(box.conninfo()) as admin, connect(box.conninfo()) as client:
        admin.rows("CREATE DATABASE bench")
        stats, pid = sampler(client, []), backend_pid(client)
        first = stats.snapshot()
        statement = last_statement(admin, pid)
        assert prepared(client) == []
        for _ in range(5):
            stats.snapshot()
        (once,) = prepared(client)
    assert statement.startswith("SELECT jsonb_build_object(\n'pgstat_bgwriter_post170000', ")
    assert fixed(first) == fixed(RECORDED_18)
    assert [query for query in stats.queries if f"'{query}'" in once] == stats.queries
    assert len(stats.queries) == 6


def test_after_a_refused_query_the_rest_is_still_one_statement(box: Sandbox):
    with connect(box.conninfo()) as admin, connect(box.conninfo()) as client:
        notes: list[str] = []
        stats, pid = PgStatsSampler(client, 170000, "postgres", notes.append), backend_pid(client)
        stats.snapshot()  # the combined statement fails: each query alone finds the culprits
        assert not last_statement(admin, pid).startswith("SELECT jsonb_build_object(")
        for _ in range(6):
            values = stats.snapshot()
        (once,) = prepared(client)
    assert len(notes) == 3
    assert once.startswith("SELECT jsonb_build_object(")
    assert "'pgstat_wal_pre180000'" not in once and "'pgstat_io_post160000'" not in once
    assert "'pgstat_io_rows_post160000'" not in once
    assert [query for query in stats.queries if f"'{query}'" in once] == stats.queries
    assert {key.split(".")[0] for key in values} == {
        "pgstat_bgwriter", "pgstat_checkpointer", "pgstat_database",
    }  # fmt: skip


def test_a_pgbench_run_timeline_holds_the_client_backends_io(box: Sandbox, binaries: Binaries):
    """The sampler thread, a real server and pgbench: pg_stat_io's rows join the timeline, each
    io.* series a catalog metric that moved during the run."""
    pgbench = binaries.tool("pgbench")
    with connect(box.conninfo()) as admin:
        admin.rows("CREATE DATABASE bench")
    process.run([pgbench, "-i", "-q", "-s", "2", box.conninfo("bench")], what="pgbench -i")
    notes: list[str] = []
    with connect(box.conninfo()) as client:
        timeline = TimelineSampler(
            log=notes.append, proc_root=Path("/proc"), pg=sampler(client, notes)
        )
        timeline.start()
        try:
            process.run(
                [pgbench, "-n", "-c", "2", "-T", "3", box.conninfo("bench")],
                what="pgbench",
                timeout=60,
            )
            time.sleep(2.5)  # backends flush their counters; the sampler ticks past them
        finally:
            samples = timeline.stop().samples
    assert notes == []
    io: dict[str, list[float]] = {}
    for _, name, value in samples:
        if name.startswith("io."):
            io.setdefault(name, []).append(value)
    assert max(io["io.client_backend.relation.normal.hits_per_s"]) > 0
    assert sorted(name for name in io if find(name) is None) == []
    assert all(any(v != 0 for v in values) for values in io.values())  # idle ones left out
    assert all(v >= 0 for values in io.values() for v in values)
