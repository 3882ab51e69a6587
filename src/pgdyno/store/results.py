"""The results database (SQLite): sessions, runs, per-second series, per-statement latencies.

Each run is written in its own transaction as soon as it finishes, so a crash loses at most the
run in progress.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgdyno.errors import StoreError, StoreUnavailable
from pgdyno.records import RunRecord
from pgdyno.records.stored import ReportSource, RunListing, StoredRun
from pgdyno.store.comparisons import Comparisons
from pgdyno.store.decode import RUN_ROW_SQL, run_listing, stored_run
from pgdyno.store.encode import (
    devices_json,
    dumps,
    health_json,
    interference_json,
    now_iso,
    tpcc_json,
)
from pgdyno.store.migrate import latest_version, migrate
from pgdyno.store.owners import Owner, any_abandoned, mark_interrupted

RUN_COLUMNS = (
    "id", "session_id", "status", "started_at", "finished_at", "workload", "scale", "clients",
    "jobs", "duration_s", "protocol", "rate", "repeat", "warmup_s", "tps", "latency_avg_ms",
    "latency_stddev_ms", "transactions", "failed_transactions", "dataset_bytes", "pg_version",
    "pgbench_version", "error", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
    "latency_source", "interference", "tpcc",
)  # fmt: skip
SECOND_COLUMNS = (
    "t", "tps", "latency_avg_ms", "latency_stddev_ms", "latency_min_ms", "latency_max_ms",
    "failures", "lag_avg_ms", "skipped", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms",
    "latency_p999_ms", "logged",
)  # fmt: skip


def _explain(path: Path, exc: sqlite3.Error) -> StoreError:
    """One sentence for a failure of the database file; the file itself is never touched."""
    reason = str(exc)
    if "not a database" in reason or "malformed" in reason:
        return StoreUnavailable(
            f"{path} is not a usable results database ({reason}) and was left as it is: move "
            "it aside or pass another --results file."
        )
    if "readonly" in reason or "unable to open" in reason or "access permission" in reason:
        return StoreUnavailable(
            f"the results database {path} cannot be opened for writing ({reason}): check the "
            "file, its directory and their permissions, or pass another --results file."
        )
    if "disk is full" in reason or "disk I/O" in reason:
        hint = "free some disk space and run again"
    else:
        hint = "pass another --results file if this one is damaged"
    return StoreError(f"the results database {path} failed ({reason}): {hint}.")


def _readable_as_is(path: Path) -> bool:
    """A database file whose every committed change is in the file itself (no pending WAL)."""
    wal = path.with_name(path.name + "-wal")
    return path.is_file() and (not wal.exists() or wal.stat().st_size == 0)


def _finite(value: float | None, what: str) -> float | None:
    if value is not None and not math.isfinite(value):
        raise StoreError(
            f"refused to store {what} = {value}, not a finite number; this is a bug in pgdyno: "
            "please report it."
        )
    return value


class ResultsStore:
    """The SQLite results backend (store.interface.ResultsBackend).

    `writing`: the command will store runs, so a file it cannot write is refused at once
    (before any run) instead of when the first run is to be kept."""

    def __init__(self, path: Path, *, writing: bool = True) -> None:
        self.path = path
        self.comparisons = Comparisons(self)
        if path.is_dir():
            raise StoreUnavailable(
                f"the results database path {path} is a directory: pass --results with a file "
                "path, or move the directory away."
            )
        try:
            self.conn = self._open(writing)
        except sqlite3.Error as exc:
            if writing or not _readable_as_is(path):
                raise _explain(path, exc) from exc
            try:  # on read-only media: read the file as it is (no WAL, no migration)
                self.conn = self._open_read_only()
            except sqlite3.Error:
                raise _explain(path, exc) from exc

    def _open(self, writing: bool) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create the results database {self.path} ({exc.strerror}): pass another "
                "--results file."
            ) from exc
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            migrate(conn)
            if writing:
                conn.execute("DELETE FROM schema_migrations WHERE 0")  # a no-op write
            self._close_abandoned(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            f"{self.path.as_uri()}?mode=ro&immutable=1", uri=True, isolation_level=None
        )
        conn.row_factory = sqlite3.Row
        have = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        if have != latest_version():
            conn.close()
            raise StoreUnavailable(
                f"the results database {self.path} cannot be written and has schema version "
                f"{have}, not {latest_version()}: copy it somewhere writable and open the copy."
            )
        return conn

    def _close_abandoned(self, conn: sqlite3.Connection) -> None:
        """Sessions and comparisons left 'running' by a killed pgdyno become 'interrupted'."""
        if not any_abandoned(conn):
            return  # the common case: no write, so a read-only file can still be read
        try:
            conn.execute("BEGIN IMMEDIATE")
            mark_interrupted(conn, now_iso())
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if "readonly" not in str(exc):
                raise
            # a read-only file can still be read; its statuses stay as they were

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _explain(self.path, exc) from exc

    # -- writing -------------------------------------------------------------------------------

    def begin_session(
        self,
        command: list[str],
        target: str,
        host: Mapping[str, object],
        server: Mapping[str, object],
    ) -> int:
        me = Owner.me()
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO sessions (started_at, hostname, pid, owner_started, command, target,"
                " host, server) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (now_iso(), me.hostname, me.pid, me.started, dumps(command, "the command"),
                 target, dumps(host, "the host facts"), dumps(server, "the server facts")),
            )  # fmt: skip
            return int(cur.lastrowid or 0)

    def finish_session(self, session_id: int, status: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE sessions SET finished_at = ?, status = ? WHERE id = ?",
                (now_iso(), status, session_id),
            )

    def add_run(self, session_id: int, run: RunRecord) -> int:
        summary = run.summary
        with self.transaction() as conn:
            lat = run.latency
            cur = conn.execute(
                "INSERT INTO runs (session_id, status, started_at, finished_at, workload, scale,"
                " clients, jobs, duration_s, protocol, rate, repeat, warmup_s, tps,"
                " latency_avg_ms, latency_stddev_ms, transactions, failed_transactions,"
                " dataset_bytes, pg_version, pgbench_version, pgbench_argv, settings, summary,"
                " error, stderr, latency_p50_ms, latency_p90_ms, latency_p99_ms,"
                " latency_p999_ms, latency_max_ms, latency_source, health, devices,"
                " comparison_id, set_name, interference, tpcc)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, run.status, run.started_at, run.finished_at, run.cell.workload,
                    run.cell.scale, run.cell.clients, run.cell.jobs, run.duration_s, run.protocol,
                    _finite(run.rate, "rate"), run.cell.repeat, run.warmup_s,
                    _finite(summary.tps, "tps") if summary else None,
                    _finite(summary.latency_avg_ms, "latency") if summary else None,
                    _finite(summary.latency_stddev_ms, "latency stddev") if summary else None,
                    summary.transactions if summary else None,
                    summary.failed_transactions if summary else None,
                    run.dataset_bytes, run.pg_version, run.pgbench_version,
                    dumps(list(run.pgbench_argv), "pgbench's command"),
                    dumps(run.settings, "the settings"),
                    dumps(asdict(summary), "pgbench's summary") if summary else None,
                    run.error, run.stderr,
                    lat.p50_ms if lat else None, lat.p90_ms if lat else None,
                    lat.p99_ms if lat else None, lat.p999_ms if lat else None,
                    lat.max_ms if lat else None, run.latency_source,
                    dumps(health_json(run.health), "the run's health"),
                    dumps(devices_json(run.devices), "the devices"),
                    run.comparison_id,
                    run.set_name,
                    None if run.interference is None
                    else dumps(interference_json(run.interference), "the run's interference"),
                    None if run.tpcc is None else dumps(tpcc_json(run.tpcc), "TPC-C figures"),
                ),
            )  # fmt: skip
            run_id = int(cur.lastrowid or 0)
            conn.executemany(
                f"INSERT INTO run_seconds (run_id, {', '.join(SECOND_COLUMNS)}) VALUES "
                f"(?, {', '.join('?' for _ in SECOND_COLUMNS)})",
                [(run_id, *(getattr(s, c) for c in SECOND_COLUMNS)) for s in run.seconds],
            )
            conn.executemany(
                "INSERT INTO run_samples (run_id, metric, t, value) VALUES (?, ?, ?, ?)",
                [(run_id, metric, t, value) for t, metric, value in run.samples],
            )
            conn.executemany(
                "INSERT INTO run_events (run_id, t, kind, detail) VALUES (?, ?, ?, ?)",
                [(run_id, e.t, e.kind, dumps(e.detail, f"a {e.kind} event")) for e in run.events],
            )
            if summary:
                conn.executemany(
                    "INSERT INTO run_statements VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (run_id, st.script, st.line, st.latency_ms, st.failures, st.retries,
                         st.command)
                        for st in summary.statements
                    ],
                )  # fmt: skip
            return run_id

    # -- reading -------------------------------------------------------------------------------

    def _query(self, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows as dicts; decoded into records before they leave store/."""
        try:
            return [dict(row) for row in self.conn.execute(query, params).fetchall()]
        except sqlite3.Error as exc:
            raise _explain(self.path, exc) from exc

    def list_runs(self, limit: int | None = 50, session_id: int | None = None) -> list[RunListing]:
        """Newest first; the summary columns and the status of the run's session."""
        where = "WHERE r.session_id = ?" if session_id is not None else ""
        params: tuple[Any, ...] = (session_id,) if session_id is not None else ()
        columns = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
        rows = self._query(
            f"SELECT {columns}, s.status AS session_status FROM runs r"
            f" JOIN sessions s ON s.id = r.session_id {where} ORDER BY r.id DESC"
            + (" LIMIT ?" if limit else ""),
            (*params, limit) if limit else params,
        )
        return [run_listing(row) for row in rows]

    def get_run(self, run_id: int) -> StoredRun | None:
        rows = self._query(f"SELECT {RUN_ROW_SQL} FROM runs WHERE id = ?", (run_id,))
        if not rows:
            return None
        run = rows[0]
        session = self._query("SELECT * FROM sessions WHERE id = ?", (run["session_id"],))[0]
        seconds = self._query(
            f"SELECT {', '.join(SECOND_COLUMNS)} FROM run_seconds WHERE run_id = ? ORDER BY t",
            (run_id,),
        )
        statements = self._query(
            "SELECT script, line, latency_ms, failures, retries, command FROM run_statements"
            " WHERE run_id = ? ORDER BY script, line",
            (run_id,),
        )
        events = self._query(
            "SELECT t, kind, detail FROM run_events WHERE run_id = ? ORDER BY t", (run_id,)
        )
        return stored_run(run, session, seconds, statements, events, self.samples(run_id))

    def samples(self, run_id: int) -> dict[str, dict[int, float]]:
        """metric -> {epoch second -> value} for one run."""
        series: dict[str, dict[int, float]] = {}
        for row in self._query(
            "SELECT metric, t, value FROM run_samples WHERE run_id = ? ORDER BY metric, t",
            (run_id,),
        ):
            series.setdefault(row["metric"], {})[row["t"]] = row["value"]
        return series

    def session_run_ids(self, session_id: int) -> list[int]:
        """The runs of one bench session, in the order they ran."""
        rows = self._query("SELECT id FROM runs WHERE session_id = ? ORDER BY id", (session_id,))
        return [int(r["id"]) for r in rows]

    def newest_source(self) -> ReportSource | None:
        """The newest comparison, or bench session with runs outside any comparison."""
        rows = self._query(
            "SELECT 'comparison' AS kind, id, started_at FROM comparisons"
            " UNION ALL SELECT 'session', id, started_at FROM sessions"
            " WHERE id IN (SELECT session_id FROM runs WHERE comparison_id IS NULL)"
            " ORDER BY started_at DESC LIMIT 1"
        )
        return ReportSource(str(rows[0]["kind"]), int(rows[0]["id"])) if rows else None

    def recent_tps(
        self, workload: str, scale: int, clients: int, pg_version: str, target: str
    ) -> float | None:
        """TPS of the latest successful run like this one, to size the latency log's sample."""
        rows = self._query(
            "SELECT r.tps FROM runs r JOIN sessions s ON s.id = r.session_id"
            " WHERE r.status = 'ok' AND r.workload = ? AND r.scale = ? AND r.clients = ?"
            " AND r.pg_version = ? AND s.target = ? ORDER BY r.id DESC LIMIT 1",
            (workload, scale, clients, pg_version, target),
        )
        return float(rows[0]["tps"]) if rows and rows[0]["tps"] is not None else None

    def count_seconds(self, run_id: int) -> int:
        rows = self._query("SELECT count(*) AS n FROM run_seconds WHERE run_id = ?", (run_id,))
        return int(rows[0]["n"])


if TYPE_CHECKING:
    from pgdyno.store.interface import ResultsBackend

    def _implements(store: ResultsStore) -> ResultsBackend:
        """mypy checks here that the SQLite store keeps the whole backend interface."""
        return store
