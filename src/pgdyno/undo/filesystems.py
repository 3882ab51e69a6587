"""Filesystems and mounts: every loop image, loop device, mkfs and mount pgdyno makes, recorded
(pgdyno.undo.journal: fsynced, under flock) before it is made, and marked when it is undone.
storage/ builds the filesystems through this journal; undoing them is here, with the host's
mounts and loop devices reached through `Devices` (storage/mounts.py `LiveDevices`).

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

Undo: steps are undone newest first, each marked undone in the journal once it is (signals held
in between, so a second Ctrl-C cannot leave it done but unmarked). Each undo looks at the host
first: a mount that is not there, a loop device that is not attached, an image that is gone
count as undone. The first step that cannot be undone stops the rest, since the older steps lie
under it (a loop device under a busy mount, an image under its loop device); they stay in the
journal for `pgdyno rollback`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.disks import Mount
from pgdyno.undo import journal
from pgdyno.undo.journal import Contents, Journal, JournalDamaged, Unreadable, now
from pgdyno.undo.signals import signals_held

JOURNAL_NAME = "storage-journal.jsonl"
WHAT = "the storage journal"
KINDS = ("image", "loop", "mkfs", "mount", "bind")
WORDS = journal.Words(
    WHAT, "storage step", "undone", "mounts or loop devices still in place",
    "left by an interrupted run",
)  # fmt: skip


class StorageError(PgdynoError):
    """A filesystem could not be built, mounted or taken down; the message says what to do."""


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
    words: journal.Words = WORDS

    def encode(self, change: Step) -> dict[str, Any]:
        return change_record(change)

    def decode(self, fields: dict[str, Any], salvaged: bool) -> Step:
        return _step(fields, self.workdir, salvaged=salvaged)

    def known(self, fields: dict[str, Any]) -> str | None:
        return _known(fields)


def contents(workdir: Path) -> Contents[Step]:
    """The journal as it stands, without taking it."""
    return journal.contents(journal_path(workdir), StorageCodec(workdir))


def unclean(workdir: Path, found: Contents[Step]) -> UsageError:
    return journal.unclean(journal_path(workdir), found, WORDS)


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


# -- taking steps back ----------------------------------------------------------------------------


class Devices(Protocol):
    """The host's mounts and loop devices, as storage/ reaches them (storage.mounts)."""

    def mounts(self) -> list[Mount]:
        """The mount table (/proc/self/mountinfo)."""
        ...

    def umount(self, target: Path) -> None: ...

    def detach(self, image: Path) -> list[str]:
        """Detach every loop device backed by `image`; the devices detached."""
        ...


def _mounts_at(target: Path, table: list[Mount]) -> list[Mount]:
    """The mounts whose mount point is `target` (absolute), the topmost last."""
    return [mount for mount in table if mount.mount_point == str(target)]


class StorageRollbackError(StorageError):
    """A step could not be undone (`failed`), or journal lines could not be read
    (`unreadable`); `done` says what was undone all the same."""

    def __init__(
        self, message: str, done: list[str], unreadable: list[Unreadable], *, failed: bool
    ) -> None:
        super().__init__(message)
        self.done = done
        self.unreadable = unreadable
        self.failed = failed


def remove_empty(path: Path) -> None:
    with suppress(OSError):
        path.rmdir()  # only when empty: a mount point, or the storage directory at the end


def _unmount(step: Step, devices: Devices) -> str | None:
    target = Path(step.path)
    done = False
    for _ in range(8):  # a target mounted more than once is unmounted layer by layer
        stacked = _mounts_at(target, devices.mounts())
        ours = [m for m in stacked if not step.source or m.source == step.source]
        if not ours:
            break
        if stacked[-1] not in ours:
            raise StorageError(
                f"{target} has another mount ({stacked[-1].source}) on top of pgdyno's "
                f"{step.source}: unmount it by hand, then run `pgdyno rollback`."
            )
        devices.umount(target)
        done = True
    remove_empty(target)
    if not done:
        return None
    return f"unmounted {target} ({step.source or 'its filesystem'})"


def _unbind(step: Step, devices: Devices) -> str | None:
    """A bind mount is pgdyno's when it is of the source's filesystem (its device numbers)."""
    target = Path(step.path)
    done = False
    for _ in range(8):
        stacked = _mounts_at(target, devices.mounts())
        if not stacked or f"{stacked[-1].major}:{stacked[-1].minor}" != step.detail:
            break
        devices.umount(target)
        done = True
    return f"unmounted the bind mount of {step.source} on {target}" if done else None


def _detach(step: Step, devices: Devices) -> str | None:
    detached = devices.detach(Path(step.path))
    return f"detached {', '.join(detached)} ({step.path})" if detached else None


def _remove_image(step: Step, _devices: Devices) -> str | None:
    image = Path(step.path)
    try:
        image.unlink()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StorageError(
            f"cannot remove the loop image {image} ({error.strerror}): remove it by hand."
        ) from None
    return f"removed the loop image {image}"


def _mkfs(step: Step, _devices: Devices) -> str | None:
    if step.path.startswith("/dev/loop"):
        return None  # on pgdyno's own image, which goes with it
    return (
        f"mkfs {step.detail} on {step.path} was cut short: the device may hold no usable "
        "filesystem (it was named with destroy_device = true)"
    )


_UNDO: dict[str, Callable[[Step, Devices], str | None]] = {
    "mount": _unmount,
    "bind": _unbind,
    "loop": _detach,
    "image": _remove_image,
    "mkfs": _mkfs,
}


def undo_step(step: Step, devices: Devices) -> str | None:
    """Undo one step; a line saying what was done, or None when there was nothing to do."""
    undo = _UNDO.get(step.kind)
    if undo is None:
        raise StorageError(f"unknown storage step {step.kind!r}: run a newer pgdyno's rollback.")
    return undo(step, devices)


def undo_steps(
    journal: StorageJournal, steps: Iterable[Step], devices: Devices, log: Callable[[str], None]
) -> list[str]:
    """Undo `steps` newest first, each marked undone; StorageRollbackError at the first that
    cannot be (with the lines of what was done before it). SIGINT and SIGTERM wait until the
    end: a second Ctrl-C while pgdyno takes its filesystems down must not leave half of them."""
    done: list[str] = []
    with signals_held():
        for step in sorted(steps, key=lambda s: s.id, reverse=True):
            try:
                line = undo_step(step, devices)
            except PgdynoError as error:
                raise StorageRollbackError(str(error), done, [], failed=True) from None
            journal.mark_restored(step)
            if line is not None:
                log(line)
                done.append(line)
    return done


def pending_storage(workdir: Path) -> list[Step]:
    """What a crashed run left in the storage journal, oldest first (without taking it)."""
    return contents(workdir.resolve()).pending


def rollback_storage(
    workdir: Path, devices: Devices, log: Callable[[str], None], *, confirm_damaged: bool = False
) -> list[str]:
    """Undo everything the storage journal holds that is not undone, newest first; lines saying
    what was done. Idempotent. StorageRollbackError (with `done`) when a step cannot be undone,
    or when damaged lines remain (set aside with `confirm_damaged` once the rest is undone)."""
    workdir = workdir.resolve()
    with open_for_rollback(workdir) as journal:
        if journal is None:
            return []
        found = journal.read()
        try:
            done = undo_steps(journal, found.pending, devices, log)
        except StorageRollbackError as error:
            error.unreadable = found.unreadable
            raise
        if found.unreadable and not confirm_damaged:
            message = str(JournalDamaged(found.unreadable))
            raise StorageRollbackError(message, done, found.unreadable, failed=False)
        if found.unreadable:
            kept = journal.set_aside()
            done.append(f"set the damaged storage journal aside as {kept}")
        else:
            journal.compact()
    remove_empty(storage_dir(workdir))
    return done
