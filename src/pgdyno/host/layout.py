"""Where a cluster keeps its data and WAL: the block devices the report should show first."""

from __future__ import annotations

from pathlib import Path

from pgdyno.host.device_inventory import find_devices
from pgdyno.host.devices import device_for_path
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
