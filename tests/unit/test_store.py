"""The results database: migrations and round trips through a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pgdyno.errors import StoreError
from pgdyno.pgbench.logs import merge_intervals, parse_aggregate_log, per_second
from pgdyno.pgbench.output import parse_summary
from pgdyno.records import RunCell, RunRecord
from pgdyno.store.migrate import latest_version, migrate
from pgdyno.store.results import ResultsStore

PGBENCH = Path(__file__).parent.parent / "data" / "pgbench" / "pg18"


def recorded_run() -> RunRecord:
    summary = parse_summary((PGBENCH / "tpcb_r.stdout").read_text())
    streams = [
        list(parse_aggregate_log(path.read_text().splitlines()))
        for path in sorted(PGBENCH.glob("tpcb_r.agg.*.log"))
    ]
    return RunRecord(
        cell=RunCell(0, 2, "tpcb-like", 2, 2, 1), status="ok",
        started_at="2026-11-21T12:00:00Z", finished_at="2026-11-21T12:00:03Z", duration_s=3,
        protocol="simple", rate=None, warmup_s=0, pg_version="18.6", pgbench_version="18.6",
        pgbench_argv=("pgbench", "-c", "2"), settings={"work_mem": "4096 kB"},
        dataset_bytes=30_000_000, summary=summary,
        seconds=tuple(per_second(merge_intervals(streams))),
    )  # fmt: skip


def test_migrations_apply_once(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "r.sqlite", isolation_level=None)
    assert migrate(conn) == list(range(1, latest_version() + 1))
    assert migrate(conn) == []
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"schema_migrations", "sessions", "runs", "run_seconds", "run_statements"} <= tables


def test_a_newer_schema_is_refused(tmp_path: Path):
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', 'x')")
    with pytest.raises(StoreError, match="newer than this pgdyno"):
        ResultsStore(path)


def test_run_round_trip(tmp_path: Path):
    run = recorded_run()
    with ResultsStore(tmp_path / "r.sqlite") as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", {"cpu_count": 2}, {})
        run_id = store.add_run(session, run)
        store.finish_session(session, "done")
        got = store.get_run(run_id)
        listed = store.list_runs()
    assert got is not None and run.summary is not None
    assert got["tps"] == run.summary.tps
    assert got["summary"]["transactions"] == run.summary.transactions
    assert len(got["statements"]) == len(run.summary.statements) == 11
    assert len(got["seconds"]) == len(run.seconds) > 0
    assert got["seconds"][0]["tps"] == run.seconds[0].tps
    assert got["settings"] == {"work_mem": "4096 kB"} and got["host"] == {"cpu_count": 2}
    assert listed[0]["id"] == run_id


def test_unwritable_location_is_one_sentence(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="choose another --results path"):
        ResultsStore(blocker / "r.sqlite")
