"""Filesystems and mounts: every loop image, loop device, mkfs and mount pgdyno makes, recorded
(pgdyno.undo.journal: fsynced, under flock) before it is made, and marked when it is undone.
storage/ builds the filesystems and takes them down (storage/undo.py) through this journal.

Format: JSON lines in <workdir>/storage-journal.jsonl::

    {"op": "change", "id": 1, "kind": "image", "path": "<workdir>/storage/data.img", ...}
    {"op": "change", "id": 2, "kind": "loop", "path": "<workdir>/storage/data.img", ...}
    {"op": "change", "id": 3, "kind": "mkfs", "path": "/dev/loop3", "filesystem": "xfs", ...}
    {"op": "change", "id": 4, "kind": "mount", "path": "<workdir>/storage/mnt-data",
     "source": "/dev/loop3", "fstype": "xfs", "options": "noatime", ...}
    {"op": "change", "id": 5, "kind": "bind", "path": "<target>", "source": "<directory>",
     "numbers": "7:3", ...}
    {"op": "restored", "id": 5, "at": "..."}

(each change also holds "at" and "pid"). `path` is what an undo acts on: the image to remove, the
image whose loop devices to detach, the mount point to unmount. A loop device is found by its
image, never by a device name from before. Undoing checks the state first, so a step whose
object is gone (a reboot removed the mounts and loop devices) is done.

A journal is written by root and read by root, so it must not be a way to unmount or remove
anything else: images and mount points must lie in <workdir>/storage, bind targets in the work
directory; a record naming anything else is unreadable, named to the user, never acted on.

One process holds the journal (its flock) from its first step to its last undo; nested users
in that process (the data and the WAL filesystem, bind mounts) share it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.undo import journal
from pgdyno.undo.journal import Contents, Journal, now

JOURNAL_NAME = "storage-journal.jsonl"
WHAT = "the storage journal"
KINDS = ("image", "loop", "mkfs", "mount", "bind")


def journal_path(workdir: Path) -> Path:
    return workdir / JOURNAL_NAME


def storage_dir(workdir: Path) -> Path:
    """Where pgdyno's loop images and mount points live: the only place a step may act."""
    return workdir / "storage"


@dataclass(frozen=True)
class Step:
    """One journalled storage step that may still be in place."""

    id: int
    kind: str  # image | loop | mkfs | mount | bind
    path: str  # the object an undo acts on (see the module's docstring)
    source: str = ""  # mount: the device; bind: the source directory
    detail: str = ""  # mkfs: the filesystem; mount: the type; bind: the source's numbers
    pid: int = 0
    at: str = ""
    salvaged: bool = False

    def describe(self) -> str:
        """
        >>> Step(4, "mount", "/w/storage/mnt-data", "/dev/loop3", "xfs").describe()
        'the xfs mount of /dev/loop3 on /w/storage/mnt-data'
        """
        match self.kind:
            case "image":
                return f"the loop image {self.path}"
            case "loop":
                return f"the loop device of {self.path}"
            case "mkfs":
                return f"mkfs {self.detail} on {self.path}".replace("  ", " ")
            case "mount":
                return f"the {self.detail} mount of {self.source} on {self.path}".replace("  ", " ")
            case _:
                return f"the bind mount of {self.source} on {self.path}"


def change_record(step: Step) -> dict[str, Any]:
    record: dict[str, Any] = {"op": "change", "id": step.id, "kind": step.kind, "path": step.path}
    if step.kind in ("mount", "bind"):
        record["source"] = step.source
    key = {"mkfs": "filesystem", "mount": "fstype", "bind": "numbers"}.get(step.kind)
    if key is not None:
        record[key] = step.detail
    return record | {"at": step.at, "pid": step.pid}


def _inside(path: Path, directory: Path) -> bool:
    return path != directory and directory in path.parents and ".." not in path.parts


def _text(fields: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = fields.get(key, None if required else "")
    if not isinstance(value, str):
        raise ValueError(f"{key!r} is missing or not text")
    return value


def _checked_path(kind: str, path: str, workdir: Path) -> None:
    """ValueError unless the step acts inside the work directory, as pgdyno's steps do."""
    where = Path(path)
    if kind in ("image", "loop", "mount"):
        if not where.is_absolute() or not _inside(where, storage_dir(workdir)):
            raise ValueError(f"it names {path}, outside {storage_dir(workdir)}")
        if kind != "mount" and where.suffix != ".img":
            raise ValueError(f"it names {path}, which is not a loop image")
    elif kind == "bind" and (not where.is_absolute() or not _inside(where, workdir)):
        raise ValueError(f"it names {path}, outside the work directory {workdir}")


def _step(fields: Mapping[str, Any], workdir: Path, *, salvaged: bool) -> Step:
    step_id = fields.get("id")
    if not isinstance(step_id, int) or isinstance(step_id, bool):
        raise ValueError("'id' is missing or not a number")
    kind = _text(fields, "kind")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    path = _text(fields, "path")
    _checked_path(kind, path, workdir)
    detail_key = {"mkfs": "filesystem", "mount": "fstype", "bind": "numbers"}.get(kind)
    pid = fields.get("pid", 0)
    return Step(
        id=step_id,
        kind=kind,
        path=path,
        source=_text(fields, "source", required=kind == "bind" and not salvaged),
        detail=_text(fields, detail_key, required=kind == "bind") if detail_key else "",
        pid=pid if isinstance(pid, int) else 0,
        at=_text(fields, "at", required=False),
        salvaged=salvaged,
    )


def _known(fields: Mapping[str, Any]) -> str | None:
    kind, path = fields.get("kind"), fields.get("path")
    if isinstance(kind, str) and isinstance(path, str):
        return f"a {kind} step on {path}"
    return f"a {kind} step" if isinstance(kind, str) else None


@dataclass(frozen=True, slots=True)
class StorageCodec:
    """The storage journal's records for the one journal; a record is read against the work
    directory it must stay inside."""

    workdir: Path
    what: str = WHAT
    noun: str = "storage step"
    undone: str = "undone"
    at_risk: str = "mounts or loop devices still in place"
    left_by: str = "left by an interrupted run"

    def encode(self, change: Step) -> dict[str, Any]:
        return change_record(change)

    def decode(self, fields: dict[str, Any], salvaged: bool) -> Step:
        return _step(fields, self.workdir, salvaged=salvaged)

    def ident(self, change: Step) -> int:
        return change.id

    def known(self, fields: dict[str, Any]) -> str | None:
        return _known(fields)


def contents(workdir: Path) -> Contents[Step]:
    """The journal as it stands, without taking it."""
    return journal.contents(journal_path(workdir), StorageCodec(workdir))


def unclean(workdir: Path, found: Contents[Step]) -> UsageError:
    return journal.unclean(journal_path(workdir), found, StorageCodec(workdir))


class StorageJournal(Journal[Step]):
    """The journal open for appending under its exclusive flock."""

    def record(self, kind: str, path: Path | str, source: str = "", detail: str = "") -> Step:
        """Append a step (fsynced) before it is made; the step as recorded."""
        step = Step(self.next_id(), kind, str(path), source, detail, os.getpid(), now())
        self.append(step)
        return step


@dataclass
class _Shared:
    journal: StorageJournal
    users: int = 0


_held: dict[Path, _Shared] = {}
_held_lock = threading.Lock()


@contextmanager
def held_journal(workdir: Path) -> Iterator[StorageJournal]:
    """The journal of `workdir`, shared by this process's nested users. The first user finds it
    clean (or gets UsageError: run `pgdyno rollback`); the last one compacts and closes it."""
    path = journal_path(workdir)
    with _held_lock:
        shared = _held.get(path)
        if shared is None:
            opened = StorageJournal.open(path, StorageCodec(workdir), create=True)
            assert opened is not None  # create=True
            try:
                opened.ensure_clean()
            except BaseException:
                opened.close()
                raise
            shared = _held[path] = _Shared(opened)
        shared.users += 1
    try:
        yield shared.journal
    finally:
        with _held_lock:
            shared.users -= 1
            if shared.users == 0:
                del _held[path]
                try:
                    shared.journal.compact()
                finally:
                    shared.journal.close()


@contextmanager
def open_for_rollback(workdir: Path) -> Iterator[StorageJournal | None]:
    """The journal, exclusively (UsageError while a command holds it); None when there is none."""
    opened = StorageJournal.open(journal_path(workdir), StorageCodec(workdir), create=False)
    if opened is None:
        yield None
        return
    with opened:
        yield opened
