"""The storage journal's records read back: pending steps, salvaged cut lines, and records that
name anything outside the work directory (never acted on)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.undo.filesystems import (
    Step,
    StorageCodec,
    change_record,
    contents,
    held_journal,
    journal_path,
    unclean,
)
from pgdyno.undo.journal import decode, parse_lines


def lines_of(*records: dict[str, object], tail: str = "") -> bytes:
    text = "".join(json.dumps(record) + "\n" for record in records) + tail
    return text.encode()


def test_records_round_trip_and_pending(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    steps = [
        Step(1, "image", f"{storage}/data.img", pid=7, at="t"),
        Step(2, "loop", f"{storage}/data.img", pid=7, at="t"),
        Step(3, "mount", f"{storage}/mnt-data", "/dev/loop3", "xfs", pid=7, at="t"),
        Step(
            4,
            "bind",
            f"{tmp_path}/clusters/pg18/data/pg_wal",
            f"{storage}/mnt-wal/wal",
            "7:4",
            pid=7,
            at="t",
        ),
    ]
    data = lines_of(*(change_record(s) for s in steps), {"op": "restored", "id": 4, "at": "t"})
    found = decode(parse_lines(data), journal_path(tmp_path), StorageCodec(tmp_path))
    assert found.changes == steps and found.restored == {4} and not found.unreadable
    assert [s.id for s in found.pending] == [1, 2, 3]
    assert found.next_id() == 5


def test_a_cut_mount_line_is_salvaged(tmp_path: Path) -> None:
    target = f"{tmp_path}/storage/mnt-data"
    cut = json.dumps(change_record(Step(1, "mount", target, "/dev/loop3", "ext4")))[:-30]
    found = decode(parse_lines(cut.encode()), journal_path(tmp_path), StorageCodec(tmp_path))
    (step,) = found.pending
    assert (step.kind, step.path, step.salvaged) == ("mount", target, True)


@pytest.mark.parametrize(
    ("kind", "path", "why"),
    [
        ("image", "/etc/passwd", "outside"),
        ("loop", "{w}/storage/../../etc/x.img", "outside"),
        ("image", "{w}/storage/notes.txt", "not a loop image"),
        ("mount", "/", "outside"),
        ("bind", "/var/lib/postgresql", "outside the work directory"),
    ],
)
def test_steps_outside_the_work_directory_are_not_acted_on(
    tmp_path: Path, kind: str, path: str, why: str
) -> None:
    record = {"op": "change", "id": 1, "kind": kind, "path": path.format(w=tmp_path),
              "source": "/x", "numbers": "7:1", "at": "t", "pid": 1}  # fmt: skip
    found = decode(parse_lines(lines_of(record)), journal_path(tmp_path), StorageCodec(tmp_path))
    assert not found.changes
    (unreadable,) = found.unreadable
    assert why in unreadable.why


def test_a_journal_with_pending_steps_blocks_new_ones(tmp_path: Path) -> None:
    record = change_record(Step(1, "image", f"{tmp_path}/storage/data.img", at="t", pid=1))
    journal_path(tmp_path).write_bytes(lines_of(record))
    with (
        pytest.raises(UsageError, match=r"holds 1 storage step not undone .* `pgdyno rollback`"),
        held_journal(tmp_path),
    ):
        pass
    assert str(unclean(tmp_path, contents(tmp_path))).count(".") >= 1


def test_nested_users_share_one_journal(tmp_path: Path) -> None:
    with held_journal(tmp_path) as outer, held_journal(tmp_path) as inner:
        assert outer is inner
        step = inner.record("image", tmp_path / "storage" / "data.img")
        inner.mark_restored(step)
    # the last user compacted it: nothing pending, nothing kept
    assert journal_path(tmp_path).read_bytes() == b""


@pytest.mark.parametrize("cut", [1, 20, 45, 70])
def test_a_torn_tail_does_not_block_new_steps(tmp_path: Path, cut: int) -> None:
    """Issue 32: a last step record without its newline was never completed, so the step was
    never taken: it is dropped on open, and the journal is clean."""
    record = change_record(Step(1, "image", f"{tmp_path}/storage/data.img", at="t", pid=1))
    journal_path(tmp_path).write_bytes(lines_of(tail=json.dumps(record)[:cut]))
    assert contents(tmp_path).pending == [] and not contents(tmp_path).unreadable
    with held_journal(tmp_path) as journal:
        assert journal.read().changes == []
    assert journal_path(tmp_path).read_bytes() == b""
