"""What `pgdyno tune` computes a configuration from, as frozen records.

The choices of pgtune's form (profile, storage, data size), shared by pgdyno's own advice and
the baselines; the disks under the data and WAL directories; and `TuneFacts`, whose fields are
the names data/tune.toml may ask of `t` (expressions/load.py refuses any other), so a renamed
fact is an error where it is read, never a silent "unknown". tune/facts.py fills them from
the options or a doctor snapshot; terminal/tune.py writes them as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Profile = Literal["web", "oltp", "dw", "mixed", "desktop"]
PROFILES: tuple[Profile, ...] = ("web", "oltp", "dw", "mixed", "desktop")
Storage = Literal["hdd", "ssd", "san", "nvme"]
STORAGES: tuple[Storage, ...] = ("hdd", "ssd", "san", "nvme")
DataSize = Literal["less_ram", "mid_ram", "greater_ram"]
DATA_SIZES: tuple[DataSize, ...] = ("less_ram", "mid_ram", "greater_ram")


@dataclass(frozen=True, slots=True)
class Disk:
    """A disk under the data or WAL directory: the `device` facts of data/tune.toml."""

    name: str  # the whole disk: "nvme0n1", "vda"
    role: str  # "data" or "wal"
    scheduler: str | None  # the active I/O scheduler
    schedulers: tuple[str, ...] | None  # what the disk offers; None: unknown
    read_ahead_kb: int | None

    def scope(self) -> dict[str, Any]:
        """The names a device entry sees (`device.<name>`); None is unknown."""
        return {name: getattr(self, name) for name in DEVICE_FACTS}


DEVICE_FACTS = tuple(f.name for f in fields(Disk) if f.name != "name")


@dataclass(frozen=True)
class TuneFacts:
    """The machine and server a configuration is for: one field per `t.<name>` of
    data/tune.toml (None: unknown, and `unknown` says why), then the disks, and where each
    known fact came from."""

    profile: Profile
    connections: int  # max_connections to plan for (given, the server's, else the profile's)
    ram: int | None = None  # bytes PostgreSQL may use (the cgroup limit when lower)
    host_ram: int | None = None  # the host's RAM, for host settings (above ram under a cgroup)
    cpus: int | None = None  # usable CPUs (affinity and cgroup quota applied)
    pg: int | None = None  # PostgreSQL major version
    storage: Storage | None = None  # the disk under the data directory
    data_bytes: int | None = None  # the whole cluster's data, pgdyno's templates left out
    data_ratio: float | None = None  # data_bytes / ram, or --data-size's class
    wal_free: int | None = None  # free bytes of the WAL file system
    hash_mem: float | None = None  # hash_mem_multiplier: the server's, else the default
    io_methods: tuple[str, ...] | None = None  # io_method values the target's build offers
    wal_compressions: tuple[str, ...] | None = None  # wal_compression values it offers
    toast_compressions: tuple[str, ...] | None = None  # default_toast_compression values
    timing_ns: float | None = None  # one clock read, ns (pg_test_timing on the server's host)
    huge_page: int = 0  # huge page size in bytes; 0: not known here
    local: bool = False  # the host is the server's host
    numa_nodes: int = 1
    thp: bool = False  # transparent huge pages exist
    autogroup: bool = False  # kernel.sched_autogroup_enabled exists
    migration_cost: bool = False  # kernel.sched_migration_cost_ns exists in /proc/sys
    swap_bytes: int = 0
    # The container runtime the server runs in (docker, podman, lxc, kubernetes, container);
    # None: not in one, or not read. Host and device settings are then the host's.
    container: str | None = None
    devices: tuple[Disk, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)
    unknown: Mapping[str, str] = field(default_factory=dict)

    def scope(self) -> dict[str, Any]:
        """The names an entry sees as `t.<name>`; None is unknown."""
        return {name: getattr(self, name) for name in FACT_FIELDS}

    def known(self) -> dict[str, Any]:
        return {name: value for name, value in self.scope().items() if value is not None}

    def disk(self, name: str | None) -> Disk | None:
        return next((disk for disk in self.devices if disk.name == name), None)

    def data_disk(self) -> str | None:
        """The name of the disk under the data directory, when known."""
        return next((disk.name for disk in self.devices if disk.role == "data"), None)


# The facts data/tune.toml may ask of `t`: every field but the disks and the bookkeeping.
FACT_FIELDS = tuple(
    f.name for f in fields(TuneFacts) if f.name not in ("devices", "sources", "unknown")
)
