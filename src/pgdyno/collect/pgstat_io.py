"""pg_stat_io row by row (PostgreSQL 16+): I/O per second of each process type, object and context.

The snapshot holds every non-zero counter of pg_stat_io as
``pgstat_io_rows.counters.<backend_type>.<object>.<context>.<counter>`` (spaces as underscores;
the query files ``pgstat_io_rows_post160000.sql`` and ``_post180000.sql``) and the view's row
count as ``pgstat_io_rows.rows``. `io_sample` turns two snapshots into the series
``io.<backend_type>.<object>.<context>.<what>_per_s``, named in data/metrics.toml with the
placeholders {backend}, {object} and {context}: ``io.client_backend.relation.normal.reads_per_s``.

What is counted (https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-IO-VIEW):
reads, writes, writebacks, extends, hits, evictions, reuses and fsyncs are operations in every
version; on 16 and 17 one operation is one block (op_bytes), on 18 a read or write may cover
several blocks, so the bytes series (``read_bytes``, ``write_bytes``, ``extend_bytes``: reads x
op_bytes on 16/17, the view's own byte counts on 18) are the ones to compare across versions.
The ``*_time_ms_per_s`` series are milliseconds spent per second, counted only with
track_io_timing on (track_wal_io_timing for object ``wal`` on 18).

How many series: pg_stat_io has some 30 (16) to 80 (18) rows of up to 16 counters. Two bounds
keep a run's timeline to the few that matter: the snapshot holds only counters that are not
zero (a row nothing ever used, a time without track_io_timing, gives no key), and
`without_idle_io` drops, at the end of a run, every io.* series that stayed at zero through it
(what initdb or an earlier run counted but this run did not add to).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pgdyno.records import Sample

__all__ = ["IO_COUNTERS", "ROWS", "io_sample", "without_idle_io"]

ROWS = "pgstat_io_rows.rows"  # present whenever the query was read, even with no counter yet
_PREFIX = "pgstat_io_rows.counters."
_SERIES = "io."

# pg_stat_io counter (as the query names it) -> the end of its series' name
IO_COUNTERS: dict[str, str] = {
    "reads": "reads_per_s",
    "read_bytes": "read_bytes_per_s",
    "read_time": "read_time_ms_per_s",
    "writes": "writes_per_s",
    "write_bytes": "write_bytes_per_s",
    "write_time": "write_time_ms_per_s",
    "writebacks": "writebacks_per_s",
    "writeback_time": "writeback_time_ms_per_s",
    "extends": "extends_per_s",
    "extend_bytes": "extend_bytes_per_s",
    "extend_time": "extend_time_ms_per_s",
    "hits": "hits_per_s",
    "evictions": "evictions_per_s",
    "reuses": "reuses_per_s",
    "fsyncs": "fsyncs_per_s",
    "fsync_time": "fsync_time_ms_per_s",
}


def series_name(key: str) -> str | None:
    """The series of a snapshot key, or None when the key is not a pg_stat_io row's counter.

    >>> series_name("pgstat_io_rows.counters.client_backend.relation.normal.reads")
    'io.client_backend.relation.normal.reads_per_s'
    >>> series_name("pgstat_io_rows.counters.io_worker.relation.normal.read_time")
    'io.io_worker.relation.normal.read_time_ms_per_s'
    >>> series_name("pgstat_io_rows.rows"), series_name("pgstat_io.client_hits")
    (None, None)
    """
    if not key.startswith(_PREFIX):
        return None
    row, _, counter = key.removeprefix(_PREFIX).rpartition(".")
    ending = IO_COUNTERS.get(counter)
    parts = row.split(".")
    if ending is None or len(parts) != 3 or not all(parts):
        return None
    return f"{_SERIES}{row}.{ending}"


def io_sample(
    prev: Mapping[str, float], cur: Mapping[str, float], seconds: float
) -> dict[str, float]:
    """The io.* series of the `seconds` between two snapshots, per second.

    A counter missing from the earlier snapshot was zero then (the query leaves zeros out), as
    long as both snapshots read the view (`ROWS`). A counter that went backwards or vanished
    (statistics reset) gives no value for that interval.

    >>> key = "pgstat_io_rows.counters.checkpointer.relation.normal.writes"
    >>> io_sample({ROWS: 30.0}, {ROWS: 30.0, key: 50.0}, 2.0)
    {'io.checkpointer.relation.normal.writes_per_s': 25.0}
    >>> io_sample({}, {ROWS: 30.0, key: 50.0}, 2.0)  # the earlier snapshot lacks the view
    {}
    >>> io_sample({ROWS: 30.0, key: 60.0}, {ROWS: 30.0, key: 5.0}, 1.0)  # reset
    {}
    """
    if seconds <= 0 or ROWS not in prev or ROWS not in cur:
        return {}
    out: dict[str, float] = {}
    for key, value in cur.items():
        name = series_name(key)
        if name is None:
            continue
        change = value - prev.get(key, 0.0)
        if change >= 0:
            out[name] = change / seconds
    return out


def without_idle_io(samples: Sequence[Sample]) -> list[Sample]:
    """The samples without the io.* series that are zero at every second of the run.

    >>> without_idle_io([(1, "io.a.b.c.hits_per_s", 0.0), (1, "io.a.b.c.reads_per_s", 2.0),
    ...                  (2, "io.a.b.c.hits_per_s", 0.0), (1, "tps", 0.0)])
    [(1, 'io.a.b.c.reads_per_s', 2.0), (1, 'tps', 0.0)]
    """
    active = {name for _, name, value in samples if name.startswith(_SERIES) and value != 0}
    return [s for s in samples if not s[1].startswith(_SERIES) or s[1] in active]
