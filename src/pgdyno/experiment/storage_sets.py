"""The storage of a set (`[set.storage]`): the sandbox's data directory on a filesystem pgdyno
builds, and pg_wal on another one when the set asks (seeds 001 and 004).

A set's filesystems are built the first time the set runs (storage/layer.py: loop image or
device, mkfs, mount, each journalled first) and kept until the comparison ends. The sandbox's
data directory, stopped, is copied onto the set's filesystem with its datasets (their
templates), pg_wal moved onto the WAL filesystem behind a symbolic link as PostgreSQL's
documentation recommends for a separate WAL disk, and the copy is bind-mounted over the
sandbox's data directory while the set runs: the sandbox keeps its paths and its port, and
every run of the set starts from the template on the set's own filesystem. Between sets the
sandbox is stopped and the bind mount undone, so the data directory underneath, never written
while a storage set ran, is the next set's again.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from pgdyno import process
from pgdyno.errors import ClusterError
from pgdyno.experiment.matrix import BenchSpec
from pgdyno.host.machine import HostFacts
from pgdyno.pgbench.scale import DEFAULT_SHARED_BUFFERS, choose_scale, estimated_bytes
from pgdyno.plan.check import WAL_IMAGE_BYTES, fs_request
from pgdyno.plan.model import FsSpec, StorageSpec
from pgdyno.postgres.cluster import Sandbox
from pgdyno.storage.layer import BuiltFs, bind_mounted, built_filesystem, inspect_request
from pgdyno.storage.model import FsRequest, set_role

COPY_TIMEOUT_S = 6 * 3600.0


def image_size(data_bytes: int) -> int:
    """A loop image for a data directory of `data_bytes`: twice its size (the template and the
    runs' copy of it, where the filesystem cannot clone) plus 3 GiB for WAL (max_wal_size is
    1 GB by default), checkpoints and temporary files; at least 4 GiB. The image is
    preallocated (storage/layer.py), so `plan check` counts it against the free space and a run
    never finds the host's disk full under it.

    >>> image_size(0) >> 30, image_size(3 << 30) >> 30
    (4, 9)
    """
    return max(4 << 30, 2 * data_bytes + (3 << 30))


def expected_dataset_bytes(spec: BenchSpec, host: HostFacts) -> int:
    """The largest dataset the plan's scales make on this host, before any server ran (with
    PostgreSQL's default shared_buffers): what a set's storage must hold."""
    return max(
        estimated_bytes(choose_scale(s, host.memory_bytes, DEFAULT_SHARED_BUFFERS, None,
                                     spec.dataset).scale, spec.dataset)
        for s in spec.scales
    )  # fmt: skip


@dataclass
class _Built:
    data: BuiltFs
    wal: BuiltFs | None
    copy: Path  # the data directory's copy on `data`


class SetStorage:
    """The filesystems of a comparison's storage sets and which one is under the sandbox."""

    def __init__(self, workdir: Path, log: Callable[[str], None], dataset_bytes: int = 0) -> None:
        self.workdir = workdir
        self.log = log
        self.dataset_bytes = dataset_bytes  # the largest dataset the plan makes
        self._built: dict[str, _Built] = {}  # set name -> its filesystems
        self._stack = ExitStack()  # every filesystem, until close()
        self._bound: ExitStack | None = None  # the bind mount of the set in use
        self.current: str | None = None  # the set whose storage is under the sandbox

    def wanted(self, name: str, storage: StorageSpec | None) -> bool:
        """Whether switching to set `name` changes what is under the data directory."""
        return (name if storage is not None else None) != self.current

    def arrange(self, box: Sandbox, name: str, storage: StorageSpec | None) -> None:
        """Put set `name`'s storage under the (stopped) sandbox's data directory, or none."""
        if box.postmaster_pid() is not None:
            raise ClusterError("the sandbox must be stopped before its storage changes")
        if self._bound is not None:
            self._bound.close()
            self._bound = None
            self.current = None
        if storage is None:
            return
        built = self._built.get(name) or self._build(box, name, storage)
        self._bound = ExitStack()
        self._bound.enter_context(bind_mounted(built.copy, box.data_dir, self.workdir))
        self.current = name

    def _build(self, box: Sandbox, name: str, storage: StorageSpec) -> _Built:
        size = image_size(max(_bytes_under(box.data_dir), self.dataset_bytes))
        self.log(f"set {name}: building its storage ({describe_storage(storage)})")
        data = self._built_fs(fs_request(storage, set_role(name, "data"), size))
        wal = None
        if storage.wal is not None:
            wal = self._built_fs(fs_request(storage.wal, set_role(name, "wal"), WAL_IMAGE_BYTES))
        copy = data.mount_point / "data"
        _copy_tree(box.data_dir, copy)
        if wal is not None:
            _copy_tree(copy / "pg_wal", wal.mount_point / "pg_wal")
            process.run(["rm", "-rf", "--", str(copy / "pg_wal")], what="rm", timeout=600)
            (copy / "pg_wal").symlink_to(wal.mount_point / "pg_wal")
        self._built[name] = _Built(data, wal, copy)
        return self._built[name]

    def _built_fs(self, request: FsRequest) -> BuiltFs:
        return self._stack.enter_context(built_filesystem(self.workdir, request, self.log))

    def close(self) -> None:
        """Undo the bind mount and tear every filesystem down (the sandbox stopped first)."""
        try:
            if self._bound is not None:
                self._bound.close()
        finally:
            self._bound = None
            self.current = None
            self._stack.close()
            self._built.clear()


def _copy_tree(source: Path, target: Path) -> None:
    """`cp -a` (owners, modes, links kept; a clone where the filesystem offers one)."""
    process.run(["cp", "-a", "--reflink=auto", "--", str(source), str(target)],
                what=f"copying {source} to {target}", timeout=COPY_TIMEOUT_S)  # fmt: skip


def _bytes_under(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def storage_notes(storage: StorageSpec | None, workdir: Path) -> list[str]:
    """What `plan check` adds about a set's filesystems (e.g. ext3 served by the ext4 driver)."""
    if storage is None:
        return []
    parts = [storage, *([storage.wal] if storage.wal is not None else [])]
    requests = [fs_request(fs, "check", WAL_IMAGE_BYTES) for fs in parts]
    return [note for request in requests for note in inspect_request(request, workdir).notes]


def describe_storage(storage: StorageSpec | None) -> str:
    """
    >>> from pgdyno.plan.model import FsSpec, StorageSpec
    >>> describe_storage(StorageSpec(filesystem="xfs", mount_options="noatime",
    ...                              wal={"filesystem": "ext4"}))
    'xfs -o noatime on a loop image, WAL on ext4 on a loop image'
    """
    if storage is None:
        return "-"

    def one(fs: FsSpec) -> str:
        where = f"on {fs.device}" if fs.device else "on a loop image"
        options = f" -o {fs.mount_options}" if fs.mount_options else ""
        return f"{fs.filesystem}{options} {where}"

    text = one(storage)
    return text + (f", WAL on {one(storage.wal)}" if storage.wal is not None else "")
