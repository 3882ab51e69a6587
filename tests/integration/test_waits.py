"""The wait-event sampler against a real sandbox (PostgreSQL 18): what it counts, what it leaves
out, and the profile and series it makes of a real pgbench load.

The waits are made to happen (a lock held by one session and wanted by another, a pg_sleep), so
every assertion holds on a busy host as on a quiet one.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import wait_for
from pgdyno import process
from pgdyno.collect.pgstats import PgStatsSampler
from pgdyno.collect.sampler import TimelineSampler
from pgdyno.collect.waits import SOURCE_ACTIVITY, WaitSampler
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.stats.waits import profile, second_samples

DB = "waitsdb"


@pytest.fixture(scope="module")
def bench_db(server: Sandbox, binaries: Binaries) -> Iterator[Sandbox]:
    with connect(server.conninfo()) as client:
        client.rows(f"CREATE DATABASE {DB}")
    process.run([binaries.tool("pgbench"), "-i", "-q", "-s", "1", server.conninfo(DB)],
                what="pgbench -i")  # fmt: skip
    yield server


def looks(sampler: WaitSampler, count: int) -> Counter[tuple[str, str]]:
    """`count` looks, one a second apart in the tally's clock; what they found, summed."""
    start = 1_000_000
    for i in range(count):
        sampler.look(start + i)
    found: Counter[tuple[str, str]] = Counter()
    for second in sampler.tally.counts.values():
        found.update(second)
    return found


def test_idle_sessions_and_the_sampler_itself_are_not_counted(bench_db: Sandbox) -> None:
    """The sampler's own session, an idle session and one idle in a transaction are in the
    benchmark's database and are no database time."""
    with (
        connect(bench_db.conninfo(DB)) as own,
        connect(bench_db.conninfo(DB)) as idle,
        connect(bench_db.conninfo(DB)) as in_tx,
    ):
        idle.rows("SELECT 1")
        in_tx.rows("BEGIN")
        in_tx.rows("SELECT 1")
        sampler = WaitSampler(own, DB, 10, lambda _m: None)
        assert sampler.tally.source == SOURCE_ACTIVITY and sampler.tick_hz == 10
        found = looks(sampler, 5)
        in_tx.rows("ROLLBACK")
    assert [key for key in found if key[0] == ""] == []
    assert sum(sampler.tally.ticks.values()) == 5


def _blocked(dsn: str, statement: str, errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            with connect(dsn) as client:
                client.rows(statement)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _waiting(client: Client, event: str, sessions: int = 1) -> bool:
    rows = client.rows(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event = %(event)s", {"event": event}
    )
    return int(rows[0][0]) >= sessions


def test_a_lock_wait_and_a_sleep_are_counted_under_their_names(bench_db: Sandbox) -> None:
    errors: list[BaseException] = []
    with connect(bench_db.conninfo(DB)) as holder, connect(bench_db.conninfo(DB)) as own:
        holder.rows("BEGIN")
        holder.rows("LOCK TABLE pgbench_branches IN ACCESS EXCLUSIVE MODE")
        blocked = _blocked(bench_db.conninfo(DB), "SELECT count(*) FROM pgbench_branches", errors)
        sleeper = _blocked(bench_db.conninfo(DB), "SELECT pg_sleep(30)", errors)
        elsewhere = _blocked(bench_db.conninfo("postgres"), "SELECT pg_sleep(30)", errors)
        # Both sleeps under way (the other database's too, or the looks would not show it is
        # left out, and the cancel below would miss it: a loaded host once started it late).
        assert wait_for(lambda: _waiting(own, "relation") and _waiting(own, "PgSleep", 2), 30)
        sampler = WaitSampler(own, DB, 10, lambda _m: None)
        found = looks(sampler, 4)
        holder.rows("ROLLBACK")
        own.rows("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
    for thread in (blocked, sleeper, elsewhere):
        thread.join(30)
    assert found[("", "Lock:relation")] == 4
    assert found[("", "Timeout:PgSleep")] == 4  # only the benchmark database's session
    assert len(errors) == 2  # the two sleeps, cancelled


def test_a_pgbench_load_gives_series_and_a_profile_that_adds_up(
    bench_db: Sandbox, binaries: Binaries
) -> None:
    with connect(bench_db.conninfo()) as stats_client:
        version = stats_client.server_info().version_num
        pg = PgStatsSampler(stats_client, version, DB, lambda _m: None, wait_hz=10)
        assert pg.waits is not None
        sampler = TimelineSampler(log=lambda _m: None, proc_root=Path("/proc"), pg=pg)
        sampler.start()
        with subprocess.Popen(
            [str(binaries.tool("pgbench")), "-n", "-c", "4", "-T", "4", bench_db.conninfo(DB)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ) as load:  # fmt: skip
            load.wait(60)
        time.sleep(1.1)  # a whole second after the load for the last whole-second tick
        timeline = sampler.stop()
    tally = pg.waits.tally
    assert timeline.gaps == [] and load.returncode == 0
    assert sum(tally.ticks.values()) >= 20  # 10 Hz for 5 s, whatever the host's load
    found = profile(tally.ticks, tally.counts, tally.source, tally.hz)
    assert found is not None and found.source == SOURCE_ACTIVITY and found.db_time_s > 0
    assert sum(share for _, share in found.by_type) == pytest.approx(1.0)
    assert sum(w.share for w in found.top) + found.other == pytest.approx(1.0)
    events = {w.event for w in found.top}
    assert all(e == "CPU*" or (":" in e and not e.startswith("Activity:")) for e in events)
    assert "Client:ClientRead" not in events
    series = second_samples(tally.ticks, tally.counts)
    names = {name for _, name, _ in series}
    assert names and all(n.startswith(("waits.", "waits_bg.")) for n in names)
    # one value per type seen and second looked at: no holes for the stacked chart
    assert len(series) == len(names) * len([t for t, n in tally.ticks.items() if n > 0])


def test_a_lost_connection_switches_waits_off_and_flags_the_run(bench_db: Sandbox) -> None:
    with connect(bench_db.conninfo()) as stats_client:
        version = stats_client.server_info().version_num
        pg = PgStatsSampler(stats_client, version, DB, lambda _m: None, wait_hz=10)
        sampler = TimelineSampler(log=lambda _m: None, proc_root=Path("/proc"), pg=pg)
        sampler.start()
        time.sleep(0.3)
        stats_client.close()
        time.sleep(1.5)
        timeline = sampler.stop()
    assert any(gap.startswith("wait events sampling stopped") for gap in timeline.gaps)
