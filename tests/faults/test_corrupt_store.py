"""A results database that cannot be used: one sentence naming the file, exit 3, file untouched.

Garbage bytes, a truncated file, a directory at its path, a file that cannot be written
(`chattr +i`: root ignores file modes) and damaged JSON inside a sound database.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import one_clear_sentence
from pgdyno.results.store import ResultsStore


def sound_database(path: Path) -> Path:
    with ResultsStore(path) as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", {}, {})
        store.finish_session(session, "done")
    return path


def garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 40)


def truncated(path: Path) -> None:
    data = sound_database(path).read_bytes()
    for side in path.parent.glob(path.name + "-*"):
        side.unlink()
    path.write_bytes(data[:3000])  # the first page cut short


DAMAGES: dict[str, Callable[[Path], None]] = {"garbage": garbage, "truncated": truncated}
COMMANDS = {
    "runs list": ("runs", "list"),
    "bench": ("bench", "-w", "select-only", "-T", "1"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_file(shared_workdir: Path, tmp_path: Path, run_cli, damage: str, command: str):
    results = tmp_path / "results.sqlite"
    DAMAGES[damage](results)
    before = results.read_bytes()
    result = run_cli(shared_workdir, *COMMANDS[command], "--results", str(results))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"{results} is not a usable results database (" in line
    assert "was left as it is: move it aside or pass another --results file." in line
    assert results.read_bytes() == before  # nothing overwritten


@pytest.mark.parametrize("command", COMMANDS)
def test_directory_at_the_path(workdir: Path, run_cli, command: str):
    """The default path, <workdir>/results.sqlite (--results itself refuses a directory)."""
    results = workdir / "results.sqlite"
    results.mkdir()
    (results / "keep").write_text("mine")
    result = run_cli(workdir, *COMMANDS[command])
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the results database path {results} is a directory: pass --results" in line
    assert [p.name for p in results.iterdir()] == ["keep"]


@pytest.fixture
def immutable(tmp_path: Path):
    path = sound_database(tmp_path / "results.sqlite")
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
        pytest.skip("chattr +i is not available here")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_unwritable_file_is_refused_before_any_run(shared_workdir: Path, run_cli, immutable):
    before = immutable.read_bytes()
    result = run_cli(
        shared_workdir, "bench", "-w", "select-only", "-T", "1", "--results", str(immutable)
    )
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the results database {immutable} cannot be opened for writing (" in line
    assert "runs planned" not in result.stderr  # refused before the first run, not after it
    assert immutable.read_bytes() == before


def test_unwritable_file_can_still_be_listed(shared_workdir: Path, run_cli, immutable):
    result = run_cli(shared_workdir, "runs", "list", "--json", "--results", str(immutable))
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_damaged_json_in_a_sound_database(tmp_path: Path, run_cli):
    results = sound_database(tmp_path / "results.sqlite")
    with sqlite3.connect(results) as db:
        db.execute("UPDATE sessions SET host = '{not json'")
        db.execute(
            "INSERT INTO runs (session_id, status, started_at, finished_at, workload, scale,"
            " clients, jobs, duration_s, protocol, repeat, warmup_s, pg_version,"
            " pgbench_version, pgbench_argv, settings) VALUES (1, 'ok', 'a', 'b', 'tpcb-like',"
            " 1, 1, 1, 10, 'simple', 1, 0, '18.6', '18.6', '[]', '{}')"
        )
    result = run_cli(tmp_path, "runs", "show", "1", "--results", str(results))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert "session 1's host in the results database holds damaged JSON" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_database_on_read_only_media(shared_workdir: Path, tmp_path: Path, run_cli):
    """Listing works from the file as it is; storing is refused in one sentence."""
    media = tmp_path / "media"
    media.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(media)], check=True)
    try:
        results = sound_database(media / "results.sqlite")
        subprocess.run(["mount", "-o", "remount,ro", str(media)], check=True)
        listed = run_cli(shared_workdir, "runs", "list", "--json", "--results", str(results))
        stored = run_cli(
            shared_workdir, "bench", "-w", "select-only", "-T", "1", "--results", str(results)
        )
    finally:
        subprocess.run(["umount", str(media)], check=True)
    assert listed.code == 0, listed.stderr
    assert listed.stdout.strip() == "[]"
    line = one_clear_sentence(stored.stderr)
    assert stored.code == 3
    assert f"the results database {results} cannot be opened for writing (" in line
