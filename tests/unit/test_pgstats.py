"""PostgreSQL statistics, the pure part: which query files on which version, and the metrics of
recorded snapshot pairs of PostgreSQL 14 to 18 (tests/data/pgstats). The sampler itself (keys,
the database parameter, refused queries, a lost connection) is tested against a real server in
tests/integration/test_pgstats.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgdyno.collect.pgstats import pg_sample, queries_for
from pgdyno.postgres.queries import load

DATA = Path(__file__).parent.parent / "data" / "pgstats"
VERSIONS = [14, 15, 16, 17, 18]

METRICS = {
    "pg.checkpoints_timed", "pg.checkpoints_requested", "pg.buffers_checkpoint_per_s",
    "pg.buffers_bgwriter_per_s", "pg.buffers_backend_per_s", "pg.buffers_alloc_per_s",
    "pg.wal_bytes_per_s", "pg.wal_records_per_s", "pg.wal_fpi_per_s", "pg.wal_buffers_full",
    "pg.blks_hit_per_s", "pg.blks_read_per_s", "pg.cache_hit_pct", "pg.temp_files",
    "pg.temp_bytes_per_s", "pg.deadlocks", "pg.xact_commit_per_s", "pg.xact_rollback_per_s",
}  # fmt: skip


def recorded(major: int) -> tuple[dict[str, Any], dict[str, float], dict[str, float], float]:
    doc = json.loads((DATA / f"pg{major}.json").read_text())
    first, second = doc["snapshots"]
    return doc, first["values"], second["values"], second["at"] - first["at"]


# -- which queries on which version ------------------------------------------------------------


@pytest.mark.parametrize(
    ("version_num", "expected"),
    [
        (140023, ["pgstat_bgwriter_pre170000", "pgstat_checkpointer_pre170000",
                  "pgstat_wal_pre180000", "pgstat_database"]),
        (150019, ["pgstat_bgwriter_pre170000", "pgstat_checkpointer_pre170000",
                  "pgstat_wal_pre180000", "pgstat_database"]),
        (160000, ["pgstat_bgwriter_pre170000", "pgstat_checkpointer_pre170000",
                  "pgstat_wal_pre180000", "pgstat_database", "pgstat_io_post160000",
                  "pgstat_io_rows_post160000"]),
        (170011, ["pgstat_bgwriter_post170000", "pgstat_checkpointer_post170000",
                  "pgstat_wal_pre180000", "pgstat_database", "pgstat_io_post160000",
                  "pgstat_io_rows_post160000"]),
        (180000, ["pgstat_bgwriter_post170000", "pgstat_checkpointer_post170000",
                  "pgstat_wal_post180000", "pgstat_database", "pgstat_io_post180000",
                  "pgstat_io_rows_post180000"]),
    ],
)  # fmt: skip
def test_queries_for(version_num, expected):
    assert queries_for(version_num) == expected
    for name in expected:
        assert load(name).lstrip().startswith(("SELECT", "--", "WITH"))


# -- the recorded snapshots ------------------------------------------------------------------

COMMON = {
    "pgstat_bgwriter.buffers_clean", "pgstat_bgwriter.maxwritten_clean",
    "pgstat_bgwriter.buffers_alloc",
    "pgstat_checkpointer.num_timed", "pgstat_checkpointer.num_requested",
    "pgstat_checkpointer.write_time", "pgstat_checkpointer.sync_time",
    "pgstat_checkpointer.buffers_written",
    "pgstat_wal.wal_records", "pgstat_wal.wal_fpi", "pgstat_wal.wal_bytes",
    "pgstat_wal.wal_buffers_full",
    "pgstat_database.xact_commit", "pgstat_database.xact_rollback",
    "pgstat_database.blks_read", "pgstat_database.blks_hit", "pgstat_database.temp_files",
    "pgstat_database.temp_bytes", "pgstat_database.deadlocks",
}  # fmt: skip
BGWRITER_BACKEND = {"pgstat_bgwriter.buffers_backend", "pgstat_bgwriter.buffers_backend_fsync"}
RESTARTPOINTS = {
    "pgstat_checkpointer.restartpoints_timed", "pgstat_checkpointer.restartpoints_req",
    "pgstat_checkpointer.restartpoints_done",
}  # fmt: skip
WAL_IO = {
    "pgstat_wal.wal_write", "pgstat_wal.wal_sync", "pgstat_wal.wal_write_time",
    "pgstat_wal.wal_sync_time",
}  # fmt: skip
IO = {
    "pgstat_io.checkpointer_write_bytes", "pgstat_io.checkpointer_buffers",
    "pgstat_io.checkpointer_fsyncs", "pgstat_io.bgwriter_write_bytes",
    "pgstat_io.bgwriter_buffers", "pgstat_io.backend_write_bytes", "pgstat_io.backend_buffers",
    "pgstat_io.backend_extend_bytes", "pgstat_io.backend_fsyncs", "pgstat_io.client_read_bytes",
    "pgstat_io.client_hits",
}  # fmt: skip
IO_WAL = {"pgstat_io.wal_writes", "pgstat_io.wal_write_bytes", "pgstat_io.wal_fsyncs"}
IO_ROWS = {"pgstat_io_rows.rows"}  # + one key per non-zero counter: tests/unit/test_pgstat_io.py
KEYS = {
    14: COMMON | BGWRITER_BACKEND | WAL_IO,
    15: COMMON | BGWRITER_BACKEND | WAL_IO,
    16: COMMON | BGWRITER_BACKEND | WAL_IO | IO | IO_ROWS,
    17: COMMON | RESTARTPOINTS | WAL_IO | IO | IO_ROWS,
    18: COMMON | RESTARTPOINTS | IO | IO_WAL | IO_ROWS,
}
ROW_COUNTERS = "pgstat_io_rows.counters."


def fixed_keys(snapshot: dict[str, float]) -> set[str]:
    return {key for key in snapshot if not key.startswith(ROW_COUNTERS)}


@pytest.mark.parametrize("major", VERSIONS)
def test_recorded_snapshots_hold_the_columns_of_their_version(major):
    doc, prev, cur, seconds = recorded(major)
    assert doc["version_num"] // 10000 == major
    assert doc["log"] == []  # a superuser: nothing was switched off
    assert fixed_keys(prev) == fixed_keys(cur) == KEYS[major]
    assert any(key.startswith(ROW_COUNTERS) for key in cur) == (major >= 16)
    assert 3 < seconds < 15


def by_hand(prev: dict[str, float], cur: dict[str, float], s: float, major: int) -> dict:
    def d(key: str) -> float:
        return cur[key] - prev[key]

    backend = "pgstat_io.backend_buffers" if major >= 16 else "pgstat_bgwriter.buffers_backend"
    hit, read = d("pgstat_database.blks_hit"), d("pgstat_database.blks_read")
    return {
        "pg.checkpoints_timed": d("pgstat_checkpointer.num_timed"),
        "pg.checkpoints_requested": d("pgstat_checkpointer.num_requested"),
        "pg.buffers_checkpoint_per_s": d("pgstat_checkpointer.buffers_written") / s,
        "pg.buffers_bgwriter_per_s": d("pgstat_bgwriter.buffers_clean") / s,
        "pg.buffers_backend_per_s": d(backend) / s,
        "pg.buffers_alloc_per_s": d("pgstat_bgwriter.buffers_alloc") / s,
        "pg.wal_bytes_per_s": d("pgstat_wal.wal_bytes") / s,
        "pg.wal_records_per_s": d("pgstat_wal.wal_records") / s,
        "pg.wal_fpi_per_s": d("pgstat_wal.wal_fpi") / s,
        "pg.wal_buffers_full": d("pgstat_wal.wal_buffers_full"),
        "pg.blks_hit_per_s": hit / s,
        "pg.blks_read_per_s": read / s,
        "pg.cache_hit_pct": 100 * hit / (hit + read),
        "pg.temp_files": d("pgstat_database.temp_files"),
        "pg.temp_bytes_per_s": d("pgstat_database.temp_bytes") / s,
        "pg.deadlocks": d("pgstat_database.deadlocks"),
        "pg.xact_commit_per_s": d("pgstat_database.xact_commit") / s,
        "pg.xact_rollback_per_s": d("pgstat_database.xact_rollback") / s,
    }


@pytest.mark.parametrize("major", VERSIONS)
def test_metrics_of_a_recorded_pair_are_the_deltas(major):
    _doc, prev, cur, seconds = recorded(major)
    sample = pg_sample(prev, cur, seconds)
    pg = {name: value for name, value in sample.items() if not name.startswith("io.")}
    assert set(pg) == METRICS
    assert pg == pytest.approx(by_hand(prev, cur, seconds, major))
    # what a 5-second tpcb-like run with max_wal_size = 32MB does
    assert sample["pg.xact_commit_per_s"] > 100
    assert sample["pg.wal_bytes_per_s"] > 1_000_000
    assert sample["pg.checkpoints_requested"] >= 1
    assert sample["pg.buffers_checkpoint_per_s"] > 0
    assert 50 < sample["pg.cache_hit_pct"] < 100


def test_backend_writes_come_from_pg_stat_io_where_there_is_one():
    """On 16 both sources exist; buffers_backend also counts relation extensions."""
    _doc, prev, cur, seconds = recorded(16)
    io = cur["pgstat_io.backend_buffers"] - prev["pgstat_io.backend_buffers"]
    assert pg_sample(prev, cur, seconds)["pg.buffers_backend_per_s"] == io / seconds
    old = cur["pgstat_bgwriter.buffers_backend"] - prev["pgstat_bgwriter.buffers_backend"]
    extends = (
        cur["pgstat_io.backend_extend_bytes"] - prev["pgstat_io.backend_extend_bytes"]
    ) / 8192
    # within a few blocks (166 against 167 as recorded): two counters kept apart
    assert io == 0 and old > 0 and abs(old - extends) <= 0.05 * extends


# -- counters that go backwards ------------------------------------------------------------


@pytest.mark.parametrize("major", VERSIONS)
def test_backwards_counters_give_no_value(major):
    _doc, prev, cur, seconds = recorded(major)
    backwards = pg_sample(cur, prev, seconds)  # every counter that moved now goes back
    assert all(value == 0 for value in backwards.values())
    moved = {k for k in prev if k in cur and cur[k] != prev[k]}
    assert "pgstat_wal.wal_bytes" in moved
    assert "pg.wal_bytes_per_s" not in backwards
    assert "pg.cache_hit_pct" not in backwards


def test_a_reset_of_one_view_drops_only_its_metrics():
    _doc, prev, cur, seconds = recorded(18)
    reset = dict(cur)
    for key in reset:
        if key.startswith("pgstat_database."):  # the database was dropped and re-created
            reset[key] = 0.0
    sample = pg_sample(prev, reset, seconds)
    assert all(value >= 0 for value in sample.values())
    for metric in ("pg.blks_hit_per_s", "pg.blks_read_per_s", "pg.xact_commit_per_s"):
        assert metric not in sample
    assert "pg.cache_hit_pct" not in sample
    assert sample["pg.wal_bytes_per_s"] == pg_sample(prev, cur, seconds)["pg.wal_bytes_per_s"]


def test_no_block_access_means_no_cache_hit_pct():
    _doc, prev, _cur, _seconds = recorded(15)
    sample = pg_sample(prev, prev, 1.0)
    assert "pg.cache_hit_pct" not in sample
    assert sample["pg.blks_hit_per_s"] == 0 and sample["pg.checkpoints_timed"] == 0


def test_missing_counters_and_no_time_give_no_rates():
    assert pg_sample({}, {"pgstat_wal.wal_bytes": 5.0}, 1.0) == {}
    prev = {"pgstat_wal.wal_bytes": 1.0, "pgstat_wal.wal_buffers_full": 1.0}
    cur = {"pgstat_wal.wal_bytes": 9.0, "pgstat_wal.wal_buffers_full": 2.0}
    assert pg_sample(prev, cur, 0.0) == {"pg.wal_buffers_full": 1.0}
