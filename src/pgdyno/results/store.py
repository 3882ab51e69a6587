"""The results database: sessions, runs, per-second series, per-statement latencies.

One implementation for both engines: the statements are written once (results/database.py) and
run on a SQLite file (results/sqlite_db.py) or a PostgreSQL database (results/postgres_db.py). Each
run is written in its own transaction as soon as it finishes, so a crash loses at most the run
in progress.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgdyno.errors import StoreError, StoreUnavailable
from pgdyno.records import RunRecord
from pgdyno.records.capacity import Capacity
from pgdyno.records.stored import ReportSource, RunListing, StoredRun
from pgdyno.records.waits import WaitProfile
from pgdyno.results.comparisons import Comparisons
from pgdyno.results.database import Database
from pgdyno.results.decode import (
    RUN_ROW_SQL,
    capacity,
    loads,
    run_listing,
    stored_run,
    waits,
)
from pgdyno.results.encode import (
    devices_json,
    dumps,
    health_json,
    interference_json,
    now_iso,
    profile_json,
    to_json,
    tpcc_json,
    waits_json,
)
from pgdyno.results.owners import Owner, any_abandoned, mark_interrupted
from pgdyno.results.sqlite_db import SqliteDatabase
from pgdyno.results.uids import any_missing, fill_missing, new_uid

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


def _finite(value: float | None, what: str) -> float | None:
    if value is not None and not math.isfinite(value):
        raise StoreError(
            f"refused to store {what} = {value}, not a finite number; this is a bug in pgdyno: "
            "please report it."
        )
    return value


class ResultsStore:
    """The results backend (store.interface.ResultsBackend) on one database connection.

    `where`: a SQLite file (opened here; `writing` refuses at once a file this command could
    not write, before any run, and without it the file is opened read-only and read as it is)
    or an open store.database.Database (results/open.py opens the PostgreSQL one)."""

    def __init__(self, where: Path | Database, *, writing: bool = True) -> None:
        self.db = SqliteDatabase(where, writing=writing) if isinstance(where, Path) else where
        self.comparisons = Comparisons(self.db)
        if not writing:
            return  # read as it is (results/open.py tidies a store it may write first)
        try:
            self._tidy_up()
        except BaseException:
            self.db.close()
            raise

    @property
    def path(self) -> Path | str:
        return self.db.where

    def _tidy_up(self) -> None:
        """Sessions and comparisons left 'running' by a killed pgdyno become 'interrupted';
        rows from before uids get theirs."""
        try:
            if any_abandoned(self.db):  # else no write, so a read-only database can be read
                with self.db.transaction():
                    mark_interrupted(self.db, now_iso())
            if any_missing(self.db):  # rows written before uids existed: once per database
                fill_missing(self.db)
        except StoreUnavailable:
            pass  # a database this command cannot write is still read; its statuses stay

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------

    def begin_session(
        self,
        command: list[str],
        target: str,
        host: Mapping[str, object],
        server: Mapping[str, object],
    ) -> int:
        me = Owner.me()
        with self.db.transaction():
            return self.db.insert(
                "INSERT INTO sessions (started_at, hostname, pid, owner_started, command, target,"
                " host, server, uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (now_iso(), me.hostname, me.pid, me.started, dumps(command, "the command"),
                 target, dumps(host, "the host facts"), dumps(server, "the server facts"),
                 new_uid()),
            )  # fmt: skip

    def finish_session(self, session_id: int, status: str) -> None:
        with self.db.transaction():
            self.db.execute(
                "UPDATE sessions SET finished_at = ?, status = ? WHERE id = ?",
                (now_iso(), status, session_id),
            )

    def record_capacity(self, session_id: int, found: Capacity) -> None:
        """A capacity sweep's steps and result, kept with its session (rewritten as it goes)."""
        with self.db.transaction():
            self.db.execute(
                "UPDATE sessions SET capacity = ? WHERE id = ?",
                (dumps(to_json(found), "the capacity sweep"), session_id),
            )

    def add_run(self, session_id: int, run: RunRecord) -> int:
        summary = run.summary
        with self.db.transaction():
            lat = run.latency
            run_id = self.db.insert(
                "INSERT INTO runs (session_id, status, started_at, finished_at, workload, scale,"
                " clients, jobs, duration_s, protocol, rate, repeat, warmup_s, tps,"
                " latency_avg_ms, latency_stddev_ms, transactions, failed_transactions,"
                " dataset_bytes, pg_version, pgbench_version, pgbench_argv, settings, summary,"
                " error, stderr, latency_p50_ms, latency_p90_ms, latency_p99_ms,"
                " latency_p999_ms, latency_max_ms, latency_source, health, devices,"
                " comparison_id, set_name, interference, tpcc, waits, profile, uid)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
                    None if run.waits is None else dumps(waits_json(run.waits), "wait profile"),
                    None if run.profile is None
                    else dumps(profile_json(run.profile), "CPU profile"),
                    new_uid(),
                ),
            )  # fmt: skip
            self.db.copy_rows(
                "run_seconds", ("run_id", *SECOND_COLUMNS),
                [(run_id, *(getattr(s, c) for c in SECOND_COLUMNS)) for s in run.seconds],
            )  # fmt: skip
            self.db.copy_rows(
                "run_samples", ("run_id", "metric", "t", "value"),
                [(run_id, metric, t, value) for t, metric, value in run.samples],
            )  # fmt: skip
            self.db.executemany(
                "INSERT INTO run_events (run_id, t, kind, detail) VALUES (?, ?, ?, ?)",
                [(run_id, e.t, e.kind, dumps(e.detail, f"a {e.kind} event")) for e in run.events],
            )
            if summary:
                self.db.executemany(
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
        return self.db.query(query, params)

    def list_runs(
        self,
        limit: int | None = 50,
        session_id: int | None = None,
        comparison_id: int | None = None,
    ) -> list[RunListing]:
        """Newest first; the summary columns, the status of the run's session, and the
        comparison and set the run belongs to. `session_id`, `comparison_id`: only those."""
        tests = [("r.session_id = ?", session_id), ("r.comparison_id = ?", comparison_id)]
        chosen = [(test, value) for test, value in tests if value is not None]
        where = ("WHERE " + " AND ".join(t for t, _ in chosen)) if chosen else ""
        params: tuple[Any, ...] = tuple(value for _, value in chosen)
        columns = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
        rows = self._query(
            f"SELECT {columns}, s.status AS session_status, s.host AS session_host,"
            " r.comparison_id, r.set_name FROM runs r"
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

    def capacity(self, session_id: int) -> Capacity | None:
        """A session's capacity sweep; None for a session of another kind (or none such)."""
        rows = self._query("SELECT capacity FROM sessions WHERE id = ?", (session_id,))
        if not rows or rows[0]["capacity"] is None:
            return None
        where = f"session {session_id}'s capacity sweep"
        return capacity(loads(str(rows[0]["capacity"]), where), where)

    def comparison_capacities(self, comparison_id: int) -> list[tuple[str, Capacity]]:
        """The capacity sweeps of a comparison's sets (`[matrix] capacity_p99`: each a session
        whose server names the comparison and the set), the newest per set, in the order they
        were made."""
        return [(name, found) for name, (_, found) in self.comparison_sweeps(comparison_id).items()]

    def comparison_sweeps(self, comparison_id: int) -> dict[str, tuple[int, Capacity]]:
        """`comparison_capacities` with each sweep's session: set name -> (session, sweep)."""
        rows = self._query(
            "SELECT id, server, capacity FROM sessions WHERE capacity IS NOT NULL ORDER BY id"
        )
        found: dict[str, tuple[int, Capacity]] = {}
        for row in rows:
            server = loads(str(row["server"]), f"session {row['id']}'s server")
            if not isinstance(server, dict) or server.get("comparison_id") != comparison_id:
                continue
            where = f"session {row['id']}'s capacity sweep"
            found.pop(str(server.get("set")), None)
            sweep = capacity(loads(str(row["capacity"]), where), where)
            found[str(server.get("set"))] = (int(row["id"]), sweep)
        return found

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
        self, workload: str, scale: int, clients: int, pg_version: str, target: str,
        *, closed_loop: bool = False,
    ) -> float | None:  # fmt: skip
        """TPS of the latest successful run like this one, to size the latency log's sample;
        with `closed_loop`, of the latest run without a rate (-R): what the server carries
        flat out, where a capacity sweep starts from."""
        rows = self._query(
            "SELECT r.tps FROM runs r JOIN sessions s ON s.id = r.session_id"
            " WHERE r.status = 'ok' AND r.workload = ? AND r.scale = ? AND r.clients = ?"
            " AND r.pg_version = ? AND s.target = ?"
            + (" AND r.rate IS NULL" if closed_loop else "")
            + " ORDER BY r.id DESC LIMIT 1",
            (workload, scale, clients, pg_version, target),
        )
        return float(rows[0]["tps"]) if rows and rows[0]["tps"] is not None else None

    def latest_waits(self, target: str) -> tuple[int, WaitProfile] | None:
        """The newest run against `target` (a session's target label) with a wait profile."""
        rows = self._query(
            "SELECT r.id, r.waits FROM runs r JOIN sessions s ON s.id = r.session_id"
            " WHERE r.status = 'ok' AND r.waits IS NOT NULL AND s.target = ?"
            " ORDER BY r.id DESC LIMIT 1",
            (target,),
        )
        if not rows:
            return None
        run_id = int(rows[0]["id"])
        found = waits(loads(str(rows[0]["waits"]), f"run {run_id}'s wait profile"))
        return None if found is None else (run_id, found)

    def count_seconds(self, run_id: int) -> int:
        rows = self._query("SELECT count(*) AS n FROM run_seconds WHERE run_id = ?", (run_id,))
        return int(rows[0]["n"])


if TYPE_CHECKING:
    from pgdyno.results.interface import ResultsBackend

    def _implements(store: ResultsStore) -> ResultsBackend:
        """mypy checks here that the SQLite store keeps the whole backend interface."""
        return store
