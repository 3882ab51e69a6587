"""What a plan asks of the storage layer, and what was built: frozen records, pure.

Where things live in the work directory: `storage/<role>.img` (a loop image) and
`storage/mnt-<role>` (its mount point); the storage journal is `storage-journal.jsonl`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.undo.filesystems import storage_dir

FILESYSTEMS = ("ext4", "xfs", "btrfs", "ext3")
_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
ROLE_RULE = "lower-case letters, digits, '-' and '_', starting with a letter"
ROLE_MAX = 32


@dataclass(frozen=True)
class FsRequest:
    """A filesystem to build under the data or WAL directory."""

    role: str  # "data" or "wal": names the mount point and messages
    filesystem: str  # "ext4" | "xfs" | "btrfs" | "ext3"
    mkfs_options: tuple[str, ...] = ()
    mount_options: str = ""  # e.g. "noatime,nobarrier" ("" = defaults)
    size_bytes: int | None = None  # loop image size (required when device is None)
    device: Path | None = None  # a block device the user names
    destroy_device: bool = False

    def describe(self) -> str:
        """
        >>> FsRequest("wal", "xfs", size_bytes=300 * 2**20).describe()
        'xfs for wal on a 300 MiB loop image'
        >>> FsRequest("data", "ext4", device=Path("/dev/sdb"), destroy_device=True).describe()
        'ext4 for data on /dev/sdb'
        """
        if self.device is not None:
            return f"{self.filesystem} for {self.role} on {self.device}"
        size = f"{(self.size_bytes or 0) / 2**20:,.0f} MiB"
        return f"{self.filesystem} for {self.role} on a {size} loop image"


@dataclass(frozen=True)
class BuiltFs:
    """A filesystem built and mounted by `pgdyno.storage.layer.built_filesystem`."""

    role: str
    mount_point: Path
    device: str  # /dev/loopN or the named device
    filesystem: str  # as asked
    driver: str  # the kernel driver actually mounted ("ext4" for ext3 on a kernel without ext3)
    mount_options: str  # as the kernel reports them (from /proc/self/mountinfo)
    mount_type: str = ""  # the type given to mount -t ("ext3", or "ext4" where no ext3 exists)
    image: Path | None = None  # the loop image, None on a named device


@dataclass(frozen=True)
class Roots:
    """Where the host's files are read: the live host by default, recorded copies in tests."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    modules: Path = Path("/lib/modules")  # /lib/modules/<release>/modules.dep, modules.builtin
    release: str = field(default_factory=lambda: os.uname().release)  # uname -r


def set_role(set_name: str, part: str) -> str:
    """The role of one filesystem of a plan's storage set: it names the image and mount point.

    >>> set_role("xfs-noatime", "data")
    'xfs-noatime-data'
    """
    return f"{set_name}-{part}"


def is_plain_role(role: str) -> bool:
    """
    >>> is_plain_role("xfs-dirty64m-data"), is_plain_role("xfs-dirty64M-data")
    (True, False)
    """
    return _ROLE.fullmatch(role) is not None


def image_path(workdir: Path, role: str) -> Path:
    return storage_dir(workdir) / f"{role}.img"


def mount_point(workdir: Path, role: str) -> Path:
    return storage_dir(workdir) / f"mnt-{role}"


def request_shape_problems(request: FsRequest) -> list[str]:
    """What is wrong with a request on its face, one sentence each (no file is read).

    >>> request_shape_problems(FsRequest("data", "zfs", size_bytes=1))
    ["filesystem 'zfs' for data is not one pgdyno builds: use ext4, xfs, btrfs or ext3."]
    >>> request_shape_problems(FsRequest("data", "xfs"))  # doctest: +NORMALIZE_WHITESPACE
    ['the xfs filesystem for data names neither a size (a loop image in the work directory)
      nor a device: give one of them.']
    """
    problems: list[str] = []
    if not _ROLE.fullmatch(request.role):
        problems.append(
            f"the storage role {request.role!r} is not a plain name: use {ROLE_RULE} "
            "(such as data or wal)."
        )
    if request.filesystem not in FILESYSTEMS:
        problems.append(
            f"filesystem {request.filesystem!r} for {request.role} is not one pgdyno builds: "
            f"use {', '.join(FILESYSTEMS[:-1])} or {FILESYSTEMS[-1]}."
        )
    what = f"the {request.filesystem} filesystem for {request.role}"
    if request.device is None:
        if request.size_bytes is None:
            problems.append(
                f"{what} names neither a size (a loop image in the work directory) nor a "
                "device: give one of them."
            )
        elif request.size_bytes <= 0:
            problems.append(
                f"{what} has a size of {request.size_bytes} bytes: give a size above 0."
            )
    else:
        if request.size_bytes is not None:
            problems.append(
                f"{what} names both a device and a size, but a device is used whole: leave the "
                "size out (it is for a loop image)."
            )
        if not request.device.is_absolute():
            problems.append(
                f"{what} names the device {request.device}, which is not an absolute path: "
                "give its /dev path."
            )
    return problems
