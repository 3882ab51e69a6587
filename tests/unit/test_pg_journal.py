"""The PostgreSQL journal on its own: records, a torn last line, damage, servers kept apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.tune.pg_journal import (
    JOURNAL_NAME,
    PgChange,
    PgJournalError,
    open_journal,
    pending_changes,
)

SANDBOX = {"kind": "sandbox", "cluster": "pg18"}
SERVER = {"kind": "server", "dsn": "host=db1 dbname=postgres"}


def change(journal_id: int, server: dict[str, str], name: str, old: str | None) -> PgChange:
    return PgChange(
        id=journal_id, server=server, name=name, old_auto=old, old_setting="4MB",
        old_source="default", new="64MB", restart=False, at="2026-11-23T07:00:00.000+00:00",
    )  # fmt: skip


def test_changes_are_pending_until_restored_and_per_server(tmp_path: Path) -> None:
    with open_journal(tmp_path, create=True) as journal:
        assert journal is not None
        journal.append(change(1, SANDBOX, "work_mem", None).record())
        journal.append(change(2, SERVER, "work_mem", "8MB").record())
        assert [c.id for c in journal.pending(SANDBOX)] == [1]
        assert [c.old_auto for c in journal.pending(SERVER)] == ["8MB"]
        journal.mark_restored(journal.pending(SANDBOX)[0])
        assert [c.id for c in journal.pending()] == [2]
        assert journal.next_id() == 3
    assert [c.name for c in pending_changes(tmp_path)] == ["work_mem"]


def test_the_file_is_emptied_once_nothing_is_pending(tmp_path: Path) -> None:
    with open_journal(tmp_path, create=True) as journal:
        assert journal is not None
        journal.append(change(1, SANDBOX, "jit", None).record())
        journal.compact()
        assert (tmp_path / JOURNAL_NAME).stat().st_size > 0  # still pending: kept
        journal.mark_restored(journal.pending()[0])
        journal.compact()
    assert (tmp_path / JOURNAL_NAME).read_text() == ""


def test_a_torn_last_line_is_a_change_never_made(tmp_path: Path) -> None:
    with open_journal(tmp_path, create=True) as journal:
        assert journal is not None
        journal.append(change(1, SANDBOX, "jit", None).record())
    with (tmp_path / JOURNAL_NAME).open("a") as handle:
        handle.write('{"op": "change", "id": 2, "server": {"kind": "sand')  # crash mid-append
    assert [c.id for c in pending_changes(tmp_path)] == [1]


def test_damage_before_the_last_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_NAME
    path.write_text('{"op": "change", "id": 1}\n{"op": "restored", "id": 1, "at": "x"}\n')
    with open_journal(tmp_path, create=False) as journal:
        assert journal is not None
        with pytest.raises(PgJournalError, match="damaged at line 1"):
            journal.pending()


def test_a_second_writer_is_refused_while_the_first_holds_it(tmp_path: Path) -> None:
    with open_journal(tmp_path, create=True) as first:
        assert first is not None
        second = open_journal(tmp_path, create=True)
        with pytest.raises(UsageError, match="another pgdyno command"):
            second.__enter__()


def test_no_journal_is_nothing_pending(tmp_path: Path) -> None:
    with open_journal(tmp_path, create=False) as journal:
        assert journal is None
    assert pending_changes(tmp_path) == []
    assert not (tmp_path / JOURNAL_NAME).exists()
