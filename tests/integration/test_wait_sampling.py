"""pg_wait_sampling's profile read by collect/waits.py from a real server that loads it
(`wait_sampling_server`: Debian's packaged PostgreSQL and postgresql-<major>-pg-wait-sampling),
whatever the extension's version: what it finds of the extension, and a session held on a row
lock filed as the benchmark database's client backend waiting on Lock:transactionid.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from conftest import wait_for
from debian_cluster import WAIT_SAMPLING, DebianCluster
from pgdyno.collect.waits import (
    SOURCE_EXTENSION,
    Key,
    ProfileReader,
    WaitTally,
    check_extension,
)
from pgdyno.postgres.client import Client, connect

DB = "postgres"  # the database the sessions and the reader are on


@pytest.fixture
def created(wait_sampling_server: DebianCluster) -> Iterator[DebianCluster]:
    """The extension created in DB, and a table of one row; both dropped after."""
    server = wait_sampling_server
    server.psql(f"CREATE EXTENSION IF NOT EXISTS {WAIT_SAMPLING}")
    server.psql("CREATE TABLE held (id int); INSERT INTO held VALUES (1)")
    try:
        yield server
    finally:
        server.psql("DROP TABLE IF EXISTS held")
        server.psql(f"DROP EXTENSION IF EXISTS {WAIT_SAMPLING}")


def test_what_is_found_of_the_extension(wait_sampling_server: DebianCluster) -> None:
    server = wait_sampling_server
    server.psql(f"DROP EXTENSION IF EXISTS {WAIT_SAMPLING}")
    with connect(server.peer_dsn("root")) as client:
        loaded = check_extension(client)
        server.psql(f"CREATE EXTENSION {WAIT_SAMPLING}")
        try:
            usable = check_extension(client)
        finally:
            server.psql(f"DROP EXTENSION {WAIT_SAMPLING}")
    assert loaded is not None and usable is not None
    assert (loaded.dbname, loaded.created, loaded.period_ms) == (DB, False, 10.0)
    assert loaded.period_s is None and "not created in database postgres" in str(loaded.problem())
    assert (usable.created, usable.period_ms, usable.profile_pid) == (True, 10.0, True)
    sample_cpu = server.psql(f"SELECT current_setting('{WAIT_SAMPLING}.sample_cpu', true)")
    if sample_cpu.strip() == "":  # a version without the setting: it never samples CPU
        assert usable.sample_cpu is None and usable.period_s is None
        assert "does not sample sessions on CPU" in str(usable.problem())
    else:
        assert usable.sample_cpu is (sample_cpu.strip() == "on")


@contextmanager
def hold_a_row(server: DebianCluster) -> Iterator[int]:
    """A session holding the row of `held` and another waiting for it; yields the waiter's
    process id, rolls both back after."""
    dsn = server.peer_dsn("root")
    with psycopg.connect(dsn) as holder, psycopg.connect(dsn, autocommit=True) as waiter:
        holder.execute("UPDATE held SET id = id")  # an open transaction: the row stays locked
        waiter_pid = waiter.info.backend_pid
        blocked = threading.Thread(target=waiter.execute, args=("UPDATE held SET id = id",))
        blocked.start()
        try:
            yield waiter_pid
        finally:
            holder.rollback()
            blocked.join(timeout=60)
    assert not blocked.is_alive()


def test_a_session_waiting_on_a_row_lock_is_filed_under_its_wait(created: DebianCluster) -> None:
    server = created
    with hold_a_row(server) as waiter, connect(server.peer_dsn("root")) as client:
        assert wait_for(lambda: _waiting(client, waiter) == ("Lock", "transactionid"), 30)
        tally = WaitTally(SOURCE_EXTENSION, 100.0)
        reader = ProfileReader(client, DB, 0.01, tally)
        reader.read(time.time())
        # The collector samples every 10 ms: wait until a read has seen the wait grow.
        assert wait_for(lambda: _read(reader)[("", "Lock:transactionid")] > 0, 30), tally
    found = _summed(tally)
    assert sum(tally.ticks.values()) > 0
    # The holder waits for its client (idle in transaction): left out, as are the
    # background processes resting in their main loop and the extension's collector.
    assert not any(event == "Client:ClientRead" for _process, event in found), found
    assert not any(event.startswith("Activity:") for _process, event in found), found
    assert not any(WAIT_SAMPLING in process for process, _event in found), found


def _waiting(client: Client, pid: int) -> tuple[str, str] | None:
    rows = client.rows(
        "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = %(pid)s",
        {"pid": pid},
    )
    return (rows[0][0], rows[0][1]) if rows else None


def _read(reader: ProfileReader) -> Counter[Key]:
    reader.read(time.time())
    return _summed(reader.tally)


def _summed(tally: WaitTally) -> Counter[Key]:
    total: Counter[Key] = Counter()
    for counts in tally.counts.values():
        total.update(counts)
    return total
