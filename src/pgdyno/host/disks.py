"""The disks under a path: mounts (/proc/self/mountinfo), the block device holding a path and its
queue settings, the data and WAL devices of a cluster as a run records them, and the doctor
snapshot's `devices` section (docs/doctor-snapshot.md) built from the same facts.

The parsers (`parse_mountinfo`, `mount_for`, `parse_scheduler`) are pure; the readers read
/proc/self/mountinfo and /sys under injectable roots, so tests run on recorded copies
(tests/data/hosts/). Under a root other than the live /proc a path names a path of the recorded
host: it is normalised, never resolved, and the free space of its file system (statvfs) is not
read. What cannot be read is one sentence in `unread`, as in the snapshot's `host` section
(host/machine.py).
"""

from __future__ import annotations

import posixpath
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from pgdyno.errors import ParseError
from pgdyno.records.devices import DeviceLayout, RunDevice

LIVE_PROC = Path("/proc")  # the machine running this; any other root is a recorded host
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
    if proc_root == LIVE_PROC:
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


# The data and WAL devices: the facts a run keeps and the snapshot's `devices` section.


class _Unknown(Exception):
    """Why the device under a path is unknown (one clause)."""


def _run_device(
    role: str, path: Path, device: BlockDevice, free_bytes: int | None = None
) -> RunDevice:
    """The device under `path` as a run keeps it; `free_bytes` is the free space of the file
    system holding `path` (None when not read)."""
    disk = device.disk or ""
    return RunDevice(
        role, str(path), device.name, device.disk, device.major_minor, device.mount_point,
        device.source, device.fstype, device.mount_options, device.rotational,
        nvme=disk.startswith("nvme"), virtual=disk.startswith(("vd", "xvd")),
        scheduler=device.scheduler, schedulers=device.schedulers,
        read_ahead_kb=device.read_ahead_kb, free_bytes=free_bytes,
    )  # fmt: skip


def device_fields(path: Path, device: BlockDevice, free_bytes: int | None = None) -> dict[str, Any]:
    """One entry of the `devices` section; `free_bytes` is the free space of the file system
    holding `path` (None when not read)."""
    return _entry(_run_device("", path, device, free_bytes))


def _entry(found: RunDevice) -> dict[str, Any]:
    """A device as the snapshot holds it: the same keys, in the same order, as the runs table's
    `devices` column (results/encode.py; tests/unit/test_device_records.py keeps them equal)."""
    return {
        "path": found.path, "name": found.name, "disk": found.disk,
        "major_minor": found.major_minor, "mount_point": found.mount_point,
        "source": found.source, "fstype": found.fstype, "mount_options": found.mount_options,
        "rotational": found.rotational, "nvme": found.nvme, "virtual": found.virtual,
        "scheduler": found.scheduler,
        "schedulers": list(found.schedulers) if found.schedulers is not None else None,
        "read_ahead_kb": found.read_ahead_kb, "free_bytes": found.free_bytes,
    }  # fmt: skip


def read_devices(
    data_dir: Path | None,
    wal_dir: Path | None,
    proc_root: Path,
    sys_root: Path,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The `devices` section: {"data": {...}|None, "wal": {...}|None, "wal_on_data_device":
    bool|None}, and unread entries ("devices.data": reason). A directory given as None is null
    without a word (the caller says why); one that cannot be looked up is null with a reason.
    """
    found, unread = find_devices(data_dir, wal_dir, proc_root, sys_root)
    section = {
        "data": None if found.data is None else _entry(found.data),
        "wal": None if found.wal is None else _entry(found.wal),
        "wal_on_data_device": found.wal_on_data_device,
    }
    return section, unread


def find_devices(
    data_dir: Path | None,
    wal_dir: Path | None,
    proc_root: Path,
    sys_root: Path,
) -> tuple[DeviceLayout, dict[str, str]]:
    """read_devices' facts as a record (what a run keeps), with the same unread entries."""
    unread: dict[str, str] = {}
    data = _device("data", data_dir, proc_root, sys_root, unread)
    wal = _device("wal", wal_dir, proc_root, sys_root, unread)
    # One physical disk under both (two partitions of it share its queue); without a block
    # device, the same filesystem.
    same = None
    if data is not None and wal is not None:
        both_disks = bool(data.disk and wal.disk)
        same = data.disk == wal.disk if both_disks else data.major_minor == wal.major_minor
    return DeviceLayout(True, data, wal, same), unread


def _device(
    role: str, path: Path | None, proc_root: Path, sys_root: Path, unread: dict[str, str]
) -> RunDevice | None:
    if path is None:
        return None
    key = f"devices.{role}"
    try:
        if proc_root == LIVE_PROC:
            path.resolve(strict=True)
        elif not path.is_absolute():
            raise _Unknown(f"{path} is not an absolute path")
        device = device_for_path(path, proc_root, sys_root)
        if device is None:
            raise _Unknown(_no_device(path, proc_root))
    except FileNotFoundError:
        unread[key] = f"{path} does not exist on this machine."
    except PermissionError:
        unread[key] = f"{path} cannot be looked up (permission denied): run as its owner or root."
    except (_Unknown, OSError, RuntimeError, ParseError) as error:
        unread[key] = f"the device under {path} is unknown: {str(error).rstrip('.')}."
    else:
        return _run_device(role, path, device, _free_bytes(key, path, proc_root, unread))
    return None


def _free_bytes(key: str, path: Path, proc_root: Path, unread: dict[str, str]) -> int | None:
    """Free space of the file system holding `path`, for an unprivileged writer (statvfs):
    only on the machine itself, since a recorded tree's path names another machine's disk."""
    if proc_root != LIVE_PROC:
        unread[f"{key}.free_bytes"] = (
            f"the free space at {path} is read on the machine itself (statvfs), not from a "
            "recorded /proc."
        )
        return None
    try:
        return shutil.disk_usage(path).free
    except OSError as error:
        unread[f"{key}.free_bytes"] = (
            f"the free space at {path} could not be read ({error.strerror or error})."
        )
        return None


def _no_device(path: Path, proc_root: Path) -> str:
    """Why no device was found: mountinfo unreadable, or no mount holds the path."""
    mountinfo = proc_root / "self/mountinfo"
    if not mountinfo.exists():
        return "/proc/self/mountinfo is not present on this kernel"
    try:
        mountinfo.read_text()
    except PermissionError:
        return "/proc/self/mountinfo is not readable without root"
    except (OSError, UnicodeDecodeError) as error:
        return f"/proc/self/mountinfo could not be read ({error})"
    return f"no mount in /proc/self/mountinfo holds {path}"


def wal_directory(data_dir: Path) -> Path:
    """pg_wal, followed when it is a symbolic link to another disk (as the docs recommend for a
    separate WAL device); OSError when it cannot be looked up."""
    return (data_dir / "pg_wal").resolve(strict=True)


def locate_devices(data_dir: Path | None, proc_root: Path, sys_root: Path) -> DeviceLayout:
    """The data and WAL devices, the facts of a doctor snapshot's `devices` section;
    DeviceLayout() (not on_host) when the data directory is not on this host."""
    if data_dir is None or not data_dir.is_dir():
        return DeviceLayout()
    try:
        wal_dir: Path | None = wal_directory(data_dir)
    except OSError:
        wal_dir = None
    devices, _unread = find_devices(data_dir.resolve(), wal_dir, proc_root, sys_root)
    return devices


def backing_disks(names: list[str], proc_root: Path, sys_root: Path) -> list[str]:
    """The disks holding the image files of the loop devices among `names` (a storage set's
    filesystem on a loop image: the reads and writes reach that disk too)."""
    found: list[str] = []
    for name in names:
        if not name.startswith("loop"):
            continue
        try:
            image = (sys_root / "block" / name / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        device = device_for_path(Path(image), proc_root, sys_root)
        if device is None or device.disk is None:  # an image on tmpfs: no disk to sample
            continue
        for disk in (device.name, device.disk):
            if disk not in names and disk not in found:
                found.append(disk)
    return found


def device_names(devices: DeviceLayout) -> list[str] | None:
    """Devices to sample: those under data and WAL and their whole disks (None: all)."""
    names: list[str] = []
    for device in devices.found:
        for name in (device.name, device.disk):
            if name and name not in names:
                names.append(name)
    return names or None


def free_disk_bytes(path: Path) -> int:
    """Free space for unprivileged writes on the filesystem holding `path`."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free
