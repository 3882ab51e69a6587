"""Reading commands read a results store as it is (issue 31, item 5): an export read with
--results keeps every byte (even read-only, even as root, who could write it), a role with
SELECT alone reports on a PostgreSQL store, and an older schema is named, not migrated."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import psycopg
import pytest

from conftest import plain_role, schema_1_database
from pgdyno.environment import ResultsLocation
from pgdyno.postgres.cluster import Sandbox
from pgdyno.results.exchange import export_runs, import_runs
from pgdyno.results.open import open_results
from pgdyno.results.store import ResultsStore
from pgdyno.results.transfer import selected_run_ids
from store_runs import new_comparison, run_at


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def export(tmp_path: Path) -> Path:
    """An export of a bench session and a comparison of two sets: four runs."""
    source = tmp_path / "source.sqlite"
    with ResultsStore(source) as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18",
                                      {"hostname": "db-a"}, {})  # fmt: skip
        store.add_run(session, run_at(0))
        store.add_run(session, run_at(1))
        store.finish_session(session, "done")
        comparison = store.comparisons.create(new_comparison())
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        for i, name in enumerate(("a", "b")):
            store.add_run(session, run_at(10 + i, comparison_id=comparison, set_name=name))
        store.comparisons.finish(comparison, "done")
        store.finish_session(session, "done")
        file = tmp_path / "shared" / "all.pgdyno"
        file.parent.mkdir()
        export_runs(store.db, file, selected_run_ids(store.db))
    return file


READING = (
    ("runs", "list", "--json"),
    ("runs", "show", "3", "--json"),
    ("report", "--all", "--json"),
    ("report", "--comparison", "1", "--json"),
)


def test_reading_a_read_only_export_changes_nothing(run_cli, workdir: Path, export: Path) -> None:
    export.chmod(0o444)
    before, beside = digest(export), sorted(export.parent.iterdir())
    for command in READING:
        done = run_cli(workdir, *command, "--results", str(export))
        assert done.code == 0, (command, done.stderr)
        json.loads(done.stdout)
    assert digest(export) == before  # not even its journal mode (WAL) changed
    assert sorted(export.parent.iterdir()) == beside  # no -wal, -shm or -journal beside it


def test_a_role_with_select_alone_reports_on_a_postgresql_store(
    run_cli, workdir: Path, export: Path, results_server: Sandbox, pg_results: str
) -> None:
    with open_results(ResultsLocation.of(pg_results)) as store:  # its owner fills it
        assert import_runs(store.db, export).runs == 4
    dbname = pg_results.rsplit("dbname=", 1)[1]
    reader = plain_role(results_server, "pgdyno_select_only").replace(
        "dbname=postgres", f"dbname={dbname}"
    )
    with psycopg.connect(pg_results, autocommit=True) as conn:
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO pgdyno_select_only")
    for command in READING:
        done = run_cli(workdir, *command, "--results", reader)
        assert done.code == 0, (command, done.stderr)
        assert len(json.loads(done.stdout)) > 0


def test_reading_an_older_schema_reads_a_private_copy_and_leaves_the_file_as_it_was(
    run_cli, workdir: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old.sqlite"
    schema_1_database(old)
    before = digest(old)
    scratch = set(Path(tempfile.gettempdir()).glob("pgdyno-read-*"))
    for _ in range(2):  # read twice: the first read leaves nothing the second depends on
        done = run_cli(workdir, "runs", "list", "--json", "--results", str(old))
        assert done.code == 0, done.stderr
        assert isinstance(json.loads(done.stdout), list)
    assert digest(old) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.sqlite"]  # no -wal, no -shm
    assert set(Path(tempfile.gettempdir()).glob("pgdyno-read-*")) <= scratch  # copies removed
