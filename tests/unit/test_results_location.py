"""`--results` and PGDYNO_RESULTS: a connection string is never a file name (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.environment import Environment, ResultsLocation


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://ann@db/results",
        "postgres://db:5433/results?sslmode=require",
        "PostgreSQL://db/results",
        "host=db dbname=results",
        "  dbname = results",
        "service=pgdyno",
        "host=/tmp port=5432 password='a b'",
    ],
)
def test_connection_strings_are_databases(text: str) -> None:
    location = ResultsLocation.of(text)
    assert location.conninfo == text.strip() and location.path is None


@pytest.mark.parametrize(
    ("text", "name"),
    [("results.sqlite", "results.sqlite"), ("./host=db", "host=db"), ("a b/r.db", "r.db")],
)
def test_everything_else_is_a_file(text: str, name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    location = ResultsLocation.of(text)
    assert location.conninfo is None and location.path is not None
    assert location.path.is_absolute() and location.path.name == name


def test_the_password_is_in_no_repr_or_message() -> None:
    location = ResultsLocation.of("host=db user=ann password=Sesame-1 dbname=r")
    assert "Sesame-1" not in repr(location) and "Sesame-1" not in str(location)
    env = Environment(Path("/w"), Path("/c"), location)
    assert "Sesame-1" not in repr(env)


def test_pgdyno_results_names_a_database_and_the_workdir_does_not_move_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PGDYNO_RESULTS", "postgresql://db/shared")
    monkeypatch.setenv("PGDYNO_HOME", str(tmp_path))
    env = Environment.from_os().with_workdir(tmp_path / "elsewhere")
    assert env.results.conninfo == "postgresql://db/shared"
    monkeypatch.delenv("PGDYNO_RESULTS")
    default = Environment.from_os()
    moved = default.with_workdir(tmp_path / "elsewhere")
    assert moved.results.path == (tmp_path / "elsewhere" / "results.sqlite").resolve()
