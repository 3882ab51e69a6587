"""Where a cluster keeps its data and WAL: the block devices the report should show first."""

from __future__ import annotations

from pathlib import Path

from pgdyno.host.device_inventory import find_devices
from pgdyno.records.devices import DeviceLayout


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


def device_names(devices: DeviceLayout) -> list[str] | None:
    """Devices to sample: those under data and WAL and their whole disks (None: all)."""
    names: list[str] = []
    for device in devices.found:
        for name in (device.name, device.disk):
            if name and name not in names:
                names.append(name)
    return names or None
