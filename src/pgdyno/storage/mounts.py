"""Mounts: mount and umount (util-linux), read back from /proc/self/mountinfo.

What is mounted is always read from mountinfo (pgdyno.host.disks parses it), never assumed:
a mount that is already gone counts as unmounted, and the options a filesystem runs with are
the kernel's, per mount and per filesystem.
"""

from __future__ import annotations

import os
from pathlib import Path

from pgdyno.host.disks import Mount, parse_mountinfo
from pgdyno.storage.model import Roots, StorageError
from pgdyno.storage.tools import run_tool


def read_mounts(roots: Roots) -> list[Mount]:
    try:
        text = (roots.proc / "self" / "mountinfo").read_text()
    except OSError as error:
        raise StorageError(
            f"cannot read {roots.proc}/self/mountinfo ({error.strerror}): check that /proc is "
            "mounted."
        ) from None
    return parse_mountinfo(text)


def mounts_at(target: Path, mounts: list[Mount]) -> list[Mount]:
    """The mounts whose mount point is `target` (absolute), the topmost last."""
    return [mount for mount in mounts if mount.mount_point == str(target)]


def kernel_options(mount: Mount) -> str:
    """Per-mount options, then the filesystem's, each once.

    >>> from pgdyno.host.disks import parse_mountinfo
    >>> line = "40 1 7:0 / /m rw,noatime - ext4 /dev/loop0 rw,nobarrier"
    >>> kernel_options(parse_mountinfo(line)[0])
    'rw,noatime,nobarrier'
    """
    options = dict.fromkeys([*mount.options.split(","), *mount.super_options.split(",")])
    return ",".join(option for option in options if option)


def device_numbers(path: Path) -> str:
    """The major:minor of the filesystem `path` lives on (as mountinfo writes it)."""
    dev = path.stat().st_dev
    return f"{os.major(dev)}:{os.minor(dev)}"


def mount(source: str, target: Path, fstype: str, options: str) -> None:
    argv = ["mount", "-t", fstype, *(["-o", options] if options else []), source, str(target)]
    run_tool(
        argv, what=" ".join(argv),
        hint=f"check the mount options for {fstype} (`dmesg` says which one the kernel refused)",
    )  # fmt: skip


def bind(source: Path, target: Path) -> None:
    run_tool(
        ["mount", "--bind", str(source), str(target)], what=f"mount --bind {source} {target}",
        hint="check that both directories exist",
    )  # fmt: skip


def umount(target: Path) -> None:
    run_tool(
        ["umount", str(target)], what=f"umount {target}",
        hint=f"stop what uses it (`fuser -vm {target}`), then run `pgdyno rollback`",
    )  # fmt: skip
