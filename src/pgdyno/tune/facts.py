"""The facts a configuration is computed from: given on the command line, or read by the doctor.

Offline (`--ram` given) nothing is read from this host or any server: what the user does not
give is unknown, as in pgtune's form, and the entries that need it are left out and named.
Online, and with `tune --from`, the facts come from a doctor snapshot only (cgroup-aware RAM and
CPUs, the disks under the data and WAL directories with the schedulers they offer and the WAL
file system's free space, the server's version, settings and data size): nothing here reads a
machine, so a snapshot taken on a server tunes the same on a laptop. Options override facts.

The result is one frozen `TuneFacts` (records/tune.py): each field is a name data/tune.toml
may ask of `t`, None when unknown, with the reason in `unknown` and the origin of each known
fact in `sources`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgdyno.records.tune import FACT_FIELDS, DataSize, Disk, Profile, Storage, TuneFacts

Snapshot = Mapping[str, Any]
NEW_SNAPSHOT = (
    "an older pgdyno's snapshot, or one written by hand: `pgdyno doctor --snapshot` takes a new one"
)
# The connections a profile plans for when neither the user nor the server says (pgtune's too).
PROFILE_CONNECTIONS: Mapping[Profile, int] = {
    "web": 200, "oltp": 300, "dw": 40, "desktop": 20, "mixed": 100,
}  # fmt: skip
# The huge page size assumed offline: x86-64's (and most arm64 kernels') default, 2MB.
OFFLINE_HUGE_PAGE = 2 * 1024 * 1024
# What a data-size class means as data / RAM, for rules that need a ratio.
DATA_RATIOS: Mapping[DataSize, float] = {"less_ram": 0.3, "mid_ram": 1.0, "greater_ram": 2.0}


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


class _Collected:
    """Facts as they are found, then frozen into a TuneFacts."""

    def __init__(self, profile: Profile) -> None:
        self.values: dict[str, Any] = {"profile": profile}
        self.sources: dict[str, str] = {"profile": "--profile"}
        self.unknown: dict[str, str] = {}
        self.devices: list[Disk] = []

    def set(self, name: str, value: Any, source: str | None = None) -> None:
        assert name in FACT_FIELDS, name  # a typo here is a bug, not an unknown fact
        if value is None:
            return
        self.values[name] = value
        if source is not None:
            self.sources[name] = source

    def missing(self, name: str, why: str) -> None:
        if name not in self.values:
            self.unknown.setdefault(name, why)

    def frozen(self) -> TuneFacts:
        return TuneFacts(
            **self.values,
            devices=tuple(self.devices),
            sources=dict(self.sources),
            unknown=dict(self.unknown),
        )


def hash_mem_default(major: int) -> float:
    """hash_mem_multiplier's default: 2.0 since PostgreSQL 15, 1.0 before (13, 14)."""
    return 2.0 if major >= 15 else 1.0


def offline_facts(given: Given) -> TuneFacts:
    """The facts of pgtune's form: what was typed, nothing else."""
    facts = _Collected(given.profile)
    facts.set("ram", given.ram_bytes, "--ram")
    facts.set("host_ram", given.ram_bytes, "--ram")
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
        facts.missing(name, why)
    # Host advice for an unknown Linux: THP exists on nearly every kernel; no NUMA assumed.
    _generic_host(facts, thp=True)
    facts.set("huge_page", OFFLINE_HUGE_PAGE, "assumed offline: x86-64's 2MB huge pages")
    return facts.frozen()


def snapshot_facts(snapshot: Snapshot, given: Given) -> TuneFacts:
    """The facts of a doctor snapshot, with what the user typed on top. A fact the snapshot
    lacks (an older format, or unread there) is unknown with the reason."""
    facts = _Collected(given.profile)
    host = snapshot.get("host") or {}
    server = snapshot.get("server") or {}
    facts.set("ram", given.ram_bytes or host.get("memory_bytes"), _ram_source(given, host))
    host_ram = given.ram_bytes or host.get("memory_total_bytes") or host.get("memory_bytes")
    facts.set("host_ram", host_ram, "--ram" if given.ram_bytes else "host")
    facts.set("cpus", given.cpus or host.get("cpu_count"), "--cpus" if given.cpus else "host")
    major = given.pg_version or server_major(snapshot)
    facts.set("pg", major, "--pg-version" if given.pg_version else "server")
    _connections(facts, given, server)
    _host_facts(facts, host)
    _data_facts(facts, snapshot, given)
    _device_facts(facts, snapshot, given)
    _version_facts(facts, server)
    for name in ("ram", "host_ram", "cpus", "pg", "storage"):
        facts.missing(name, "not read: " + _why_unread(snapshot, name))
    return facts.frozen()


def server_major(snapshot: Snapshot) -> int | None:
    """The server's major version: from `version_num`, else from `version` ("16.4").

    >>> server_major({"server": {"version_num": 180001}})
    18
    >>> server_major({"server": {"version": "16.4"}}), server_major({})
    (16, None)
    """
    server = snapshot.get("server") or {}
    if server.get("version_num"):
        return int(server["version_num"]) // 10000
    match = re.match(r"\s*(\d+)", str(server.get("version") or ""))
    return int(match.group(1)) if match else None


def _ram_source(given: Given, host: Mapping[str, Any]) -> str:
    if given.ram_bytes:
        return "--ram"
    if host.get("memory_limit_bytes") and host["memory_limit_bytes"] == host.get("memory_bytes"):
        return "cgroup memory limit"
    return "host"


def _unread(snapshot: Snapshot, *keys: str) -> str | None:
    unread = snapshot.get("unread") or {}
    return next((str(unread[key]) for key in keys if unread.get(key)), None)


def _why_unread(snapshot: Snapshot, name: str) -> str:
    key = {"ram": "host", "host_ram": "host", "cpus": "host", "pg": "server",
           "storage": "devices"}[name]  # fmt: skip
    return _unread(snapshot, key, f"{key}.data") or "the snapshot does not give it"


def _connections(facts: _Collected, given: Given, server: Mapping[str, Any] | None) -> None:
    if given.connections is not None:
        facts.set("connections", given.connections, "--connections")
        return
    row = ((server or {}).get("settings") or {}).get("max_connections") or {}
    if row.get("setting"):
        facts.set("connections", int(row["setting"]), "the server's max_connections")
        return
    facts.set("connections", PROFILE_CONNECTIONS[given.profile], f"profile {given.profile}")


def _host_facts(facts: _Collected, host: Mapping[str, Any]) -> None:
    if not host:
        _generic_host(facts, thp=False)
        facts.unknown["host"] = (
            "the server runs on another host, not read: host advice is generic and --apply "
            "changes PostgreSQL only"
        )
        return
    facts.set("local", True)
    facts.set("huge_page", host.get("hugepage_size_bytes") or 0, "host")
    facts.set("numa_nodes", host.get("numa_nodes") or 1, "host")
    facts.set("thp", host.get("thp_enabled") is not None, "host")
    facts.set("autogroup", host.get("sched_autogroup_enabled") is not None, "host")
    path = host.get("sched_migration_cost_path") or ""
    facts.set("migration_cost", path.startswith("/proc/sys/"), "host")
    facts.set("swap_bytes", host.get("swap_total_bytes") or 0, "host")
    facts.set("container", host.get("container"), "host")


def _generic_host(facts: _Collected, *, thp: bool) -> None:
    """The host facts when no host was read (no source: nothing was read)."""
    generic = {"local": False, "huge_page": 0, "numa_nodes": 1, "thp": thp, "autogroup": False,
               "migration_cost": False, "swap_bytes": 0}  # fmt: skip
    for name, value in generic.items():
        facts.set(name, value)


def _data_facts(facts: _Collected, snapshot: Snapshot, given: Given) -> None:
    server = snapshot.get("server") or {}
    if not server:
        facts.missing("data_bytes", "no server was read")
    elif "data_bytes" not in server:
        facts.missing("data_bytes", f"the snapshot has no server.data_bytes ({NEW_SNAPSHOT})")
    else:
        facts.set("data_bytes", server["data_bytes"],
                  "the cluster's databases (pgdyno's templates left out)")  # fmt: skip
        why = _unread(snapshot, "server.data_bytes", "server.databases")
        facts.missing("data_bytes", why or "the database sizes could not be read")
    ram, data = facts.values.get("ram"), facts.values.get("data_bytes")
    if given.data_size is not None:
        facts.set("data_ratio", DATA_RATIOS[given.data_size], "--data-size")
    elif ram and data is not None:
        facts.set("data_ratio", data / ram, "data_bytes / ram")


def _device_facts(facts: _Collected, snapshot: Snapshot, given: Given) -> None:
    devices = snapshot.get("devices") or {}
    data = devices.get("data") or {}
    if given.storage is not None:
        facts.set("storage", given.storage, "--storage")
    elif data:
        facts.set("storage", storage_of(data), describe_disk(data))
    role = "wal" if devices.get("wal") else "data"
    wal = devices.get("wal") or data
    _wal_free(facts, snapshot, wal, role)
    for disk_role, device in (("data", data), ("wal", wal)):
        name = device.get("disk")
        if not name or any(disk.name == name for disk in facts.devices):
            continue
        offered = device.get("schedulers")
        if offered is None:
            why = f"the snapshot does not list the schedulers of {name} ({NEW_SNAPSHOT})"
            if "schedulers" in device:
                why = f"the schedulers of {name} could not be read"
            facts.unknown.setdefault("device.schedulers", why)
        facts.devices.append(
            Disk(
                name=str(name),
                role=disk_role,
                scheduler=device.get("scheduler"),
                schedulers=None if offered is None else tuple(offered),
                read_ahead_kb=device.get("read_ahead_kb"),
            )
        )


def _wal_free(facts: _Collected, snapshot: Snapshot, wal: Mapping[str, Any], role: str) -> None:
    if not wal:
        why = _unread(snapshot, "devices.wal", "devices.data", "devices")
        facts.missing("wal_free", why or "the WAL directory's file system is not known")
    elif "free_bytes" not in wal:
        facts.missing("wal_free", f"the snapshot has no free space of the WAL file system "
                      f"({NEW_SNAPSHOT})")  # fmt: skip
    else:
        facts.set("wal_free", wal["free_bytes"], f"free space at {wal.get('path')}")
        why = _unread(snapshot, f"devices.{role}.free_bytes")
        facts.missing("wal_free", why or f"the free space at {wal.get('path')} was not read")


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


def _version_facts(facts: _Collected, server: Mapping[str, Any] | None) -> None:
    major = facts.values.get("pg")
    if major is None:
        return
    row = ((server or {}).get("settings") or {}).get("hash_mem_multiplier") or {}
    if row.get("setting"):
        facts.set("hash_mem", float(row["setting"]), "the server's hash_mem_multiplier")
    else:
        facts.set("hash_mem", hash_mem_default(int(major)), f"PostgreSQL {major}'s default")
