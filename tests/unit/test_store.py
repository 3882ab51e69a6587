"""The results database: migrations and round trips through a real SQLite file."""

from __future__ import annotations

import math
import os
import socket
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import schema_1_database
from pgdyno.environment import ResultsLocation
from pgdyno.errors import StoreError
from pgdyno.process import start_time
from pgdyno.records.health import RunHealth
from pgdyno.results.encode import to_json
from pgdyno.results.migrate import latest_version
from pgdyno.results.open import open_results
from pgdyno.results.sqlite_db import migrate
from pgdyno.results.store import ResultsStore
from store_runs import recorded_run


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
        stored = store.get_run(run_id)
        got = to_json(stored) if stored else None  # as `runs show --json` prints it
        listed = [to_json(r) for r in store.list_runs()]
    assert got is not None and run.summary is not None
    assert got["tps"] == run.summary.tps
    assert got["summary"]["transactions"] == run.summary.transactions
    assert len(got["statements"]) == len(run.summary.statements) == 11
    assert len(got["seconds"]) == len(run.seconds) > 0
    assert got["seconds"][0]["tps"] == run.seconds[0].tps
    assert got["settings"] == {"work_mem": "4096 kB"} and got["host"] == {"cpu_count": 2}
    assert got["latency_p99_ms"] == run.latency.p99_ms and got["latency_source"]
    assert got["seconds"][0]["latency_p50_ms"] == run.seconds[0].latency_p50_ms
    assert got["events"][0]["detail"] == {"reason": "time"}
    assert got["health"]["tps_cv_pct"] == 3.0
    assert listed[0]["id"] == run_id
    with ResultsStore(tmp_path / "r.sqlite") as store:
        assert store.samples(run_id)["cpu.user_pct"] == {
            run.samples[0][0]: 12.5,
            run.samples[1][0]: 14.0,
        }


def test_schema_1_database_is_migrated_without_loss(tmp_path: Path):
    path = tmp_path / "old.sqlite"
    schema_1_database(path)
    with ResultsStore(path) as store:
        stored = store.get_run(1)
        run = to_json(stored) if stored else None
    assert run is not None and run["tps"] == 123.5 and run["seconds"][0]["tps"] == 9
    assert run["latency_source"] == "aggregated log" and run["latency_p99_ms"] is None


def test_unwritable_location_is_one_sentence(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(
        StoreError, match=r"cannot create the results database .*: pass another --results file"
    ):
        ResultsStore(blocker / "r.sqlite")


def dead_pid() -> int:
    """The pid of a real process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def add_owned(path: Path, hostname: str, pid: int, started: int | None) -> None:
    """A session and a comparison left 'running' by the given owner."""
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO sessions (started_at, hostname, pid, owner_started, command, target,"
            " host, server) VALUES ('t', ?, ?, ?, '[]', 'sandbox pg18', '{}', '{}')",
            (hostname, pid, started),
        )
        db.execute(
            "INSERT INTO comparisons (name, plan_path, plan_digest, plan_text, mode, baseline,"
            " scales, started_at, hostname, pid, owner_started)"
            " VALUES ('p', 'p.toml', 'd', '', 'sets', 'a', '[1]', 't', ?, ?, ?)",
            (hostname, pid, started),
        )


def statuses(path: Path) -> list[tuple[str, str, bool]]:
    with sqlite3.connect(path) as db:
        return [
            (table, *row)
            for table in ("sessions", "comparisons")
            for row in db.execute(
                f"SELECT status, found_interrupted_at IS NOT NULL FROM {table} ORDER BY id"
            )
        ]


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        ("gone", "interrupted"),
        ("pid reused", "interrupted"),  # our pid, but not the process that started the rows
        ("alive", "running"),
        ("other host", "running"),  # a pid of another machine says nothing here
    ],
)
def test_rows_of_a_killed_pgdyno_are_found_interrupted(tmp_path: Path, owner, expected):
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    me, started, here = os.getpid(), start_time(os.getpid()), socket.gethostname()
    assert started is not None
    add_owned(path, *{
        "gone": (here, dead_pid(), None),
        "pid reused": (here, me, started - 1),
        "alive": (here, me, started),
        "other host": (here + ".elsewhere", dead_pid(), None),
    }[owner])  # fmt: skip
    open_results(ResultsLocation(path), writing=False).close()  # a reading command too
    found = expected == "interrupted"
    assert statuses(path) == [("sessions", expected, found), ("comparisons", expected, found)]


def test_comparison_left_running_by_an_older_pgdyno_gets_its_owner(tmp_path: Path):
    """Schema 3 had no owner for comparisons: the session of their last run is it."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=3)
    conn.execute(
        "INSERT INTO sessions (started_at, hostname, pid, command, target, host, server)"
        " VALUES ('t', ?, ?, '[]', 'compare p', '{}', '{}')",
        (socket.gethostname(), dead_pid()),
    )
    conn.execute(
        "INSERT INTO comparisons (name, plan_path, plan_digest, plan_text, mode, baseline,"
        " scales, started_at) VALUES ('p', 'p.toml', 'd', '', 'sets', 'a', '[1]', 't')"
    )
    conn.execute(
        "INSERT INTO runs (session_id, status, started_at, finished_at, workload, scale, clients,"
        " jobs, duration_s, protocol, repeat, warmup_s, tps, pg_version, pgbench_version,"
        " pgbench_argv, settings, comparison_id, set_name) VALUES (1, 'ok', 'a', 'b',"
        " 'tpcb-like', 1, 1, 1, 10, 'simple', 1, 0, 123.5, '18.6', '18.6', '[]', '{}', 1, 'a')"
    )
    conn.close()
    ResultsStore(path).close()
    assert statuses(path) == [
        ("sessions", "interrupted", True),
        ("comparisons", "interrupted", True),
    ]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"rate": math.inf}, "refused to store rate = inf"),
        (
            {"health": RunHealth(measured_s=3, tps_cv_pct=math.nan)},
            "refused to store the run's health holding a non",
        ),
        ({"settings": {"x": -math.inf}}, "refused to store the settings holding a non-finite"),
    ],
)
def test_non_finite_numbers_never_reach_the_database(tmp_path: Path, change, refusal):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", {}, {})
        with pytest.raises(StoreError, match=refusal):
            store.add_run(session, replace(recorded_run(), **change))
        assert store.list_runs() == []  # the run's transaction wrote nothing
        with pytest.raises(StoreError, match="refused to store the host facts holding a non"):
            store.begin_session(["pgdyno"], "sandbox pg18", {"load": math.nan}, {})
