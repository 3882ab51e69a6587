"""What a server refuses at start (data/start_constraints.toml), checked before a restart:
each constraint fires on the combination PostgreSQL refuses and lets a sound one pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgdyno.changes.preflight import check_start, constraints, future_settings, refusals
from pgdyno.errors import UsageError
from pgdyno.expressions.load import KnowledgeFileError
from pgdyno.postgres.settings import SettingMeta

Row = tuple[str, str, str | None, str]  # name, vartype, unit, value
ROWS: list[Row] = [
    ("max_connections", "integer", None, "100"),
    ("superuser_reserved_connections", "integer", None, "3"),
    ("reserved_connections", "integer", None, "0"),
    ("autovacuum_max_workers", "integer", None, "3"),
    ("max_worker_processes", "integer", None, "8"),
    ("max_wal_senders", "integer", None, "10"),
    ("wal_level", "enum", None, "replica"),
    ("archive_mode", "enum", None, "off"),
    ("min_wal_size", "integer", "MB", "80"),
    ("wal_segment_size", "integer", "B", "16777216"),
    ("huge_pages", "enum", None, "try"),
    ("shared_buffers", "integer", "8kB", "16384"),
]


def meta(*, without: tuple[str, ...] = ()) -> dict[str, SettingMeta]:
    return {
        name: SettingMeta(name, vartype, unit, 0, 1e12, (), "postmaster", value)
        for name, vartype, unit, value in ROWS
        if name not in without
    }


def broken(values: dict[str, str], host: dict[str, Any] | None = None, **kw: Any) -> list[str]:
    return [c.name for c in refusals(future_settings(meta(**kw), values), host or {})]


def test_the_settings_as_found_break_nothing() -> None:
    assert broken({}) == []
    assert {c.name for c in constraints()} >= {"reserved-connections", "huge-pages-reserved"}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"max_connections": "3"}, ["reserved-connections", "superuser-reserved-connections"]),
        ({"reserved_connections": "97"}, ["reserved-connections"]),
        ({"max_connections": "262143"}, ["max-backends"]),
        ({"wal_level": "minimal"}, ["wal-senders-need-replica"]),
        ({"wal_level": "minimal", "max_wal_senders": "0", "archive_mode": "on"},
         ["archive-needs-replica"]),
        ({"min_wal_size": "16MB"}, ["min-wal-size"]),
    ],
)  # fmt: skip
def test_each_refused_combination_is_found(values: dict[str, str], expected: list[str]) -> None:
    assert broken(values) == expected


def test_a_version_without_a_setting_is_not_checked_on_it() -> None:
    """PostgreSQL 15 has no reserved_connections: only its own rule applies."""
    assert broken({"max_connections": "3"}, without=("reserved_connections",)) == [
        "superuser-reserved-connections"
    ]


def test_huge_pages_on_needs_the_pages_free() -> None:
    enough = {"huge_pages_needed": 70, "huge_pages_available": 70}
    short = {"huge_pages_needed": 70, "huge_pages_available": 12}
    assert broken({"huge_pages": "on"}, enough) == []
    assert broken({"huge_pages": "on"}, short) == ["huge-pages-reserved"]
    assert broken({"huge_pages": "try"}, short) == []
    assert broken({"huge_pages": "on"}) == []  # a server elsewhere: not known, not checked


def test_the_refusal_is_one_sentence_with_the_values() -> None:
    with pytest.raises(UsageError) as caught:
        check_start("sandbox pg18", meta(), {"max_connections": "1"}, {})
    assert str(caught.value) == (
        "sandbox pg18 would not start with max_connections = 1: PostgreSQL refuses it at start "
        "(superuser_reserved_connections (3) plus reserved_connections (0) must be less than "
        "max_connections (1)); change the values, nothing was changed."
    )


@pytest.mark.parametrize(
    ("require", "problem"),
    [
        ("pg.max_connections >", "not an expression (invalid syntax)"),
        ("open('x')", "unknown function 'open'"),
        ("pg.max_connections < limit", "unknown name 'limit'"),
    ],
)
def test_a_broken_constraint_names_its_line(tmp_path: Path, require: str, problem: str) -> None:
    path = tmp_path / "start_constraints.toml"
    path.write_text(
        '[[constraint]]\nname = "broken"\nrequire = "' + require + '"\n'
        'message = "the server refuses it"\nevidence = "https://www.postgresql.org/docs/"\n'
    )
    with pytest.raises(KnowledgeFileError) as caught:
        constraints(path)
    assert str(caught.value) == (
        f"{path} line 3: constraint 'broken', require: {problem}; see the comment at the top of "
        "that file."
    )
