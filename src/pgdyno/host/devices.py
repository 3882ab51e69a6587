"""The block device under a path: its mount, kernel name, whole disk and queue settings.

`parse_mountinfo` and `mount_for` are pure; `device_for_path` reads /proc/self/mountinfo and
/sys under injectable roots, so tests run on recorded copies.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from pgdyno.errors import ParseError

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of /proc/self/mountinfo (see proc_pid_mountinfo(5))."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: str  # per-mount options: rw,noatime,...
    fstype: str
    source: str  # "/dev/nvme0n1p2", "tmpfs", "overlay", ...
    super_options: str  # filesystem options: errors=remount-ro,discard,...


@dataclass(frozen=True, slots=True)
class BlockDevice:
    """Where a path lives. For filesystems without a block device (tmpfs, overlay, NFS), name
    is the filesystem type, disk is None, and so are the queue settings."""

    name: str  # kernel name: "vda", "nvme0n1p2", "dm-0"; or the fstype
    disk: str | None  # whole disk: "nvme0n1" for "nvme0n1p2"; the name itself when not a partition
    major_minor: str  # "254:0"
    mount_point: str
    fstype: str
    mount_options: str  # per-mount then filesystem options, without repeats
    source: str
    rotational: bool | None = None
    scheduler: str | None = None  # the active one, shown in [brackets] by the kernel
    read_ahead_kb: int | None = None
    schedulers: tuple[str, ...] | None = None  # every scheduler the disk offers


def unescape(field: str) -> str:
    """The kernel writes space, tab, newline and backslash in paths as octal escapes."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    r"""/proc/self/mountinfo -> mounts in file order (later mounts can hide earlier ones).

    >>> line = "36 35 98:0 / /mnt/my\\040disk rw,noatime master:1 - ext3 /dev/root rw,data=ordered"
    >>> m = parse_mountinfo(line)[0]
    >>> m.mount_point, m.major, m.fstype, m.super_options
    ('/mnt/my disk', 98, 'ext3', 'rw,data=ordered')
    """
    mounts: list[Mount] = []
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        # Six fixed fields, any number of optional fields, then "-" and three more.
        try:
            separator = parts.index("-", 6)
            major, _, minor = parts[2].partition(":")
            mounts.append(
                Mount(
                    mount_id=int(parts[0]),
                    parent_id=int(parts[1]),
                    major=int(major),
                    minor=int(minor),
                    root=unescape(parts[3]),
                    mount_point=unescape(parts[4]),
                    options=parts[5],
                    fstype=parts[separator + 1],
                    source=unescape(parts[separator + 2]),
                    super_options=parts[separator + 3] if len(parts) > separator + 3 else "",
                )
            )
        except (ValueError, IndexError):
            raise ParseError(
                f"/proc/self/mountinfo line {number} is not a mount line ({line[:80]!r})."
            ) from None
    return mounts


def mount_for(path: PurePosixPath | str, mounts: list[Mount]) -> Mount | None:
    """The mount holding an absolute `path`: the longest mount point that contains it; of equal
    ones, the last mounted (it hides the others). The path is normalised, not resolved.

    >>> mounts = parse_mountinfo("1 0 8:1 / / rw - ext4 /dev/sda1 rw\\n"
    ...                          "2 1 0:9 / /tmp rw - tmpfs tmpfs rw\\n")
    >>> mount_for("/tmp/x", mounts).fstype, mount_for("/tmpfile", mounts).fstype
    ('tmpfs', 'ext4')
    """
    target = PurePosixPath(posixpath.normpath(str(path)))
    if not target.is_absolute():
        raise ValueError(f"mount_for needs an absolute path, not {str(path)!r}")
    best: Mount | None = None
    best_depth = -1
    for mount in mounts:
        point = PurePosixPath(mount.mount_point)
        if (point == target or point in target.parents) and len(point.parts) >= best_depth:
            best, best_depth = mount, len(point.parts)
    return best


def parse_scheduler(text: str) -> str | None:
    """queue/scheduler -> the active scheduler.

    >>> parse_scheduler("none [mq-deadline] kyber bfq\\n"), parse_scheduler("none\\n")
    ('mq-deadline', 'none')
    """
    match = re.search(r"\[([^\]]+)\]", text)
    if match:
        return match.group(1)
    words = text.split()
    return words[0] if len(words) == 1 else None


def parse_schedulers(text: str) -> tuple[str, ...]:
    """queue/scheduler -> every scheduler the disk offers, the active one included.

    >>> parse_schedulers("none [mq-deadline] kyber bfq\\n")
    ('none', 'mq-deadline', 'kyber', 'bfq')
    """
    return tuple(word.strip("[]") for word in text.split())


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _kernel_name(mount: Mount, sys_root: Path) -> str | None:
    """The block device's kernel name from sysfs, else from the mount source; None if none."""
    from_source = mount.source.removeprefix("/dev/") if mount.source.startswith("/dev/") else None
    if mount.major == 0:
        # No block device, except filesystems such as btrfs that report an anonymous number.
        if from_source and (sys_root / "class/block" / from_source).exists():
            return from_source
        return None
    link = sys_root / "dev/block" / f"{mount.major}:{mount.minor}"
    try:
        return link.readlink().name
    except OSError:
        pass
    for line in (_read(link / "uevent") or "").splitlines():
        key, _, value = line.partition("=")
        if key == "DEVNAME" and value:
            return value.replace("/", "!")  # sysfs spells cciss/c0d0 as cciss!c0d0
    return from_source


def _whole_disk(name: str, sys_root: Path) -> str:
    """A partition's directory sits inside its disk's directory in /sys/devices."""
    entry = sys_root / "class/block" / name
    if (entry / "partition").is_file():
        return entry.resolve().parent.name
    return name


def device_for_path(path: Path, proc_root: Path, sys_root: Path) -> BlockDevice | None:
    """The device holding `path`; None when mountinfo cannot be read or holds no mount for it.

    With the live /proc the path is resolved first (symlinks followed); with another root it
    is only normalised, since it names a path of the recorded host.
    """
    text = _read(proc_root / "self/mountinfo")
    if text is None:
        return None
    if proc_root == Path("/proc"):  # the live host: a comparison, not a default
        path = path.resolve()
    mount = mount_for(PurePosixPath(path), parse_mountinfo(text))
    if mount is None:
        return None
    options = dict.fromkeys(mount.options.split(",") + mount.super_options.split(","))
    device = BlockDevice(
        name=mount.fstype,
        disk=None,
        major_minor=f"{mount.major}:{mount.minor}",
        mount_point=mount.mount_point,
        fstype=mount.fstype,
        mount_options=",".join(option for option in options if option),
        source=mount.source,
    )
    name = _kernel_name(mount, sys_root)
    if name is None:
        return device
    disk = _whole_disk(name, sys_root)
    queue = sys_root / "block" / disk / "queue"
    rotational = _read_int(queue / "rotational")
    scheduler = _read(queue / "scheduler")
    return replace(
        device,
        name=name,
        disk=disk,
        rotational=None if rotational is None else rotational != 0,
        scheduler=parse_scheduler(scheduler) if scheduler is not None else None,
        read_ahead_kb=_read_int(queue / "read_ahead_kb"),
        schedulers=parse_schedulers(scheduler) if scheduler is not None else None,
    )
