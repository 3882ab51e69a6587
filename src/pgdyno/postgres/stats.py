"""The statistics the collectors read: the cumulative pg_stat_* views of a snapshot, what the
sessions wait on (pg_stat_activity, or pg_wait_sampling's profile), and the benchmark database's
transactions and sessions. Typed functions over `Client`, their queries in queries/*.sql.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.postgres.client import Client
from pgdyno.postgres.queries import load

# -- cumulative statistics: one JSON object per query -----------------------------------------


def combined(queries: list[str]) -> str:
    """One statement for a whole snapshot: every query's row as a JSON object under its name.

    A single round trip a second instead of one per view: the sampler's thread and the server
    backend that answers it wake once, and psycopg prepares the one statement after a few
    ticks (its `prepare_threshold`), so the server plans it no more.

    >>> print(combined(["pgstat_wal_post180000"]).splitlines()[0])
    SELECT jsonb_build_object(
    """
    # Each file's text on lines of its own: a trailing comment must not swallow the ")".
    parts = [
        f"'{query}', (SELECT to_jsonb(q) FROM (\n{load(query).strip().rstrip(';')}\n) AS q)"
        for query in queries
    ]
    return "SELECT jsonb_build_object(\n" + ",\n".join(parts) + "\n) AS found"


def alone(query: str) -> str:
    """One query's statement, its row as one JSON object.

    >>> alone("pgstat_database").startswith("SELECT to_jsonb(q) AS found FROM (\\n")
    True
    """
    text = load(query).strip().rstrip(";")
    return f"SELECT to_jsonb(q) AS found FROM (\n{text}\n) AS q"


@dataclass(frozen=True)
class _Json:
    found: object


def json_row(client: Client, statement: str, dbname: str) -> dict[str, object]:
    """The JSON object a statement of `combined` or `alone` returns (empty when there is no
    row or no object); `%(dbname)s` in it is the benchmark database."""
    params = {"dbname": dbname} if "%(dbname)s" in statement else None
    rows = client.records(statement, _Json, params)
    found = rows[0].found if rows else None
    return dict(found) if isinstance(found, dict) else {}


# -- what the sessions wait on ----------------------------------------------------------------


@dataclass(frozen=True)
class WaitSamplingCheck:
    """queries/wait_sampling_check.sql: pg_wait_sampling in the connected database, as text."""

    dbname: str
    created: bool  # CREATE EXTENSION ran in this database
    period_ms: str | None  # its settings exist only when the library is loaded
    profile_pid: str | None
    sample_cpu: str | None  # None too on a version without the setting


@dataclass(frozen=True)
class WaitCount:
    """Sessions (one look) or samples (the profile) of a process kind in one wait event."""

    process: str | None  # '' for client backends, else the backend type
    event: str | None  # "IO:DataFileRead", "CPU*"
    count: int | None


def wait_sampling_check(client: Client) -> WaitSamplingCheck | None:
    found = client.records(load("wait_sampling_check"), WaitSamplingCheck)
    return found[0] if found else None


def wait_sample(client: Client, dbname: str) -> list[WaitCount]:
    """One look at pg_stat_activity (queries/wait_sample.sql)."""
    return client.records(load("wait_sample"), WaitCount, {"dbname": dbname})


def wait_profile(client: Client, dbname: str) -> list[WaitCount]:
    """pg_wait_sampling's cumulative profile (queries/wait_sampling_profile.sql)."""
    return client.records(load("wait_sampling_profile"), WaitCount, {"dbname": dbname})


# -- the benchmark database -------------------------------------------------------------------


@dataclass(frozen=True)
class _Xacts:
    xacts: int | None


@dataclass(frozen=True)
class _Sessions:
    sessions: int


def database_xacts(client: Client, dbname: str) -> int | None:
    """Commits plus rollbacks of a database; None while it does not exist."""
    found = client.records(load("bench_xacts"), _Xacts, {"dbname": dbname})
    return found[0].xacts if found else None


def client_sessions(client: Client, dbname: str) -> int:
    """Client sessions connected to a database, this one left out."""
    found = client.records(load("bench_sessions"), _Sessions, {"dbname": dbname})
    return found[0].sessions if found else 0


@dataclass(frozen=True)
class _Checkpoints:
    timed: int
    requested: int
    stats_reset: object  # read by the doctor; not needed here


def checkpoints_done(client: Client, major: int) -> int:
    """Checkpoints (timed and requested) since the statistics were last reset: from
    pg_stat_checkpointer on PostgreSQL 17+, pg_stat_bgwriter before."""
    query = load(f"doctor_checkpoints_{'post' if major >= 17 else 'pre'}170000")
    row = client.records(query, _Checkpoints)[0]
    return row.timed + row.requested
