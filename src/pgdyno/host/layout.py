"""Where a cluster keeps its data and WAL: the block devices the report should show first."""

from __future__ import annotations

from pathlib import Path

from pgdyno.host.device_inventory import read_devices


def wal_directory(data_dir: Path) -> Path:
    """pg_wal, followed when it is a symbolic link to another disk (as the docs recommend for a
    separate WAL device); OSError when it cannot be looked up."""
    return (data_dir / "pg_wal").resolve(strict=True)


def locate_devices(data_dir: Path | None, proc_root: Path, sys_root: Path) -> dict[str, object]:
    """{"data": device, "wal": device, "wal_on_data_device": bool}; {} when not on this host.
    The same description as a doctor snapshot's `devices` section."""
    if data_dir is None or not data_dir.is_dir():
        return {}
    try:
        wal_dir: Path | None = wal_directory(data_dir)
    except OSError:
        wal_dir = None
    devices, _unread = read_devices(data_dir.resolve(), wal_dir, proc_root, sys_root)
    return devices


def device_names(devices: dict[str, object]) -> list[str] | None:
    """Devices to sample: those under data and WAL and their whole disks (None: all)."""
    names: list[str] = []
    for role in ("data", "wal"):
        device = devices.get(role)
        if isinstance(device, dict):
            for key in ("name", "disk"):
                name = device.get(key)
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return names or None
