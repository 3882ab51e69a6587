"""Internal errors become one sentence and a fixed exit status (issue 31, item 7).

Each case was an internal error or a misleading message: an export into a directory nothing can
be written in, an import of a file with pgdyno's table names but not its columns, a storage size
no number can hold, a device or a missing directory as the results file, a 64 KB connection
string. Real files, real SQLite, the CLI in-process; nothing here needs a server.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import one_clear_sentence
from pgdyno.results.sqlite_db import SqliteDatabase
from pgdyno.results.store import ResultsStore
from store_runs import recorded_run

REPORT_STORE = Path(__file__).parent.parent / "data" / "report" / "results.sqlite"


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A copy of a results store holding real runs."""
    path = tmp_path / "recorded.sqlite"
    shutil.copyfile(REPORT_STORE, path)
    return path


@pytest.fixture
def immutable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory no one, root included, can create a file in (chattr +i); restored after."""
    if shutil.which("chattr") is None:
        pytest.skip("needs e2fsprogs' chattr to make a directory immutable")
    path = tmp_path / "immutable"
    path.mkdir()
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"this filesystem takes no immutable flag: {made.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("where", ["immutable", "/proc", "/proc/self"])
def test_an_export_where_no_file_can_be_written_is_refused(
    where: str, immutable_dir: Path, recorded: Path, shared_workdir: Path, run_cli
) -> None:
    directory = immutable_dir if where == "immutable" else Path(where)
    target = directory / "runs.pgdyno"
    result = run_cli(shared_workdir, "runs", "export", str(target), "--results", str(recorded))
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert f"cannot write the export {target} (" in line and "choose a directory" in line
    assert list(immutable_dir.iterdir()) == []


def bare_tables(path: Path) -> Path:
    """A SQLite file at pgdyno's current schema version whose tables have an id column only."""
    SqliteDatabase(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        if table != "schema_migrations":
            conn.execute(f"DROP TABLE {table}")
    for table in ("sessions", "runs"):
        conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY)")
        conn.execute(f"INSERT INTO {table} VALUES (1)")
    conn.close()
    return path


def test_an_import_of_bare_tables_is_refused(tmp_path: Path, shared_workdir: Path, run_cli) -> None:
    export = bare_tables(tmp_path / "bare.pgdyno")
    results = tmp_path / "results.sqlite"
    result = run_cli(shared_workdir, "runs", "import", str(export), "--results", str(results))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3  # results/validate.py's check of every table (item 5) names it
    assert f"{export} cannot be imported: its table " in line and "nothing was imported" in line


def test_a_storage_size_no_number_holds_is_refused(
    tmp_path: Path, shared_workdir: Path, run_cli
) -> None:
    plan = tmp_path / "huge.toml"
    plan.write_text(
        'name = "huge"\n[matrix]\nworkloads = ["tpcb-like"]\nscales = ["small"]\nclients = [1]\n'
        f'duration = 5\n[[set]]\nname = "a"\n[set.storage]\nfilesystem = "ext4"\n'
        f'size = "{"9" * 400}"\n'
    )
    result = run_cli(shared_workdir, "plan", "check", str(plan))
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert "storage.size" in line and "is larger than any file can be" in line
    assert len(line) < 400  # the 400 digits are not repeated


def test_a_device_as_results_file_is_refused_and_nothing_is_made_beside_it(
    shared_workdir: Path, run_cli
) -> None:
    beside = [Path("/dev/null-journal"), Path("/dev/null-wal"), Path("/dev/null-shm")]
    for path in beside:  # left by this very defect: a regular file where /dev holds devices
        if path.is_file():
            path.unlink()
    result = run_cli(shared_workdir, "runs", "list", "--results", "/dev/null")
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert "the results database /dev/null is not a regular file" in line
    assert "disk space" not in line
    assert [p for p in beside if p.exists()] == []


def test_a_results_file_in_a_missing_directory_is_refused(
    tmp_path: Path, recorded: Path, shared_workdir: Path, run_cli
) -> None:
    export = tmp_path / "runs.pgdyno"
    assert (
        run_cli(shared_workdir, "runs", "export", str(export), "--results", str(recorded)).code == 0
    )
    missing = tmp_path / "nonexistent" / "dir"
    result = run_cli(shared_workdir, "runs", "import", str(export), "--results",
                     str(missing / "r.sqlite"))  # fmt: skip
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert f"there is no directory {missing} for the results database r.sqlite" in line
    assert not missing.parent.exists()


def test_the_default_results_file_is_made_with_its_work_directory(
    tmp_path: Path, recorded: Path, run_cli
) -> None:
    """The default file, <workdir>/results.sqlite (docs/results-store.md), and its directory are
    made by pgdyno."""
    export = tmp_path / "runs.pgdyno"
    assert run_cli(tmp_path, "runs", "export", str(export), "--results", str(recorded)).code == 0
    workdir = tmp_path / "new-workdir"
    result = run_cli(tmp_path, "runs", "import", str(export), "--workdir", str(workdir))
    assert result.code == 0, result.stderr
    assert (workdir / "results.sqlite").is_file()


def test_a_64_kb_connection_string_gives_one_short_sentence(shared_workdir: Path, run_cli) -> None:
    dsn = f"host=/nonexistent port=1 dbname={'x' * 65536}"
    result = run_cli(shared_workdir, "datasets", "list", "--dsn", dsn)
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert "characters]..." in line and len(line) < 1000


def test_rollback_dsn_says_what_the_journal_holds(tmp_path: Path, run_cli) -> None:
    result = run_cli(tmp_path, "rollback", "--dsn", "host=/nonexistent port=1")
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert f"the journal of {tmp_path} holds no change to any server" in line
    assert "(none)" not in line


def test_the_waits_of_a_failed_run_say_it_failed(tmp_path: Path, run_cli) -> None:
    results = tmp_path / "results.sqlite"
    with ResultsStore(results) as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", {}, {})
        failed = replace(recorded_run(), status="failed", error="pgbench exited with 2", waits=None)
        run_id = store.add_run(session, failed)
        store.finish_session(session, "failed")
    result = run_cli(tmp_path, "runs", "show", str(run_id), "--waits", "--results", str(results))
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert f"run {run_id} has no wait profile because it failed" in line
    assert "--wait-sample-hz" not in line


def test_an_export_given_by_a_relative_path_is_imported(
    tmp_path: Path, recorded: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runs import runs.pgdyno` in the file's directory: the file was opened by a file URI
    that a relative path cannot give (internal error: ValueError)."""
    monkeypatch.chdir(tmp_path)
    assert run_cli(tmp_path, "runs", "export", "runs.pgdyno", "--results", str(recorded)).code == 0
    result = run_cli(tmp_path, "runs", "import", "runs.pgdyno", "--results", "new.sqlite")
    assert result.code == 0, result.stderr
    assert "runs imported" in result.stdout or "imported into" in result.stdout
