"""`runs export` and `runs import` between real results databases (SQLite files and a
PostgreSQL sandbox): the same runs arrive, twice adds nothing, bad files change nothing."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import PGDYNO, one_clear_sentence, schema_1_database
from pgdyno.environment import ResultsLocation
from pgdyno.errors import StoreUnavailable, UsageError
from pgdyno.results.encode import to_json
from pgdyno.results.exchange import export_runs, import_runs
from pgdyno.results.open import open_results
from pgdyno.results.store import ResultsStore
from pgdyno.results.transfer import selected_run_ids
from store_runs import new_comparison, run_at

# What a copied run may change: the ids the target numbers its rows with.
_IDS = ("id", "session_id", "comparison_id")


def source_store(path: Path) -> None:
    """Two hosts' bench sessions and a comparison of two sets, six runs in all."""
    with ResultsStore(path) as store:
        for host, offset in (("db-a", 0), ("db-b", 100)):
            session = store.begin_session(
                ["pgdyno", "bench"], "sandbox pg18",
                {"hostname": host, "machine_id": f"{host}-id", "kernel": "6.1"}, {},
            )  # fmt: skip
            for i in range(2):
                store.add_run(session, run_at(offset + i))
            store.finish_session(session, "done")
        comparison = store.comparisons.create(new_comparison())
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        for i, name in enumerate(("a", "b")):
            store.add_run(session, run_at(200 + i, comparison_id=comparison, set_name=name))
        store.comparisons.finish(comparison, "done")


def runs_as_json(store: ResultsStore) -> list[dict[str, Any]]:
    out = []
    for run_id in selected_run_ids(store.db):
        run = store.get_run(run_id)
        assert run is not None
        out.append({k: v for k, v in to_json(run).items() if k not in _IDS})
    return out


def counts(store: ResultsStore) -> dict[str, int]:
    tables = ("sessions", "runs", "comparisons", "comparison_sets", "run_seconds",
              "run_samples", "run_events", "run_statements")  # fmt: skip
    return {t: store.db.query(f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in tables}


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "source.sqlite"
    source_store(source)
    file = tmp_path / "all.pgdyno"
    with ResultsStore(source) as store:
        copied = export_runs(store.db, file, selected_run_ids(store.db))
    assert (copied.runs, copied.sessions, copied.comparisons) == (6, 3, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.pgdyno", "source.sqlite"]
    return source, file


def test_an_export_imported_into_a_fresh_file_holds_the_same_runs_once(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    source, file = exported
    with ResultsStore(tmp_path / "fresh.sqlite") as target:
        target.add_run(target.begin_session(["x"], "t", {}, {}), run_at(999))  # ids shift
        first = import_runs(target.db, file)
        second = import_runs(target.db, file)
        got = runs_as_json(target)[1:]
        comparisons = target.db.query("SELECT id, name, status FROM comparisons")
        sets = target.db.query("SELECT comparison_id, name FROM comparison_sets")
    with ResultsStore(source) as store:
        want = runs_as_json(store)
    assert (first.runs, first.sessions, first.comparisons, first.already) == (6, 3, 1, 0)
    assert (second.runs, second.sessions, second.comparisons, second.already) == (0, 0, 0, 6)
    assert got == want  # timelines, statements, samples, events, settings, host identity
    assert {w["host"].get("hostname") for w in got} == {"db-a", "db-b", None}
    assert comparisons == [{"id": 1, "name": "p", "status": "done"}]
    assert sets == [{"comparison_id": 1, "name": "a"}, {"comparison_id": 1, "name": "b"}]


def test_an_export_merges_into_postgresql_and_reads_as_a_store_itself(
    exported: tuple[Path, Path], pg_results: str
) -> None:
    _, file = exported
    with open_results(ResultsLocation.of(pg_results)) as target:
        assert import_runs(target.db, file).runs == 6
        assert import_runs(target.db, file).runs == 0
        got = runs_as_json(target)
    with ResultsStore(file, writing=False) as as_store:  # `--results FILE` reads an export
        in_file = runs_as_json(as_store)
    assert got == in_file and len(got) == 6


def test_a_selection_exports_only_its_runs(exported: tuple[Path, Path], tmp_path: Path) -> None:
    source, _ = exported
    with ResultsStore(source) as store:
        copied = export_runs(store.db, tmp_path / "cmp.pgdyno",
                             selected_run_ids(store.db, comparison_id=1))  # fmt: skip
        with pytest.raises(UsageError, match="already exists"):
            export_runs(store.db, tmp_path / "cmp.pgdyno", [1])
    assert (copied.runs, copied.sessions, copied.comparisons) == (2, 1, 1)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("make", "refusal"),
    [
        (lambda p: p.write_bytes(b"runs,tps\n1,500\n"), "not a pgdyno export (not a SQLite"),
        (
            lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit(),
            "SQLite file but not a pgdyno export",
        ),
    ],
    ids=["csv", "foreign-sqlite"],
)
def test_a_foreign_file_is_refused_and_nothing_is_added(tmp_path: Path, make, refusal) -> None:
    file = tmp_path / "foreign.pgdyno"
    make(file)
    with ResultsStore(tmp_path / "t.sqlite") as target:
        before = counts(target)
        with pytest.raises(UsageError, match=re.escape(refusal)):
            import_runs(target.db, file)
        assert counts(target) == before


def test_a_damaged_export_is_refused_and_nothing_is_added(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    _, file = exported
    data = bytearray(file.read_bytes())
    data[4096 : 4096 * 3] = b"\xff" * (4096 * 2)  # pages of tables overwritten
    file.write_bytes(bytes(data))
    with ResultsStore(tmp_path / "t.sqlite") as target:
        before = counts(target)
        with pytest.raises(StoreUnavailable, match=r"damaged|cannot be read"):
            import_runs(target.db, file)
        assert counts(target) == before


def test_a_run_whose_session_is_missing_stops_the_import_before_anything_is_added(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    _, file = exported
    with sqlite3.connect(file) as conn:  # runs 5 and 6 lose their session; the others are fine
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("DELETE FROM sessions WHERE id = (SELECT session_id FROM runs WHERE id = 6)")
    with ResultsStore(tmp_path / "t.sqlite") as target:
        before = counts(target)
        with pytest.raises(StoreUnavailable, match=rf"run 5 in {file} belongs to session 3, wh"):
            import_runs(target.db, file)
        assert counts(target) == before


def test_an_older_export_is_migrated_in_a_copy_and_left_as_it_was(tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    schema_1_database(old)
    before = digest(old)
    with ResultsStore(tmp_path / "t.sqlite") as target:
        assert import_runs(target.db, old).runs == 1
        run = target.get_run(1)
    assert run is not None and run.tps == 123.5
    assert digest(old) == before


def test_the_commands_export_and_import_with_one_sentence_on_errors(
    run_cli, workdir: Path, exported: tuple[Path, Path], tmp_path: Path
) -> None:
    source, _ = exported
    out = tmp_path / "two.pgdyno"
    done = run_cli(workdir, "runs", "export", str(out), "1-2", "--results", str(source))
    assert done.code == 0 and "2 runs exported" in done.stdout
    fresh = str(tmp_path / "fresh.sqlite")
    first = run_cli(workdir, "runs", "import", str(out), "--results", fresh, "--json")
    again = run_cli(workdir, "runs", "import", str(out), "--results", fresh, "--json")
    assert first.code == again.code == 0
    assert '"runs": 2' in first.stdout and '"already": 2' in again.stdout
    missing = run_cli(workdir, "runs", "export", str(tmp_path / "x"), "77", "--results",
                      str(source))  # fmt: skip
    assert missing.code == 2 and "there is no run 77" in one_clear_sentence(missing.stderr)
    assert not (tmp_path / "x").exists()
    nothing = run_cli(workdir, "runs", "import", str(tmp_path / "nope"), "--results", fresh)
    assert nothing.code == 2 and "no file" in one_clear_sentence(nothing.stderr)


def test_a_session_exported_while_it_ran_ends_in_the_target_when_exported_again(
    tmp_path: Path,
) -> None:
    source, target = tmp_path / "s.sqlite", tmp_path / "t.sqlite"
    with ResultsStore(source) as store, ResultsStore(target) as into:
        session = store.begin_session(["pgdyno", "bench"], "t", {}, {})
        store.add_run(session, run_at(1))
        export_runs(store.db, tmp_path / "early.pgdyno", selected_run_ids(store.db))
        store.add_run(session, run_at(2))
        store.finish_session(session, "done")
        export_runs(store.db, tmp_path / "late.pgdyno", selected_run_ids(store.db))
        assert import_runs(into.db, tmp_path / "early.pgdyno").runs == 1
        late = import_runs(into.db, tmp_path / "late.pgdyno")
        statuses = into.db.query("SELECT status, finished_at FROM sessions")
    assert (late.runs, late.sessions, late.already) == (1, 0, 1)
    assert len(statuses) == 1 and statuses[0]["status"] == "done" and statuses[0]["finished_at"]


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("UPDATE sessions SET server = '{\"version\": ' WHERE id = 2",
         "sessions.server of the row of id 2 holds damaged JSON"),
        ("UPDATE sessions SET host = '5' WHERE id = 1",
         "sessions.host of the row of id 1 holds JSON int where an object belongs"),
        ("UPDATE runs SET settings = '[NaN]' WHERE id = 4",
         "runs.settings of the row of id 4 holds damaged JSON (NaN is not valid JSON)"),
        ("UPDATE run_events SET detail = 'x' WHERE run_id = 6",
         "run_events.detail of the row of run_id 6 holds damaged JSON"),
        ("UPDATE comparison_sets SET requested = '[]' WHERE name = 'b'",
         "comparison_sets.requested of the row of comparison_id 1 holds JSON list"),
        ("UPDATE runs SET tps = 'fast' WHERE id = 3",
         "runs.tps of the row of id 3 holds text where REAL belongs"),
        ("ALTER TABLE runs DROP COLUMN waits", "its table runs has no column waits"),
        ("ALTER TABLE sessions ADD COLUMN note TEXT",
         "its table sessions has a column note pgdyno does not write"),
    ],
)  # fmt: skip
def test_a_damaged_export_is_refused_whole_before_anything_is_added(
    run_cli, workdir: Path, exported: tuple[Path, Path], tmp_path: Path, damage: str, named: str
) -> None:
    _, file = exported
    with sqlite3.connect(file) as conn:
        conn.execute(damage)
    target = tmp_path / "shared.sqlite"
    with ResultsStore(target) as store:
        store.add_run(store.begin_session(["x"], "t", {}, {}), run_at(999))
        before = counts(store)
    done = run_cli(workdir, "runs", "import", str(file), "--results", str(target))
    assert done.code == 3, done.stdout + done.stderr
    sentence = one_clear_sentence(done.stderr)
    assert f"{file} cannot be imported: {named}" in sentence, sentence
    assert "nothing was imported" in sentence
    with ResultsStore(target) as store:
        assert counts(store) == before
    for reading in (("report", "--all", "--json"), ("runs", "list", "--json")):
        assert run_cli(workdir, *reading, "--results", str(target)).code == 0


def concurrent_imports(file: Path, results: str, workdir: Path) -> list[int]:
    """Four `pgdyno runs import FILE` started at once; the runs each added."""
    argv = [str(PGDYNO), "runs", "import", str(file), "--results", results, "--json",
            "--workdir", str(workdir)]  # fmt: skip
    pipes = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    imports = [subprocess.Popen(argv, text=True, **pipes) for _ in range(4)]
    done = [(p.wait(timeout=300), *p.communicate()) for p in imports]
    assert [code for code, _, _ in done] == [0, 0, 0, 0], [err for _, _, err in done]
    return sorted(json.loads(out)["runs"] for _, out, _ in done)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_concurrent_imports_of_one_file_add_its_runs_once(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """Four `pgdyno runs import` of one export at once, as four hosts' fleet children end
    together (issue 31, item 7), in three rounds (the race is not won every time): each import
    succeeds, and the runs are there once. Before, some failed on the runs' unique uid
    (PostgreSQL) or on a migration two processes applied to a new file at once (SQLite)."""
    shared = str(request.getfixturevalue("pg_results")) if store == "postgresql" else None
    for round_no in range(3):
        source = tmp_path / f"source-{round_no}.sqlite"
        with ResultsStore(source) as store_:
            session = store_.begin_session(["pgdyno", "bench"], "sandbox pg18", {}, {})
            for i in range(3):
                store_.add_run(session, run_at(1000 * round_no + i))
            store_.finish_session(session, "done")
            export_runs(store_.db, tmp_path / f"{round_no}.pgdyno", selected_run_ids(store_.db))
        results = shared or str(tmp_path / f"new-{round_no}.sqlite")  # SQLite: a new file
        assert concurrent_imports(tmp_path / f"{round_no}.pgdyno", results, tmp_path) == [
            0,
            0,
            0,
            3,
        ]
        with open_results(ResultsLocation.of(results)) as target:
            want = 3 * (round_no + 1) if shared else 3
            assert counts(target)["runs"] == want
