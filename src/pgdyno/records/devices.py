"""The block devices under a run's data and WAL directories, as frozen records.

host/disks.py fills them (the doctor snapshot's `devices` section is the same facts
as a dict); a run keeps them (RunRecord, StoredRun), results/encode.py and results/decode.py turn
them into the runs table's `devices` column and back, and the renderers read their fields.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunDevice:
    """One block device a run's data or WAL lived on. For a filesystem without a block device
    (tmpfs, overlay, NFS), name is the filesystem type, disk is None, and so are the queue
    settings. The fields after `role` are the JSON keys, in the order pgdyno writes them."""

    role: str  # data / wal
    path: str  # the directory (pg_wal followed when it is a link)
    name: str  # kernel name: "vda", "nvme0n1p2", "dm-0"; or the fstype
    disk: str | None  # whole disk: "nvme0n1" for "nvme0n1p2"
    major_minor: str  # "254:0"
    mount_point: str
    source: str  # "/dev/vda", "tmpfs", "overlay", ...
    fstype: str
    mount_options: str  # per-mount then filesystem options, without repeats
    rotational: bool | None = None
    nvme: bool | None = None  # None: stored before pgdyno told (and so are the three below)
    virtual: bool | None = None  # a virtio or Xen disk (vd*, xvd*)
    scheduler: str | None = None  # the active one
    schedulers: tuple[str, ...] | None = None  # every scheduler the disk offers
    read_ahead_kb: int | None = None
    free_bytes: int | None = None  # free space for an unprivileged writer; None: not read
    # The keys of the stored JSON in their order when an earlier pgdyno wrote fewer or in
    # another order (so the run prints as it was stored); None: every field above but role.
    stored_keys: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DeviceLayout:
    """Where a run's cluster kept its data and WAL: one device each (None: not found)."""

    # False: the server's data directory is not on this host, so nothing was looked up.
    on_host: bool = False
    data: RunDevice | None = None
    wal: RunDevice | None = None
    wal_on_data_device: bool | None = None  # one physical disk under both; None: unknown

    @property
    def found(self) -> tuple[RunDevice, ...]:
        """The devices found, data first."""
        return tuple(d for d in (self.data, self.wal) if d is not None)

    def device(self, role: str) -> RunDevice | None:
        return next((d for d in self.found if d.role == role), None)
