"""The facts a configuration is computed from: given on the command line, or read by the doctor.

Offline (`--ram` given) nothing is read from this host or any server: what the user does not
give is unknown, as in pgtune's form, and the entries that need it are left out and named.
Online the facts come from a doctor snapshot (cgroup-aware RAM and CPUs, the disks under the
data and WAL directories, the server's version, settings and data size); options override them.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pgdyno.host.knobs import offered_schedulers

Profile = Literal["web", "oltp", "dw", "mixed", "desktop"]
PROFILES: tuple[Profile, ...] = ("web", "oltp", "dw", "mixed", "desktop")
Storage = Literal["hdd", "ssd", "san", "nvme"]
STORAGES: tuple[Storage, ...] = ("hdd", "ssd", "san", "nvme")
DataSize = Literal["less_ram", "mid_ram", "greater_ram"]
DATA_SIZES: tuple[DataSize, ...] = ("less_ram", "mid_ram", "greater_ram")

# The connections a profile plans for when neither the user nor the server says (pgtune's too).
PROFILE_CONNECTIONS: Mapping[str, int] = {
    "web": 200, "oltp": 300, "dw": 40, "desktop": 20, "mixed": 100,
}  # fmt: skip
# What a data-size class means as data / RAM, for rules that need a ratio.
DATA_RATIOS: Mapping[str, float] = {"less_ram": 0.3, "mid_ram": 1.0, "greater_ram": 2.0}
TEMPLATE_PREFIX = "pgdyno_tpl_"  # pgdyno's dataset templates: never read by a workload


@dataclass(frozen=True)
class Given:
    """What the user typed: every field optional, except the profile."""

    profile: Profile = "mixed"
    ram_bytes: int | None = None
    cpus: int | None = None
    connections: int | None = None
    pg_version: int | None = None
    storage: Storage | None = None
    data_size: DataSize | None = None

    @property
    def offline(self) -> bool:
        return self.ram_bytes is not None


@dataclass
class Facts:
    """The `t` names of data/tune.toml, the disks, and where each fact came from."""

    values: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, source: str) -> None:
        if value is None:
            return
        self.values[name] = value
        self.sources[name] = source


def hash_mem_default(major: int) -> float:
    """hash_mem_multiplier's default: 2.0 since PostgreSQL 15, 1.0 before (13, 14)."""
    return 2.0 if major >= 15 else 1.0


def offline_facts(given: Given) -> Facts:
    """The facts of pgtune's form: what was typed, nothing else."""
    facts = Facts()
    facts.set("profile", given.profile, "--profile")
    facts.set("ram", given.ram_bytes, "--ram")
    facts.set("cpus", given.cpus, "--cpus")
    facts.set("pg", given.pg_version, "--pg-version")
    facts.set("storage", given.storage, "--storage")
    if given.data_size is not None:
        facts.set("data_ratio", DATA_RATIOS[given.data_size], "--data-size")
    _connections(facts, given, None)
    _version_facts(facts, None)
    for name, why in (
        ("cpus", "give --cpus"), ("pg", "give --pg-version"), ("storage", "give --storage"),
        ("data_bytes", "offline: the database's size is not read (--data-size gives a class)"),
        ("wal_free", "offline: the WAL file system is not read"),
    ):  # fmt: skip
        if name not in facts.values:
            facts.unknown[name] = why
    # Host advice for an unknown Linux: THP exists on nearly every kernel; no NUMA assumed.
    facts.values.update(local=False, huge_page=0, numa_nodes=1, thp=True, autogroup=False,
                        migration_cost=False, swap_bytes=0)  # fmt: skip
    return facts


def snapshot_facts(snapshot: Mapping[str, Any], given: Given, sys_root: Path) -> Facts:
    """The facts of a doctor snapshot, with what the user typed on top."""
    facts = Facts()
    host = snapshot.get("host") or {}
    server = snapshot.get("server") or {}
    facts.set("profile", given.profile, "--profile")
    facts.set("ram", given.ram_bytes or host.get("memory_bytes"), _ram_source(given, host))
    facts.set("cpus", given.cpus or host.get("cpu_count"), "--cpus" if given.cpus else "host")
    major = given.pg_version or _major(server)
    facts.set("pg", major, "--pg-version" if given.pg_version else "server")
    _connections(facts, given, server)
    _host_facts(facts, host)
    _data_facts(facts, server, given)
    _device_facts(facts, snapshot.get("devices") or {}, given, sys_root)
    _version_facts(facts, server)
    for name in ("ram", "cpus", "pg", "storage"):
        if name not in facts.values:
            facts.unknown.setdefault(name, "not read: " + _why_unread(snapshot, name))
    return facts


def _ram_source(given: Given, host: Mapping[str, Any]) -> str:
    if given.ram_bytes:
        return "--ram"
    if host.get("memory_limit_bytes") and host["memory_limit_bytes"] == host.get("memory_bytes"):
        return "cgroup memory limit"
    return "host"


def _why_unread(snapshot: Mapping[str, Any], name: str) -> str:
    unread = snapshot.get("unread") or {}
    key = {"ram": "host", "cpus": "host", "pg": "server", "storage": "devices"}[name]
    return str(unread.get(key) or unread.get(f"{key}.data") or "unknown")


def _major(server: Mapping[str, Any]) -> int | None:
    version_num = server.get("version_num")
    return int(version_num) // 10000 if version_num else None


def _connections(facts: Facts, given: Given, server: Mapping[str, Any] | None) -> None:
    if given.connections is not None:
        facts.set("connections", given.connections, "--connections")
        return
    row = ((server or {}).get("settings") or {}).get("max_connections") or {}
    if row.get("setting"):
        facts.set("connections", int(row["setting"]), "the server's max_connections")
        return
    facts.set("connections", PROFILE_CONNECTIONS[given.profile], f"profile {given.profile}")


def _host_facts(facts: Facts, host: Mapping[str, Any]) -> None:
    if not host:
        facts.values.update(local=False, huge_page=0, numa_nodes=1, thp=False, autogroup=False,
                            migration_cost=False, swap_bytes=0)  # fmt: skip
        facts.unknown["host"] = (
            "the server runs on another host, not read: host advice is generic and --apply "
            "changes PostgreSQL only"
        )
        return
    facts.values["local"] = True
    facts.set("huge_page", host.get("hugepage_size_bytes") or 0, "host")
    facts.set("numa_nodes", host.get("numa_nodes") or 1, "host")
    facts.set("thp", host.get("thp_enabled") is not None, "host")
    facts.set("autogroup", host.get("sched_autogroup_enabled") is not None, "host")
    path = host.get("sched_migration_cost_path") or ""
    facts.set("migration_cost", path.startswith("/proc/sys/"), "host")
    facts.set("swap_bytes", host.get("swap_total_bytes") or 0, "host")


def _data_facts(facts: Facts, server: Mapping[str, Any], given: Given) -> None:
    databases = [
        db for db in server.get("databases") or [] if not str(db.get("name", "")).startswith(
            (TEMPLATE_PREFIX, "template"))
    ]  # fmt: skip
    if databases:
        largest = max(int(db.get("bytes") or 0) for db in databases)
        facts.set("data_bytes", largest, "the largest database (pgdyno's templates left out)")
        ram = facts.values.get("ram")
        if ram:
            facts.set("data_ratio", largest / ram, "data_bytes / ram")
    elif given.data_size is not None:
        facts.set("data_ratio", DATA_RATIOS[given.data_size], "--data-size")
    else:
        facts.unknown["data_bytes"] = "no server was read"
    if given.data_size is not None:
        facts.set("data_ratio", DATA_RATIOS[given.data_size], "--data-size")


def _device_facts(facts: Facts, devices: Mapping[str, Any], given: Given, sys_root: Path) -> None:
    data = devices.get("data") or {}
    if given.storage is not None:
        facts.set("storage", given.storage, "--storage")
    elif data:
        facts.set("storage", storage_of(data), describe_disk(data))
    wal = devices.get("wal") or data
    if wal.get("path"):
        try:
            facts.set(
                "wal_free", shutil.disk_usage(wal["path"]).free, f"free space at {wal['path']}"
            )
        except OSError:
            facts.unknown["wal_free"] = f"cannot read the free space at {wal['path']}"
    for role, device in (("data", data), ("wal", wal)):
        disk = device.get("disk")
        if not disk or disk in facts.devices:
            continue
        facts.devices[disk] = {
            "role": role,
            "scheduler": device.get("scheduler"),
            "schedulers": _offered(sys_root, disk),
            "read_ahead_kb": device.get("read_ahead_kb"),
        }


def _offered(sys_root: Path, disk: str) -> tuple[str, ...]:
    try:
        return tuple(
            offered_schedulers((sys_root / "block" / disk / "queue/scheduler").read_text())
        )
    except OSError:
        return ()


def storage_of(device: Mapping[str, Any]) -> Storage:
    """The disk type as pgtune's form names it; a virtual disk is taken for flash (most cloud
    volumes are), which `--storage` corrects."""
    if device.get("nvme"):
        return "nvme"
    if device.get("rotational") and not device.get("virtual"):
        return "hdd"
    return "ssd"


def describe_disk(device: Mapping[str, Any]) -> str:
    name = device.get("disk") or device.get("name") or "?"
    if device.get("virtual"):
        return f"virtual disk {name}: assumed flash-backed (give --storage hdd if not)"
    return f"disk {name}"


def _version_facts(facts: Facts, server: Mapping[str, Any] | None) -> None:
    major = facts.values.get("pg")
    if major is None:
        return
    facts.set("hash_mem", hash_mem_default(int(major)), f"PostgreSQL {major}'s default")
    row = ((server or {}).get("settings") or {}).get("hash_mem_multiplier") or {}
    if row.get("setting"):
        facts.set("hash_mem", float(row["setting"]), "the server's hash_mem_multiplier")
