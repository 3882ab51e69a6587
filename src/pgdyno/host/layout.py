"""Where a cluster keeps its data and WAL: the block devices the report should show first."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pgdyno.host.devices import BlockDevice, device_for_path


def locate_devices(
    data_dir: Path | None, proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")
) -> dict[str, object]:
    """{"data": device, "wal": device, "wal_on_data_device": bool}; {} when not on this host.

    pg_wal is followed when it is a symbolic link to another disk, as the docs recommend for a
    separate WAL device.
    """
    if data_dir is None or not data_dir.is_dir():
        return {}
    wal_dir = (data_dir / "pg_wal").resolve()
    data = device_for_path(data_dir.resolve(), proc_root, sys_root)
    wal = device_for_path(wal_dir, proc_root, sys_root)
    return {
        "data": _describe(data, data_dir),
        "wal": _describe(wal, wal_dir),
        "wal_on_data_device": data is not None and wal is not None and data.name == wal.name,
    }


def _describe(device: BlockDevice | None, path: Path) -> dict[str, object] | None:
    return None if device is None else {"path": str(path), **asdict(device)}


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
