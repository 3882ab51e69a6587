"""Take a doctor snapshot of this host and, when asked, of a PostgreSQL server.

The host is audited only when the server runs on it: the facts of this machine say nothing
about a server elsewhere. Everything that cannot be read is named in `unread`, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgdyno import __version__
from pgdyno.doctor.snapshot import FORMAT
from pgdyno.environment import Environment
from pgdyno.host.disks import read_devices, wal_directory
from pgdyno.host.machine import read_inventory
from pgdyno.postgres.client import connect
from pgdyno.postgres.inventory import read_server


@dataclass(frozen=True)
class ServerHost:
    """The server's host when it is another machine: a copy of its /proc and /sys (see
    remote/host_tree.py), and how a path is resolved there."""

    proc_root: Path
    sys_root: Path
    realpath: Callable[[Path], Path | None]


def take_snapshot(
    env: Environment,
    *,
    target: str,
    dsn: str | None = None,
    password: str | None = None,
    data_dir: Path | None = None,
    wal_dir: Path | None = None,
    server_host: ServerHost | None = None,
) -> dict[str, Any]:
    """The snapshot of the host (`env`'s /proc and /sys roots, or `server_host`'s copy of
    another host's, whose server is on it) and of the server `dsn` names."""
    proc_root = env.proc_root if server_host is None else server_host.proc_root
    sys_root = env.sys_root if server_host is None else server_host.sys_root
    realpath = None if server_host is None else server_host.realpath
    unread: dict[str, str] = {}
    server: dict[str, Any] | None = None
    if dsn is not None:
        with connect(dsn, password) as client:
            server, missing = read_server(client, dsn)
        unread.update(missing)
    else:
        unread["server"] = "no server was audited: give --dsn, or --sandbox for pgdyno's own."
    host: dict[str, Any] | None = None
    devices: dict[str, Any] | None = None
    if server is not None and (data_dir is not None or server_host is not None):
        server["local"] = True  # the user says where its data lives: it is on this host
    if server is not None and not server.get("local"):
        unread["host"] = (
            "the server runs on another machine (or its data directory is not visible here): "
            "run pgdyno doctor on that machine to audit its host."
        )
    else:
        host, missing = read_inventory(proc_root, sys_root)
        unread.update(missing)
        data_dir = data_dir or _data_directory(server)
        if wal_dir is None and data_dir is not None:
            wal_dir = _wal_directory(data_dir, unread, realpath)
        if data_dir is None:
            unread["devices"] = (
                "no data directory known: audit a server (--dsn, --sandbox) or give --data-dir."
            )
        devices, missing = read_devices(data_dir, wal_dir, proc_root, sys_root)
        unread.update(missing)
    return {
        "format": FORMAT,
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "pgdyno_version": __version__,
        "target": target,
        "host": host,
        "devices": devices,
        "server": server,
        "unread": unread,
    }


def _data_directory(server: dict[str, Any] | None) -> Path | None:
    if server is None:
        return None
    row = (server.get("settings") or {}).get("data_directory") or {}
    setting = row.get("setting")
    return Path(setting) if setting else None


def _wal_directory(
    data_dir: Path, unread: dict[str, str], realpath: Callable[[Path], Path | None] | None
) -> Path | None:
    """pg_wal's real place, or None with the reason in `unread`."""
    if realpath is not None:
        found = realpath(data_dir / "pg_wal")
        if found is None:
            unread["devices.wal"] = (
                f"{data_dir / 'pg_wal'} cannot be seen on the server's host: give --wal-dir."
            )
        return found
    try:
        return wal_directory(data_dir)
    except PermissionError:
        unread["devices.wal"] = (
            f"cannot look inside {data_dir} (permission denied): run as the server's owner or "
            "root, or give --wal-dir."
        )
    except OSError:
        unread["devices.wal"] = f"{data_dir / 'pg_wal'} does not exist here: give --wal-dir."
    return None
