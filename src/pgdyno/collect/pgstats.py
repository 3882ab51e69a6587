"""PostgreSQL's cumulative statistics, sampled for the run timeline.

`PgStatsSampler.snapshot()` reads the counters of a few pg_stat_* views into one flat dict
(``"pgstat_wal.wal_bytes"``); `pg_sample()` turns two snapshots into the metrics of the interval
between them. The views changed between versions, so each query has one `.sql` file per version
range, and the files give a column the same name wherever it means the same thing:

* pg_stat_bgwriter held the checkpointer's counters up to 16; 17 moved them to
  pg_stat_checkpointer (named ``num_timed``, ``buffers_written``, ... as there) and dropped
  ``buffers_backend``; pg_stat_io (16+) has the writes of each process type.
* pg_stat_wal lost ``wal_write``, ``wal_sync`` and their times in 18 (pg_stat_io, object
  ``wal``, has them).
* pg_stat_io counts blocks of ``op_bytes`` on 16 and 17, bytes on 18. It is read twice: summed
  into the figures above (``pgstat_io``), and row by row (``pgstat_io_rows``: every non-zero
  counter of each process type, object and context, for the io.* series of collect/pgstat_io.py).

A snapshot is one statement that reads every view (`combined`): one round trip a second. A
column that holds a JSON object (``pgstat_io_rows.counters``) is flattened into one key per
member (``pgstat_io_rows.counters.client_backend.relation.normal.hits``).
Every view read here is readable by any role, so a plain login role gets everything; a query
that fails anyway (a view revoked from PUBLIC, a server that lacks a column) is left out for the
rest of the run with one log line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pgdyno.catalogs.metrics import pg_counters
from pgdyno.collect.pgstat_io import io_sample
from pgdyno.collect.waits import WaitSampler
from pgdyno.errors import QueryRefused, ServerTrouble
from pgdyno.postgres.client import Client
from pgdyno.postgres.stats import alone, combined, json_row

__all__ = ["PgStatsSampler", "combined", "pg_sample", "queries_for"]


def queries_for(version_num: int) -> list[str]:
    """The query files to read on a server of this version (`server_version_num`).

    >>> queries_for(150000)[-2:]
    ['pgstat_wal_pre180000', 'pgstat_database']
    >>> queries_for(180001)[-2:]
    ['pgstat_io_post180000', 'pgstat_io_rows_post180000']
    """
    queries = []
    if version_num >= 170000:
        queries.append("pgstat_bgwriter_post170000")
        queries.append("pgstat_checkpointer_post170000")
    else:
        queries.append("pgstat_bgwriter_pre170000")
        queries.append("pgstat_checkpointer_pre170000")
    if version_num >= 180000:
        queries.append("pgstat_wal_post180000")
    else:
        queries.append("pgstat_wal_pre180000")
    queries.append("pgstat_database")
    if version_num >= 180000:
        queries.append("pgstat_io_post180000")
        queries.append("pgstat_io_rows_post180000")
    elif version_num >= 160000:
        queries.append("pgstat_io_post160000")
        queries.append("pgstat_io_rows_post160000")
    return queries


_VERSION_SUFFIX = re.compile(r"_(pre|post)[0-9]{6}$")


def key_prefix(query: str) -> str:
    """The name a query's columns are filed under, the same on every version.

    >>> key_prefix("pgstat_wal_post180000"), key_prefix("pgstat_database")
    ('pgstat_wal', 'pgstat_database')
    """
    return _VERSION_SUFFIX.sub("", query)


def numbers(prefix: str, row: Mapping[str, object]) -> dict[str, float]:
    """The numbers of a query's row under ``<prefix>.<column>``; a JSON object's members under
    ``<prefix>.<column>.<member>``. Anything else (a timestamp, a null, a boolean) is left out.

    >>> numbers("q", {"a": 1, "b": None, "c": {"x.y": 2.5, "z": "text"}, "d": True})
    {'q.a': 1.0, 'q.c.x.y': 2.5}
    """
    out: dict[str, float] = {}
    for column, value in row.items():
        if isinstance(value, dict):
            out.update(numbers(f"{prefix}.{column}", value))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{prefix}.{column}"] = float(value)
    return out


class PgStatsSampler:
    """Reads the statistics views of one server through `client`."""

    def __init__(
        self,
        client: Client,
        version_num: int,
        dbname: str,
        log: Callable[[str], None],
        wait_hz: int = 0,
    ) -> None:
        """`wait_hz`: looks a second at the server's sessions for the wait-event profile, in
        the same connection (`waits`, collect/waits.py); 0: none."""
        self.client = client
        self.waits = WaitSampler(client, dbname, wait_hz, log) if wait_hz > 0 else None
        self.dbname = dbname
        self.log = log
        self.queries = queries_for(version_num)
        self._statement: tuple[tuple[str, ...], str] | None = None  # (queries, their statement)

    def snapshot(self) -> dict[str, float]:
        """Every cumulative counter now, as ``{"<query>.<column>": value}``.

        All queries go in one statement; when the server refuses it, each query is read alone
        to find the culprit, and a query the server refuses (no privilege, no such view or
        column) is switched off with one log line. A lost connection (ConnectionLost) or a
        server in trouble (out of memory, cancelled: nothing else would work either) is raised.
        """
        try:
            rows = self._read_all()
        except ServerTrouble:
            raise
        except QueryRefused:
            rows = self._read_each()
        values: dict[str, float] = {}
        for query, row in rows.items():
            values.update(numbers(key_prefix(query), row))
        return values

    def _read_all(self) -> dict[str, dict[str, object]]:
        """Every query's row (a query without a row is left out), in one round trip."""
        if not self.queries:
            return {}
        if self._statement is None or self._statement[0] != tuple(self.queries):
            self._statement = (tuple(self.queries), combined(self.queries))
        found = json_row(self.client, self._statement[1], self.dbname)
        return {query: dict(row) for query, row in found.items() if isinstance(row, dict)}

    def _read_each(self) -> dict[str, dict[str, object]]:
        """Every query read alone; those the server refuses are switched off."""
        rows: dict[str, dict[str, object]] = {}
        for query in list(self.queries):
            try:
                rows[query] = self._read(query)
            except ServerTrouble:
                raise
            except QueryRefused as exc:
                self.queries.remove(query)
                self.log(f"PostgreSQL statistics: {key_prefix(query)} not collected ({exc.reason})")
        return rows

    def _read(self, query: str) -> dict[str, object]:
        """The query's one row as column -> value (empty when it returns no row)."""
        return json_row(self.client, alone(query), self.dbname)


# -- metrics of an interval -------------------------------------------------------------------

# metric -> the counters it comes from, as data/metrics.toml lists them; the first one present
# in both snapshots is used (pg_stat_io before buffers_backend, which counts extensions too).
_COUNTS: dict[str, tuple[str, ...]] = pg_counters("count")
_RATES: dict[str, tuple[str, ...]] = pg_counters("rate")


def _delta(
    prev: Mapping[str, float], cur: Mapping[str, float], keys: tuple[str, ...]
) -> float | None:
    """How much the first counter present in both snapshots grew; None if it went backwards
    (statistics reset, database re-created) or is missing."""
    for key in keys:
        if key in prev and key in cur:
            change = cur[key] - prev[key]
            return change if change >= 0 else None
    return None


def pg_sample(prev: dict[str, float], cur: dict[str, float], seconds: float) -> dict[str, float]:
    """The metrics of the `seconds` between two snapshots: counts and per-second rates, and the
    io.* series of pg_stat_io's rows (collect/pgstat_io.py).

    A metric is left out when its counter is missing from either snapshot or went backwards;
    rates are left out when `seconds` is not positive.

    >>> pg_sample({"pgstat_wal.wal_bytes": 100.0}, {"pgstat_wal.wal_bytes": 300.0}, 2.0)
    {'pg.wal_bytes_per_s': 100.0}
    """
    out: dict[str, float] = {}
    for metric, keys in _COUNTS.items():
        change = _delta(prev, cur, keys)
        if change is not None:
            out[metric] = change
    if seconds > 0:
        for metric, keys in _RATES.items():
            change = _delta(prev, cur, keys)
            if change is not None:
                out[metric] = change / seconds
    hit = _delta(prev, cur, ("pgstat_database.blks_hit",))
    read = _delta(prev, cur, ("pgstat_database.blks_read",))
    if hit is not None and read is not None and hit + read > 0:
        out["pg.cache_hit_pct"] = 100.0 * hit / (hit + read)
    out.update(io_sample(prev, cur, seconds))
    return out
