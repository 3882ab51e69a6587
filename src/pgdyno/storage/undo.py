"""Taking storage steps back: unmount, detach, remove; on every way out and in `rollback`.

Steps are undone newest first, each marked undone in the journal once it is (signals held in
between, so a second Ctrl-C cannot leave it done but unmarked). Each undo looks at the host
first: a mount that is not there, a loop device that is not attached, an image that is gone
count as undone. The first step that cannot be undone stops the rest, since the older steps
lie under it (a loop device under a busy mount, an image under its loop device); they stay in
the journal for `pgdyno rollback`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path

from pgdyno.errors import PgdynoError
from pgdyno.storage import loop, mounts
from pgdyno.storage.model import Roots, StorageError
from pgdyno.undo.filesystems import (
    Step,
    StorageJournal,
    contents,
    open_for_rollback,
    storage_dir,
)
from pgdyno.undo.journal import JournalDamaged, Unreadable
from pgdyno.undo.signals import signals_held


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


def _unmount(step: Step, roots: Roots) -> str | None:
    target = Path(step.path)
    done = False
    for _ in range(8):  # a target mounted more than once is unmounted layer by layer
        stacked = mounts.mounts_at(target, mounts.read_mounts(roots))
        ours = [m for m in stacked if not step.source or m.source == step.source]
        if not ours:
            break
        if stacked[-1] not in ours:
            raise StorageError(
                f"{target} has another mount ({stacked[-1].source}) on top of pgdyno's "
                f"{step.source}: unmount it by hand, then run `pgdyno rollback`."
            )
        mounts.umount(target)
        done = True
    remove_empty(target)
    if not done:
        return None
    return f"unmounted {target} ({step.source or 'its filesystem'})"


def _unbind(step: Step, roots: Roots) -> str | None:
    """A bind mount is pgdyno's when it is of the source's filesystem (its device numbers)."""
    target = Path(step.path)
    done = False
    for _ in range(8):
        stacked = mounts.mounts_at(target, mounts.read_mounts(roots))
        if not stacked or f"{stacked[-1].major}:{stacked[-1].minor}" != step.detail:
            break
        mounts.umount(target)
        done = True
    return f"unmounted the bind mount of {step.source} on {target}" if done else None


def _detach(step: Step, roots: Roots) -> str | None:
    devices = loop.detach(Path(step.path), roots)
    return f"detached {', '.join(devices)} ({step.path})" if devices else None


def _remove_image(step: Step, _roots: Roots) -> str | None:
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


def _mkfs(step: Step, _roots: Roots) -> str | None:
    if step.path.startswith("/dev/loop"):
        return None  # on pgdyno's own image, which goes with it
    return (
        f"mkfs {step.detail} on {step.path} was cut short: the device may hold no usable "
        "filesystem (it was named with destroy_device = true)"
    )


_UNDO: dict[str, Callable[[Step, Roots], str | None]] = {
    "mount": _unmount,
    "bind": _unbind,
    "loop": _detach,
    "image": _remove_image,
    "mkfs": _mkfs,
}


def undo_step(step: Step, roots: Roots) -> str | None:
    """Undo one step; a line saying what was done, or None when there was nothing to do."""
    undo = _UNDO.get(step.kind)
    if undo is None:
        raise StorageError(f"unknown storage step {step.kind!r}: run a newer pgdyno's rollback.")
    return undo(step, roots)


def undo_steps(
    journal: StorageJournal, steps: Iterable[Step], roots: Roots, log: Callable[[str], None]
) -> list[str]:
    """Undo `steps` newest first, each marked undone; StorageRollbackError at the first that
    cannot be (with the lines of what was done before it). SIGINT and SIGTERM wait until the
    end: a second Ctrl-C while pgdyno takes its filesystems down must not leave half of them."""
    done: list[str] = []
    with signals_held():
        for step in sorted(steps, key=lambda s: s.id, reverse=True):
            try:
                line = undo_step(step, roots)
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
    workdir: Path, log: Callable[[str], None], *, confirm_damaged: bool = False,
    roots: Roots | None = None,
) -> list[str]:  # fmt: skip
    """Undo everything the storage journal holds that is not undone, newest first; lines saying
    what was done. Idempotent. StorageRollbackError (with `done`) when a step cannot be undone,
    or when damaged lines remain (set aside with `confirm_damaged` once the rest is undone)."""
    workdir = workdir.resolve()
    with open_for_rollback(workdir) as journal:
        if journal is None:
            return []
        found = journal.read()
        try:
            done = undo_steps(journal, found.pending, roots or Roots(), log)
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
