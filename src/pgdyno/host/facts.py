"""Host facts recorded with every run: kernel, CPU, memory (honouring cgroup limits), disk.

Parsers are pure functions of file text; `read_host` reads them under injectable roots so
tests run on recorded snapshots.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class HostFacts:
    kernel: str
    cpu_model: str
    cpu_count: int  # usable CPUs: affinity and cgroup quota applied
    memory_bytes: int  # usable RAM: the smaller of MemTotal and the cgroup limit
    memory_total_bytes: int  # MemTotal, what the host has

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


def read_host(proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")) -> HostFacts:
    meminfo = parse_meminfo(_read(proc_root / "meminfo") or "")
    total = meminfo.get("MemTotal", 0)
    limits = [
        parse_cgroup_memory_limit(_read(sys_root / "fs/cgroup" / name) or "")
        for name in ("memory.max", "memory/memory.limit_in_bytes")
    ]
    usable = min([total, *(limit for limit in limits if limit)]) if total else 0
    cpus = len(os.sched_getaffinity(0)) if proc_root == Path("/proc") else os.cpu_count() or 1
    quota = parse_cgroup_cpu_quota(_read(sys_root / "fs/cgroup/cpu.max") or "")
    if quota is None:  # cgroup v1
        v1 = [
            _read(sys_root / "fs/cgroup/cpu" / f) for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        ]
        if v1[0] and v1[1] and not v1[0].strip().startswith("-"):
            quota = parse_cgroup_cpu_quota(f"{v1[0].strip()} {v1[1].strip()}")
    if quota is not None:
        cpus = max(1, min(cpus, int(quota)))
    return HostFacts(
        kernel=(_read(proc_root / "sys/kernel/osrelease") or "unknown").strip(),
        cpu_model=parse_cpu_model(_read(proc_root / "cpuinfo") or ""),
        cpu_count=cpus,
        memory_bytes=usable,
        memory_total_bytes=total,
    )


def free_disk_bytes(path: Path) -> int:
    """Free space for unprivileged writes on the filesystem holding `path`."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free
