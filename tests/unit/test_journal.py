"""The one journal (pgdyno.undo.journal): torn tails, tolerant reading, salvage, set aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.undo.journal import JournalFile, parse_lines, peek, salvage

RECORD = {"op": "change", "id": 12, "kind": "sysctl", "name": "vm.swappiness", "old": "60",
          "new": "1", "partner": {"name": "x", "old": "0"}, "ok": True}  # fmt: skip


def test_a_torn_tail_is_dropped_on_open_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32: a last line without its newline is a record whose write never completed, so
    its change was never made; it used to be kept as a damaged line that blocked everything."""
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"op": "change", "id": 1}\n{"op": "change", "id": 2, "name": "work_m')
    assert [line.record for line in peek(path, what="the test journal")] == [
        {"op": "change", "id": 1}
    ]  # readers never see it
    with JournalFile.open(path, what="the test journal", create=False) as journal:
        assert journal is not None
        journal.append({"op": "restored", "id": 1})
        lines = journal.lines()
    assert [line.damaged for line in lines] == [False, False]
    assert path.read_bytes() == b'{"op": "change", "id": 1}\n{"op": "restored", "id": 1}\n'
    (logged,) = caplog.messages
    assert "never completed" in logged and '"name": "work_m' in logged


def test_damage_inside_a_complete_line_is_kept(tmp_path: Path) -> None:
    """A cut line that an older pgdyno ended with a newline is damage, not a torn tail."""
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"op": "change", "id": 1}\n{"op": "chan\n')
    with JournalFile.open(path, what="the test journal", create=False) as journal:
        assert journal is not None
        journal.append({"op": "restored", "id": 1})
        lines = journal.lines()
    assert [line.damaged for line in lines] == [False, True, False]
    assert path.read_bytes().endswith(b'{"op": "chan\n{"op": "restored", "id": 1}\n')


def test_padding_a_crash_left_is_cut_on_repair(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"id": 1}\n\0\0\0\0')
    with JournalFile.open(path, what="the test journal", create=False) as journal:
        assert journal is not None
        assert [line.record for line in journal.lines()] == [{"id": 1}]
    assert path.read_bytes() == b'{"id": 1}\n'


def test_non_finite_numbers_are_refused(tmp_path: Path) -> None:
    with JournalFile.open(tmp_path / "j", what="the test journal", create=True) as journal:
        assert journal is not None
        with pytest.raises(PgdynoError, match="x is nan"):
            journal.append({"x": float("nan")})


def test_one_writer_and_readers_that_check(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with JournalFile.open(path, what="the test journal", create=True) as journal:
        assert journal is not None
        with pytest.raises(UsageError, match="another pgdyno command is using the test journal"):
            JournalFile.open(path, what="the test journal", create=True)
        with pytest.raises(UsageError):
            peek(path, what="the test journal", check_free=True)
        assert peek(path, what="the test journal") == []


def test_set_aside_keeps_the_file_under_another_name(tmp_path: Path) -> None:
    path = tmp_path / "j"
    path.write_text("garbage\n")
    with JournalFile.open(path, what="the test journal", create=False) as journal:
        assert journal is not None
        kept = journal.set_aside()
    assert not path.exists() and kept.read_text() == "garbage\n"
    assert kept.name.startswith("j.damaged-")


def test_a_symlink_in_place_of_the_journal_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("")
    (tmp_path / "j").symlink_to(tmp_path / "target")
    with pytest.raises(Exception, match="cannot open the test journal"):
        JournalFile.open(tmp_path / "j", what="the test journal", create=True)


def test_every_line_is_read_with_its_number() -> None:
    lines = parse_lines(b'{"a": 1}\n[1, 2]\n\n\xff\xfe\n{"b": 2}')
    assert [(line.number, line.damaged) for line in lines] == [
        (1, False), (2, True), (4, True), (5, False),
    ]  # fmt: skip
    assert lines[-1].last and not lines[0].last


@given(st.integers(min_value=0, max_value=len(json.dumps(RECORD))))
def test_salvage_never_invents_a_value(cut: int) -> None:
    """Whatever the cut, every salvaged field has the value the whole record has."""
    text = json.dumps(RECORD)[:cut]
    for key, value in salvage(text).items():
        assert RECORD[key] == value


def test_salvage_of_the_whole_record_is_the_record() -> None:
    assert salvage(json.dumps(RECORD)) == RECORD
