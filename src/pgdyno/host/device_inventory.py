"""The `devices` section of a doctor snapshot: the disks under the data and WAL directories.

Read under injectable roots like the `host` section (host/inventory.py), with one sentence in
`unread` for what cannot be read; the free space of a file system is read on the machine
itself only (statvfs), never from a recorded tree.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pgdyno.errors import ParseError
from pgdyno.host.devices import BlockDevice, device_for_path
from pgdyno.host.facts import LIVE_PROC
from pgdyno.records.devices import DeviceLayout, RunDevice

__all__ = ["device_fields", "find_devices", "read_devices"]


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
    `devices` column (store/encode.py; tests/unit/test_device_records.py keeps them equal)."""
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
