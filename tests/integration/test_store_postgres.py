"""The results store on a real PostgreSQL (a sandbox started by the suite): the same tables,
records and guarantees as the SQLite file, with many writers at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from conftest import one_clear_sentence, plain_role
from pgdyno.environment import ResultsLocation
from pgdyno.errors import StoreUnavailable, UsageError
from pgdyno.postgres.cluster import Sandbox
from pgdyno.results.encode import to_json
from pgdyno.results.migrate import latest_version
from pgdyno.results.open import open_results
from pgdyno.results.postgres_db import PostgresDatabase
from store_runs import new_comparison, recorded_run, run_at

TESTS = Path(__file__).parent.parent


def rows(conninfo: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(query).fetchall()


def test_migrations_apply_once_under_the_lock(pg_results: str) -> None:
    db = PostgresDatabase(pg_results)
    try:
        assert db.migrate() == list(range(1, latest_version() + 1))
        assert db.migrate() == []
        assert db.schema_version() == latest_version()
    finally:
        db.close()
    tables = {r[0] for r in rows(pg_results, "SELECT tablename FROM pg_tables")}
    assert {"schema_migrations", "sessions", "runs", "run_seconds", "run_samples"} <= tables
    kinds = dict(rows(pg_results, "SELECT column_name, data_type FROM information_schema.columns"
                                  " WHERE table_name = 'runs'"))  # fmt: skip
    assert kinds["id"] == "bigint" and kinds["tps"] == "double precision"


def stored_json(location: ResultsLocation) -> dict[str, object]:
    with open_results(location) as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", {"cpu_count": 2}, {})
        run_id = store.add_run(session, recorded_run())
        store.finish_session(session, "done")
        stored = store.get_run(run_id)
        assert stored is not None
        return to_json(stored)


def test_a_run_reads_back_from_postgresql_exactly_as_from_sqlite(
    pg_results: str, tmp_path: Path
) -> None:
    from_pg = stored_json(ResultsLocation.of(pg_results))
    from_sqlite = stored_json(ResultsLocation(tmp_path / "r.sqlite"))
    assert from_pg["seconds"] and from_pg["statements"] and from_pg["events"]
    assert from_pg == from_sqlite


def test_comparisons_keep_their_sets_and_runs(pg_results: str) -> None:
    with open_results(ResultsLocation.of(pg_results)) as store:
        comparison = store.comparisons.create(new_comparison())
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        for i, name in enumerate(("a", "b", "b", "a")):
            store.add_run(session, run_at(i, comparison_id=comparison, set_name=name))
        store.comparisons.record_effective(comparison, "b", {"pg": {"work_mem": "8MB"}})
        store.comparisons.finish(comparison, "done")
        got = store.comparisons.get(comparison)
        outcomes = store.comparisons.runs(comparison)
    assert got is not None and got.status == "done"
    assert [s.name for s in got.sets] == ["a", "b"]
    assert got.sets[1].effective == {"pg": {"work_mem": "8MB"}}
    assert [o.set_name for o in outcomes] == ["a", "b", "b", "a"]


def test_four_processes_writing_at_once_lose_nothing(pg_results: str) -> None:
    """Each process also creates the schema on its first open: the advisory lock lets only
    one migrate, the others wait and find it done."""
    writer = [sys.executable, str(TESTS / "store_runs.py")]  # one session of runs, then exits
    writers = [subprocess.Popen([*writer, str(w), "15", pg_results]) for w in range(4)]
    assert [w.wait(timeout=300) for w in writers] == [0, 0, 0, 0]
    assert rows(pg_results, "SELECT count(*), count(DISTINCT id), count(DISTINCT uid)"
                            " FROM runs") == [(60, 60, 60)]  # fmt: skip
    assert rows(pg_results, "SELECT count(*) FROM sessions WHERE status = 'done'") == [(4,)]
    assert rows(pg_results, "SELECT count(*) FROM schema_migrations") == [(latest_version(),)]
    per_run = rows(pg_results, "SELECT count(DISTINCT run_id) FROM run_seconds")
    assert per_run == [(60,)]


def test_the_password_is_used_but_never_kept_or_shown(
    results_server: Sandbox, pg_results: str, run_cli, workdir: Path
) -> None:
    secret = "Sesame-7f3a"
    dsn = f"{pg_results} password={secret}"
    result = run_cli(workdir, "runs", "list", "--results", dsn)
    assert result.code == 2 and "no results database" in one_clear_sentence(result.stderr)
    assert secret not in result.stderr
    with open_results(ResultsLocation.of(dsn)) as store:
        session = store.begin_session(["pgdyno", "bench", "--results", "x"], "t", {}, {})
        store.add_run(session, recorded_run())
        assert secret not in str(store.path)
    listed = run_cli(workdir, "runs", "list", "--results", dsn)
    assert listed.code == 0 and secret not in listed.stdout + listed.stderr
    dump = rows(pg_results, "SELECT s::text FROM sessions s UNION ALL SELECT r::text FROM runs r")
    assert dump and not any(secret in str(row) for row in dump)
    assert secret not in repr(ResultsLocation.of(dsn))


def test_a_connection_string_is_never_taken_for_a_file(
    run_cli, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(workdir, "runs", "list", "--results", "host=/nonexistent dbname=results")
    assert result.code == 3
    assert "cannot connect to the results database" in one_clear_sentence(result.stderr)
    assert list(tmp_path.iterdir()) == []  # no directory named `host=` appeared
    bad = run_cli(workdir, "runs", "list", "--results", "host=x nosuchkey=1")
    assert bad.code == 2
    assert "--results is not a valid connection string" in one_clear_sentence(bad.stderr)
    assert list(tmp_path.iterdir()) == []
    uri = run_cli(
        workdir, "runs", "list", "--results", "postgresql://u:Sesame-uri@/db?host=/nonexistent"
    )
    assert uri.code == 3 and "Sesame-uri" not in uri.stdout + uri.stderr


def test_a_database_this_user_cannot_write_is_refused_before_any_run(
    results_server: Sandbox, pg_results: str
) -> None:
    PostgresDatabase(pg_results).close()  # connects only
    with open_results(ResultsLocation.of(pg_results)):
        pass  # the schema made by its owner
    reader = plain_role(results_server, "pgdyno_reader")
    dbname = pg_results.rsplit("dbname=", 1)[1]
    reader_dsn = reader.replace("dbname=postgres", f"dbname={dbname}")
    with psycopg.connect(pg_results, autocommit=True) as conn:
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO pgdyno_reader")
    with pytest.raises(StoreUnavailable, match="does not let this user write"):
        open_results(ResultsLocation.of(reader_dsn))
    with open_results(ResultsLocation.of(reader_dsn), writing=False) as store:
        assert store.list_runs() == []


def test_reading_commands_do_not_create_tables_in_an_empty_database(pg_results: str) -> None:
    with pytest.raises(UsageError, match=r"there is no results database at .* yet"):
        open_results(ResultsLocation.of(pg_results), writing=False)
    assert rows(pg_results, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
