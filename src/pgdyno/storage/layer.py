"""Building the layer under a data or WAL directory, and taking it down on every way out.

`built_filesystem` checks the request (the same checks as `plan check`), then, each step
recorded in the storage journal before it is made and with SIGINT and SIGTERM held while it is
half done: the loop image (created with O_EXCL and preallocated), the loop device, mkfs, the
mount. Leaving the block, however it is left (an exception, KeyboardInterrupt, pgdyno's
Interrupted), undoes them newest first: umount, losetup --detach, the image removed, each marked
undone. After a SIGKILL, `pgdyno rollback` (`rollback_storage`) does the same from the journal.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.storage import blkid, kernel, loop, mounts
from pgdyno.storage.check import check_request, check_requests, inspect_request, mkfs_command
from pgdyno.storage.filesystems import KINDS, FsKind, mkfs_argv, mount_options
from pgdyno.storage.model import (
    BuiltFs,
    FsRequest,
    Roots,
    image_path,
    mount_point,
)
from pgdyno.storage.tools import missing, run_tool
from pgdyno.undo.filesystems import (
    Step,
    StorageError,
    StorageJournal,
    held_journal,
    remove_empty,
    storage_dir,
    undo_steps,
)
from pgdyno.undo.signals import signals_held

__all__ = [
    "BuiltFs",
    "FsRequest",
    "bind_mounted",
    "built_filesystem",
    "check_request",
    "check_requests",
    "inspect_request",
]

MKFS_TIMEOUT = 3600.0  # a large device with its inode tables zeroed up front takes minutes


def _create_image(image: Path, size: int) -> None:
    """A new image file of `size` bytes, preallocated (never an existing file: O_EXCL)."""
    try:
        fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise UsageError(
            f"the loop image {image} already exists, and the storage journal does not know it: "
            "remove it (after `losetup -j` shows no loop device on it), then run again."
        ) from None
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as error:
        if error.errno != errno.ENOSPC:
            os.ftruncate(fd, size)  # a host filesystem that cannot preallocate: sparse
        else:
            raise StorageError(
                f"there is no room for the {size / 2**20:,.0f} MiB loop image {image}: free "
                "space or give a smaller size."
            ) from None
    finally:
        os.close(fd)


class _Builder:
    """The steps of one filesystem, recorded in `steps` as they are made (for the undo)."""

    def __init__(
        self, journal: StorageJournal, workdir: Path, roots: Roots, log: Callable[[str], None]
    ) -> None:
        self.journal = journal
        self.workdir = workdir
        self.roots = roots
        self.log = log
        self.steps: list[Step] = []

    def step(self, kind: str, path: Path | str, source: str = "", detail: str = "") -> Step:
        step = self.journal.record(kind, path, source, detail)
        self.steps.append(step)
        return step

    def loop_device(self, request: FsRequest) -> tuple[str, Path]:
        image = image_path(self.workdir, request.role)
        attached = loop.loops_backed_by(image, self.roots)
        if attached:
            raise UsageError(
                f"{', '.join(attached)} already holds {image}, which the storage journal does "
                f"not know: detach it (`losetup -d {attached[0]}`), then run again."
            )
        size = request.size_bytes or 0
        with signals_held():
            self.step("image", image)
            _create_image(image, size)
        with signals_held():
            self.step("loop", image)
            device = loop.attach(image)
        direct = " with direct I/O" if loop.direct_io(device, self.roots) else ""
        self.log(f"attached the {size / 2**20:,.0f} MiB image {image} to {device}{direct}")
        return device, image

    def mkfs(self, request: FsRequest, kind: FsKind, device: str, *, image: bool) -> None:
        command = mkfs_command(kind)
        if command is None:  # checked before; removed since
            raise StorageError(missing(kind.mkfs[0][0], kind.package))
        argv = mkfs_argv(kind, command, request.mkfs_options, device, image=image, force=True)
        with signals_held():
            step = self.step("mkfs", device, detail=kind.name)
            run_tool(
                argv, what=" ".join(argv), package=kind.package, timeout=MKFS_TIMEOUT,
                hint=f"check the mkfs options for {kind.name}",
            )  # fmt: skip
            self.journal.mark_restored(step)  # nothing to take back: the image or device goes
            self.steps.remove(step)
        self.log(f"made {kind.name} on {device}: {' '.join(argv)}")

    def mount(self, request: FsRequest, kind: FsKind, device: str, mount_type: str) -> Path:
        target = mount_point(self.workdir, request.role)
        if mounts.mounts_at(target, mounts.read_mounts(self.roots)):
            raise UsageError(
                f"{target} is already a mount point, which the storage journal does not know: "
                f"unmount it (`umount {target}`), then run again."
            )
        with signals_held():
            self.step("mount", target, source=device, detail=mount_type)
            target.mkdir(mode=0o755, exist_ok=True)  # removed with the mount
            options = mount_options(kind, request.mount_options, image=request.device is None)
            mounts.mount(device, target, mount_type, options)
        return target


def _accepted(request: FsRequest, workdir: Path, roots: Roots) -> str:
    """The mount type to use; UsageError with the first problem `plan check` would name."""
    found = inspect_request(request, workdir, roots)
    if found.problems:
        raise UsageError(found.problems[0])
    assert found.mount_type is not None
    return found.mount_type


def _built(
    request: FsRequest, target: Path, device: str, image: Path | None, roots: Roots
) -> BuiltFs:
    stacked = mounts.mounts_at(target, mounts.read_mounts(roots))
    if not stacked:
        raise StorageError(f"mount reported success but {target} is not mounted: check `dmesg`.")
    mounted = stacked[-1]
    kernel_name = Path(device).resolve().name
    return BuiltFs(
        role=request.role,
        mount_point=target,
        device=device,
        filesystem=request.filesystem,
        driver=kernel.driver_of(mounted.fstype, kernel_name, roots),
        mount_options=mounts.kernel_options(mounted),
        mount_type=mounted.fstype,
        image=image,
    )


@contextmanager
def built_filesystem(
    workdir: Path, request: FsRequest, log: Callable[[str], None], *, roots: Roots | None = None
) -> Iterator[BuiltFs]:
    """The filesystem `request` asks for, mounted at <workdir>/storage/mnt-<role> for the block;
    taken down (and its image removed) when the block ends, however it ends."""
    roots = roots or Roots()
    workdir = workdir.resolve()
    mount_type = _accepted(request, workdir, roots)
    kind = KINDS[request.filesystem]
    with held_journal(workdir) as journal:
        builder = _Builder(journal, workdir, roots, log)
        try:
            storage_dir(workdir).mkdir(mode=0o755, exist_ok=True)
            if request.device is None:
                device, image = builder.loop_device(request)
            else:
                device, image = str(request.device.resolve()), None
                held = blkid.probe(Path(device))
                what = held.describe() if held else "no signature blkid knows"
                log(f"erasing {device} (destroy_device = true), which holds {what}")
            builder.mkfs(request, kind, device, image=image is not None)
            target = builder.mount(request, kind, device, mount_type)
            built = _built(request, target, device, image, roots)
            log(
                f"mounted {built.filesystem} for {built.role} on {target} ({device}, driver "
                f"{built.driver}, options {built.mount_options})"
            )
            if request.filesystem == "ext3":
                log(kernel.ext3_note(roots.release, mount_type))
            yield built
        finally:
            undo_steps(journal, builder.steps, mounts.LiveDevices(roots), log)
            remove_empty(storage_dir(workdir))


@contextmanager
def bind_mounted(
    source: Path, target: Path, workdir: Path, *, roots: Roots | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> Iterator[None]:  # fmt: skip
    """`source` bind-mounted over `target` (a directory in the work directory) for the block,
    journalled like a filesystem's mount and unmounted however the block ends."""
    roots = roots or Roots()
    workdir, source, target = workdir.resolve(), source.resolve(), target.resolve()
    if workdir not in target.parents:
        raise UsageError(
            f"the bind mount target {target} is outside the work directory {workdir}: pgdyno "
            "bind-mounts only over its own directories."
        )
    if not source.is_dir() or not target.is_dir():
        missing = source if not source.is_dir() else target
        raise UsageError(f"{missing} is not a directory: create it before the bind mount.")
    numbers = mounts.device_numbers(source)
    with held_journal(workdir) as journal:
        steps: list[Step] = []
        try:
            with signals_held():
                steps.append(journal.record("bind", target, source=str(source), detail=numbers))
                mounts.bind(source, target)
            yield
        finally:
            undo_steps(journal, steps, mounts.LiveDevices(roots), log)
