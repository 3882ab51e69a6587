"""Host facts recorded with every run: who the host is (machine id, hostname, OS, kernel,
virtualisation), its CPU and memory (honouring cgroup limits), disk.

Parsers are pure functions of file text; `read_host` reads them under injectable roots so
tests run on recorded snapshots. Under a root other than the live /proc nothing is read from the
machine running this: a recorded host's CPUs come from its own files. /etc is read beside the
/proc root (`/proc` -> `/etc`, `tree/proc` -> `tree/etc`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pgdyno.host.parsers import (
    count_processors,
    count_stat_cpus,
    hypervisor_from_dmi,
    parse_cpu_flags,
    parse_cpu_list,
)


@dataclass(frozen=True)
class HostFacts:
    kernel: str
    cpu_model: str
    cpu_count: int  # usable CPUs: affinity (or a recorded tree's CPUs) and cgroup quota applied;
    # 0 when a recorded tree names no CPU
    memory_bytes: int  # usable RAM: the smaller of MemTotal and the cgroup limit
    memory_total_bytes: int  # MemTotal, what the host has
    # Who the host is, to group runs by host and tell hosts apart (issue 22); "" when unknown.
    hostname: str = ""  # of the UTS namespace pgdyno (or its remote sampler) ran in
    machine_id: str = ""  # /etc/machine-id: stable across reboots and renames
    os_release: str = ""  # PRETTY_NAME of /etc/os-release
    virtualization: str = ""  # hypervisor, "unknown-hypervisor", or "" on bare metal

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo -> bytes per field.

    >>> parse_meminfo("MemTotal:  2048 kB\\nHugePages_Total:   0\\n")
    {'MemTotal': 2097152, 'HugePages_Total': 0}
    """
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        value = int(parts[0])
        values[name.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return values


def parse_cpu_model(cpuinfo: str) -> str:
    """
    >>> parse_cpu_model("processor : 0\\nmodel name\\t: AMD EPYC 7B13\\n")
    'AMD EPYC 7B13'
    """
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model", "Hardware"):
            return value.strip()
    return "unknown"


def parse_cgroup_memory_limit(text: str) -> int | None:
    """memory.max (v2) or memory.limit_in_bytes (v1); None when unlimited.

    >>> parse_cgroup_memory_limit("max\\n") is None
    True
    >>> parse_cgroup_memory_limit("4294967296\\n")
    4294967296
    >>> parse_cgroup_memory_limit("9223372036854771712") is None
    True
    """
    value = text.strip()
    if not value or value == "max":
        return None
    limit = int(value)
    return None if limit >= 1 << 60 else limit


def parse_cgroup_cpu_quota(text: str) -> float | None:
    """cpu.max (v2): "quota period" -> CPUs; None when unlimited.

    >>> parse_cgroup_cpu_quota("200000 100000")
    2.0
    >>> parse_cgroup_cpu_quota("max 100000") is None
    True
    """
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    return int(parts[0]) / int(parts[1])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


LIVE_PROC = Path("/proc")
# Where a recorded tree says how many CPUs were online, tried in order: the kernel's list, a
# cpuN line of /proc/stat or a processor entry of /proc/cpuinfo for each online CPU.
_ONLINE: tuple[tuple[str, Callable[[str], int]], ...] = (
    ("/sys/devices/system/cpu/online", parse_cpu_list),
    ("/proc/stat", count_stat_cpus),
    ("/proc/cpuinfo", count_processors),
)
# The cpuset of the tree's cgroup (v2, then v1); on the live machine the affinity mask has it.
_CPUSET: tuple[tuple[str, Callable[[str], int]], ...] = (
    ("/sys/fs/cgroup/cpuset.cpus.effective", parse_cpu_list),
    ("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", parse_cpu_list),
)


def _first_count(
    proc_root: Path, sys_root: Path, sources: Sequence[tuple[str, Callable[[str], int]]]
) -> int | None:
    """The count the first readable file gives; a ValueError naming it when it is garbled."""
    for shown, parse in sources:
        top, _, rest = shown.lstrip("/").partition("/")
        text = _read((proc_root if top == "proc" else sys_root) / rest)
        if text is None:
            continue
        try:
            return parse(text)
        except ValueError:
            raise ValueError(f"{shown} could not be parsed ({text.strip()[:40]!r})") from None
    return None


def recorded_cpus(proc_root: Path, sys_root: Path) -> int | None:
    """The CPUs a recorded host let its processes use: those online, narrowed to the cpuset
    of the tree's cgroup. Only the tree is read, never the machine running this; None when
    the tree names no CPU, ValueError (naming the file) when a file is garbled."""
    online = _first_count(proc_root, sys_root, _ONLINE)
    cpuset = _first_count(proc_root, sys_root, _CPUSET)
    if online is None or cpuset is None:
        return cpuset if online is None else online
    return min(online, cpuset)


def cgroup_cpu_quota(sys_root: Path) -> float | None:
    """The CPU quota of the cgroup at `sys_root`/fs/cgroup (v2, then v1), in CPUs; a
    ValueError naming the file when it is garbled."""
    v2 = _read(sys_root / "fs/cgroup/cpu.max") or ""
    v1 = [_read(sys_root / "fs/cgroup/cpu" / f) for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us")]
    try:
        quota = parse_cgroup_cpu_quota(v2)
        if quota is None and v1[0] and v1[1] and not v1[0].strip().startswith("-"):  # -1: none
            quota = parse_cgroup_cpu_quota(f"{v1[0].strip()} {v1[1].strip()}")
    except (ValueError, ZeroDivisionError):
        raise ValueError(
            "/sys/fs/cgroup/cpu.max or /sys/fs/cgroup/cpu/cpu.cfs_quota_us could not be parsed"
        ) from None
    return quota


def usable_cpus(proc_root: Path, sys_root: Path) -> int | None:
    """CPUs pgbench and PostgreSQL can use, capped by the cgroup's CPU quota: on the live
    /proc, this process's affinity mask; under any other root, what the tree recorded."""
    if proc_root == LIVE_PROC:
        cpus: int | None = len(os.sched_getaffinity(0))
    else:
        cpus = recorded_cpus(proc_root, sys_root)
    quota = cgroup_cpu_quota(sys_root)
    if cpus is None or quota is None:
        return cpus
    return max(1, min(cpus, int(quota)))


def usable_memory(proc_root: Path, sys_root: Path) -> tuple[int, int]:
    """(MemTotal, the smaller of it and the cgroup memory limit), in bytes; 0 when unknown."""
    total = parse_meminfo(_read(proc_root / "meminfo") or "").get("MemTotal", 0)
    limits = [
        parse_cgroup_memory_limit(_read(sys_root / "fs/cgroup" / name) or "")
        for name in ("memory.max", "memory/memory.limit_in_bytes")
    ]
    return total, min([total, *(limit for limit in limits if limit)]) if total else 0


def parse_os_release(text: str) -> str:
    """
    >>> parse_os_release('NAME="Debian GNU/Linux"\\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"')
    'Debian GNU/Linux 12 (bookworm)'
    >>> parse_os_release("ID=alpine\\nNAME='Alpine Linux'\\n")
    'Alpine Linux'
    """
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    return fields.get("PRETTY_NAME") or fields.get("NAME") or ""


def _first_text(paths: Sequence[Path]) -> str:
    for path in paths:
        text = (_read(path) or "").strip()
        if text:
            return text
    return ""


def virtualization(sys_root: Path, cpuinfo: str) -> str:
    """The hypervisor the DMI tables name, else "unknown-hypervisor" when the CPU says it runs
    under one, else "" (bare metal, or nothing to tell by)."""
    vendor = _read(sys_root / "class/dmi/id/sys_vendor")
    product = _read(sys_root / "class/dmi/id/product_name") or ""
    found = hypervisor_from_dmi(vendor, product) if vendor is not None else None
    if found:
        return found
    flags = parse_cpu_flags(cpuinfo) or set()
    return "unknown-hypervisor" if "hypervisor" in flags else ""


def read_host(proc_root: Path, sys_root: Path) -> HostFacts:
    total, usable = usable_memory(proc_root, sys_root)
    etc = proc_root.parent / "etc"
    cpuinfo = _read(proc_root / "cpuinfo") or ""
    return HostFacts(
        kernel=(_read(proc_root / "sys/kernel/osrelease") or "unknown").strip(),
        cpu_model=parse_cpu_model(cpuinfo),
        cpu_count=usable_cpus(proc_root, sys_root) or 0,
        memory_bytes=usable,
        memory_total_bytes=total,
        hostname=(_read(proc_root / "sys/kernel/hostname") or "").strip(),
        machine_id=_first_text([etc / "machine-id", proc_root.parent / "var/lib/dbus/machine-id"]),
        os_release=parse_os_release(
            _first_text([etc / "os-release", proc_root.parent / "usr/lib/os-release"])
        ),
        virtualization=virtualization(sys_root, cpuinfo),
    )


def free_disk_bytes(path: Path) -> int:
    """Free space for unprivileged writes on the filesystem holding `path`."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free
