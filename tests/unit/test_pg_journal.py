"""The PostgreSQL journal on its own: records, cut and damaged lines, servers kept apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.undo.server import (
    JOURNAL_NAME,
    PgChange,
    contents,
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
        journal.append(change(1, SANDBOX, "work_mem", None))
        journal.append(change(2, SERVER, "work_mem", "8MB"))
        assert [c.id for c in journal.pending(SANDBOX)] == [1]
        assert [c.old_auto for c in journal.pending(SERVER)] == ["8MB"]
        journal.mark_restored(journal.pending(SANDBOX)[0])
        assert [c.id for c in journal.pending()] == [2]
        assert journal.next_id() == 3
    assert [c.name for c in pending_changes(tmp_path)] == ["work_mem"]


def test_the_file_is_emptied_once_nothing_is_pending(tmp_path: Path) -> None:
    with open_journal(tmp_path, create=True) as journal:
        assert journal is not None
        journal.append(change(1, SANDBOX, "jit", None))
        journal.compact()
        assert (tmp_path / JOURNAL_NAME).stat().st_size > 0  # still pending: kept
        journal.mark_restored(journal.pending()[0])
        journal.compact()
    assert (tmp_path / JOURNAL_NAME).read_text() == ""


def full_line(record: PgChange) -> str:
    return json.dumps(record.record())


SECOND = full_line(change(2, SANDBOX, "work_mem", "8MB"))


@pytest.mark.parametrize("cut", range(1, len(SECOND)))
def test_a_cut_change_record_is_restorable_or_unresolved_never_lost(
    tmp_path: Path, cut: int
) -> None:
    """Cut at any byte inside a complete line (ended by a newline, as an older pgdyno's repair
    left it): the change is pending (salvaged whole) or named as unreadable."""
    first = full_line(change(1, SANDBOX, "jit", None))
    (tmp_path / JOURNAL_NAME).write_text(first + "\n" + SECOND[:cut] + "\n")
    found = contents(tmp_path)
    assert [c.id for c in found.pending][:1] == [1]
    salvaged = [c for c in found.pending if c.id == 2]
    if salvaged:
        assert salvaged[0].salvaged and salvaged[0].old_auto == "8MB"
        assert salvaged[0].name == "work_mem"
        assert not found.unreadable
    else:
        assert [u.line for u in found.unreadable] == [2]
        assert found.unreadable[0].why == "it is cut short"


@pytest.mark.parametrize("cut", range(1, len(SECOND)))
def test_a_torn_tail_is_never_completed_so_it_is_dropped(tmp_path: Path, cut: int) -> None:
    """Issue 32: a last record without its newline never completed, so its ALTER SYSTEM never
    ran: it is neither pending nor unreadable, and opening the journal cuts it off."""
    first = full_line(change(1, SANDBOX, "jit", None))
    path = tmp_path / JOURNAL_NAME
    path.write_text(first + "\n" + SECOND[:cut])
    found = contents(tmp_path)
    assert [c.id for c in found.pending] == [1] and not found.unreadable
    with open_journal(tmp_path, create=False) as journal:
        assert journal is not None
    assert path.read_text() == first + "\n"


def test_appending_after_a_cut_line_never_glues_the_records(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_NAME
    path.write_text(
        full_line(change(1, SANDBOX, "jit", None)) + "\n" + '{"op": "change", "id": 2, "ser\n'
    )
    with open_journal(tmp_path, create=True) as journal:
        assert journal is not None
        journal.mark_restored(journal.pending()[0])
        found = journal.read()
    assert found.restored == {1}
    assert [u.line for u in found.unreadable] == [2]  # kept as evidence, not dropped
    assert path.read_text().splitlines()[1] == '{"op": "change", "id": 2, "ser'


def test_garbage_in_the_middle_leaves_the_intact_records_usable(tmp_path: Path) -> None:
    lines = [
        full_line(change(1, SANDBOX, "jit", None)),
        "\x00garbage{{",
        full_line(change(3, SANDBOX, "work_mem", "8MB")),
    ]
    (tmp_path / JOURNAL_NAME).write_text("\n".join(lines) + "\n")
    found = contents(tmp_path)
    assert [c.id for c in found.pending] == [1, 3]
    assert [(u.line, u.why) for u in found.unreadable] == [(2, "it is not a JSON record")]


def test_a_record_missing_what_a_restore_needs_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_NAME).write_text('{"op": "change", "id": 1, "name": "jit"}\n')
    found = contents(tmp_path)
    assert found.pending == []
    assert found.unreadable[0].line == 1 and "'server'" in found.unreadable[0].why


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
