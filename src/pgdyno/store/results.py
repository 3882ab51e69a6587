"""The results database (SQLite): sessions, runs, per-second series, per-statement latencies.

Each run is written in its own transaction as soon as it finishes, so a crash loses at most the
run in progress.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgdyno.errors import StoreError
from pgdyno.process import pid_alive
from pgdyno.records import RunRecord
from pgdyno.store.migrate import migrate

RUN_COLUMNS = (
    "id", "session_id", "status", "started_at", "finished_at", "workload", "scale", "clients",
    "jobs", "duration_s", "protocol", "rate", "repeat", "warmup_s", "tps", "latency_avg_ms",
    "latency_stddev_ms", "transactions", "failed_transactions", "dataset_bytes", "pg_version",
    "pgbench_version", "error", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
    "latency_source",
)  # fmt: skip
JSON_COLUMNS = ("pgbench_argv", "settings", "summary", "health", "devices")
SECOND_COLUMNS = (
    "t", "tps", "latency_avg_ms", "latency_stddev_ms", "latency_min_ms", "latency_max_ms",
    "failures", "lag_avg_ms", "skipped", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms",
    "latency_p999_ms", "logged",
)  # fmt: skip


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _explain(path: Path, exc: sqlite3.Error) -> StoreError:
    reason = str(exc)
    if "disk is full" in reason or "disk I/O" in reason:
        hint = "free some disk space and run again"
    elif "readonly" in reason or "unable to open" in reason:
        hint = "check the file's permissions or choose another --results path"
    else:
        hint = "choose another --results path if the file is damaged"
    return StoreError(f"the results database {path} failed ({reason}); {hint}.")


class ResultsStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        except sqlite3.Error as exc:
            raise _explain(path, exc) from exc
        except OSError as exc:
            raise StoreError(
                f"cannot create the results database {path} ({exc.strerror}); "
                "choose another --results path."
            ) from exc
        try:
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute("PRAGMA journal_mode = WAL")
            migrate(self.conn)
        except sqlite3.Error as exc:
            self.conn.close()
            raise _explain(path, exc) from exc

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
        self, command: list[str], target: str, host: Mapping[str, Any], server: Mapping[str, Any]
    ) -> int:
        hostname = socket.gethostname()
        with self.transaction() as conn:
            self._close_abandoned(conn, hostname)
            cur = conn.execute(
                "INSERT INTO sessions (started_at, hostname, pid, command, target, host, server)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (now_iso(), hostname, os.getpid(), json.dumps(command), target,
                 json.dumps(host), json.dumps(server)),
            )  # fmt: skip
            return int(cur.lastrowid or 0)

    @staticmethod
    def _close_abandoned(conn: sqlite3.Connection, hostname: str) -> None:
        """Sessions of this host still 'running' whose pgdyno is gone were killed."""
        rows = conn.execute(
            "SELECT id, pid FROM sessions WHERE status = 'running' AND hostname = ?", (hostname,)
        ).fetchall()
        for row in rows:
            if not pid_alive(int(row["pid"])):
                conn.execute(
                    "UPDATE sessions SET status = 'interrupted' WHERE id = ?", (row["id"],)
                )

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
                " comparison_id, set_name)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, run.status, run.started_at, run.finished_at, run.cell.workload,
                    run.cell.scale, run.cell.clients, run.cell.jobs, run.duration_s, run.protocol,
                    run.rate, run.cell.repeat, run.warmup_s,
                    summary.tps if summary else None,
                    summary.latency_avg_ms if summary else None,
                    summary.latency_stddev_ms if summary else None,
                    summary.transactions if summary else None,
                    summary.failed_transactions if summary else None,
                    run.dataset_bytes, run.pg_version, run.pgbench_version,
                    json.dumps(list(run.pgbench_argv)), json.dumps(run.settings),
                    json.dumps(asdict(summary)) if summary else None, run.error, run.stderr,
                    lat.p50_ms if lat else None, lat.p90_ms if lat else None,
                    lat.p99_ms if lat else None, lat.p999_ms if lat else None,
                    lat.max_ms if lat else None, run.latency_source,
                    json.dumps(run.health), json.dumps(run.devices), run.comparison_id,
                    run.set_name,
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
                [(run_id, e.t, e.kind, json.dumps(e.detail)) for e in run.events],
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

    def query(self, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        try:
            return [dict(row) for row in self.conn.execute(query, params).fetchall()]
        except sqlite3.Error as exc:
            raise _explain(self.path, exc) from exc

    def list_runs(
        self, limit: int | None = 50, session_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Newest first; only the summary columns."""
        where = "WHERE session_id = ?" if session_id is not None else ""
        params: tuple[Any, ...] = (session_id,) if session_id is not None else ()
        return self.query(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM runs {where} ORDER BY id DESC"
            + (" LIMIT ?" if limit else ""),
            (*params, limit) if limit else params,
        )

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            return None
        run = rows[0]
        for column in JSON_COLUMNS:
            if run[column] is not None:
                run[column] = json.loads(run[column])
        session = self.query("SELECT * FROM sessions WHERE id = ?", (run["session_id"],))[0]
        run["host"] = json.loads(session["host"])
        run["server"] = json.loads(session["server"])
        run["target"] = session["target"]
        run["seconds"] = self.query(
            "SELECT * FROM run_seconds WHERE run_id = ? ORDER BY t", (run_id,)
        )
        run["statements"] = self.query(
            "SELECT script, line, latency_ms, failures, retries, command FROM run_statements"
            " WHERE run_id = ? ORDER BY script, line",
            (run_id,),
        )
        for second in run["seconds"]:
            del second["run_id"]
        run["samples"] = self.samples(run_id)
        run["events"] = [
            {**event, "detail": json.loads(event["detail"])}
            for event in self.query(
                "SELECT t, kind, detail FROM run_events WHERE run_id = ? ORDER BY t", (run_id,)
            )
        ]
        return run

    def samples(self, run_id: int) -> dict[str, dict[int, float]]:
        """metric -> {epoch second -> value} for one run."""
        series: dict[str, dict[int, float]] = {}
        for row in self.query(
            "SELECT metric, t, value FROM run_samples WHERE run_id = ? ORDER BY metric, t",
            (run_id,),
        ):
            series.setdefault(row["metric"], {})[row["t"]] = row["value"]
        return series

    def recent_tps(
        self, workload: str, scale: int, clients: int, pg_version: str, target: str
    ) -> float | None:
        """TPS of the latest successful run like this one, to size the latency log's sample."""
        rows = self.query(
            "SELECT r.tps FROM runs r JOIN sessions s ON s.id = r.session_id"
            " WHERE r.status = 'ok' AND r.workload = ? AND r.scale = ? AND r.clients = ?"
            " AND r.pg_version = ? AND s.target = ? ORDER BY r.id DESC LIMIT 1",
            (workload, scale, clients, pg_version, target),
        )
        return float(rows[0]["tps"]) if rows and rows[0]["tps"] is not None else None

    def count_seconds(self, run_id: int) -> int:
        rows = self.query("SELECT count(*) AS n FROM run_seconds WHERE run_id = ?", (run_id,))
        return int(rows[0]["n"])
