"""The machine: who it is (hostname, machine id, OS, kernel, virtualisation, container), its CPUs
and memory (honouring cgroup limits), and the kernel settings a benchmark depends on (huge pages,
swap, dirty-page writeback, NUMA, scheduler, preemption, CPU frequency).

One reader serves both users of these facts. `HostReader` reads every file by its real name
("/proc/sys/vm/swappiness") under injectable /proc and /sys roots, and notes in `unread` one
sentence for each fact it could not fill ("host.swappiness": "/proc/sys/vm/swappiness is not
readable without root."): a missing or garbled file never raises. The reading functions below
(`_cpu_count`, `_memory`, `_virtualization`...) take that reader, and two views are built from
them:

- `read_inventory`: the `host` section of a doctor snapshot (docs/doctor-snapshot.md), every
  field of HOST_FIELDS, None with its reason when unread;
- `read_host`: the HostFacts recorded with every run, the same facts with the reasons dropped
  and the unknowns a run records ("unknown", 0, "").

So a run and the doctor can never disagree on how many CPUs or how much memory a host has.

Under a root other than the live /proc nothing is read from the machine running this: a recorded
host's CPUs come from its own files (tests/data/hosts/, a remote host's copy). /etc, /usr and
/var are read beside the /proc root (`/proc` -> `/etc`, `tree/proc` -> `tree/etc`). The parsers
are pure functions of file text; the disks and mounts are in host/disks.py.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pgdyno.errors import ParseError
from pgdyno.host.disks import LIVE_PROC, Mount, mount_for, parse_mountinfo, unescape
from pgdyno.host.disks import parse_scheduler as parse_bracketed


@dataclass(frozen=True)
class HostFacts:
    kernel: str
    cpu_model: str
    cpu_count: int  # usable CPUs: affinity (or a recorded tree's CPUs) and cgroup quota applied;
    # 0 when unknown (a recorded tree names no CPU, or a CPU file is garbled)
    memory_bytes: int  # usable RAM: the smaller of MemTotal and the cgroup limit; 0 when unknown
    memory_total_bytes: int  # MemTotal, what the host has; 0 when unknown
    # Who the host is, to group runs by host and tell hosts apart (issue 22); "" when unknown.
    hostname: str = ""  # of the UTS namespace pgdyno (or its remote sampler) ran in
    machine_id: str = ""  # /etc/machine-id: stable across reboots and renames
    os_release: str = ""  # PRETTY_NAME of /etc/os-release
    virtualization: str = ""  # hypervisor, "unknown-hypervisor", or "" on bare metal

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


HOST_FIELDS = (
    "hostname", "kernel_release", "arch", "cpu_model", "cpu_count", "cpu_count_host",
    "memory_total_bytes", "memory_limit_bytes", "memory_bytes", "memory_available_bytes",
    "numa_nodes", "virtualization", "container", "thp_enabled", "thp_defrag",
    "hugepage_size_bytes", "nr_hugepages", "hugepages_free", "swap_total_bytes",
    "swap_used_bytes", "swap_devices", "swappiness", "dirty_ratio", "dirty_background_ratio",
    "dirty_bytes", "dirty_background_bytes", "dirty_expire_centisecs",
    "dirty_writeback_centisecs", "zone_reclaim_mode", "numa_balancing", "overcommit_memory",
    "overcommit_ratio", "sched_migration_cost_ns", "sched_migration_cost_path",
    "sched_autogroup_enabled", "preempt_model", "preempt_model_source", "cpufreq_driver",
    "cpu_governor", "cpu_governors",
)  # fmt: skip

# Integer sysctls, by field; and why a file may be missing beyond "not on this kernel".
_SYSCTLS = {name: f"/proc/sys/vm/{name}" for name in (
    "nr_hugepages", "swappiness", "dirty_ratio", "dirty_background_ratio", "dirty_bytes",
    "dirty_background_bytes", "dirty_expire_centisecs", "dirty_writeback_centisecs",
    "zone_reclaim_mode", "overcommit_memory", "overcommit_ratio",
)} | {
    "numa_balancing": "/proc/sys/kernel/numa_balancing",
    "sched_autogroup_enabled": "/proc/sys/kernel/sched_autogroup_enabled",
}  # fmt: skip
_ABSENT_BECAUSE = {
    "numa_balancing": "the kernel has no automatic NUMA balancing (built without, or before 3.8)",
    "sched_autogroup_enabled": "the kernel was built without autogroup scheduling",
    "thp_enabled": "the kernel was built without transparent huge pages",
    "thp_defrag": "the kernel was built without transparent huge pages",
    "arch": "older kernels do not have kernel.arch",
}
_MEMINFO = {
    "memory_available_bytes": "MemAvailable",
    "hugepage_size_bytes": "Hugepagesize",
    "hugepages_free": "HugePages_Free",
    "swap_total_bytes": "SwapTotal",
}
# Tried in order: old 3.x kernels name the sysctl without its unit; 5.13 moved it to debugfs.
_MIGRATION_COST = (
    "/proc/sys/kernel/sched_migration_cost_ns",
    "/proc/sys/kernel/sched_migration_cost",
    "/sys/kernel/debug/sched/migration_cost_ns",
)
# The kernel's preemption model: debugfs names the active one (root only); the version string
# (`uname -v`) says how the kernel was built.
_PREEMPT_DEBUGFS = "/sys/kernel/debug/sched/preempt"
_UTS_VERSION = "/proc/sys/kernel/version"
PREEMPT_MODELS = ("none", "voluntary", "full", "lazy", "rt")
_CPU = "/sys/devices/system/cpu"
_NO_CPUFREQ = f"no cpufreq in {_CPU}/cpu0 (usual in virtual machines)"
_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
_CONTAINER_MARKS = (
    ("kubepods", "kubernetes"), ("/kubelet/pods/", "kubernetes"), ("libpod", "podman"),
    ("/containers/storage/", "podman"), ("docker", "docker"), ("lxc", "lxc"),
)  # fmt: skip
# DMI vendor or product -> hypervisor; first match wins (EC2's Nitro is KVM: name the cloud).
_DMI_MARKS = (
    ("Amazon EC2", "amazon"), ("Google", "google"), ("VMware", "vmware"), ("Xen", "xen"),
    ("QEMU", "kvm"), ("KVM", "kvm"),
)  # fmt: skip
_RUNTIME_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")

# Pure parsers of the files read below.


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


def parse_cpu_list(text: str) -> int:
    """How many CPUs (or NUMA nodes) a kernel list names, as in /sys/devices/system/cpu/online.

    >>> parse_cpu_list("0-3,6\\n"), parse_cpu_list("0")
    (5, 1)
    """
    count = 0
    for part in text.strip().split(","):
        first, dash, last = part.partition("-")
        span = int(last if dash else first) - int(first) + 1
        if span < 1:
            raise ValueError(f"{part!r} is not a range")
        count += span
    return count


def count_stat_cpus(stat: str) -> int:
    """How many CPUs /proc/stat has a line for (one per online CPU, after the total).

    >>> count_stat_cpus("cpu  9 0 4 80\\ncpu0 5 0 2 40\\ncpu1 4 0 2 40\\nintr 42\\n")
    2
    """
    count = sum(1 for line in stat.splitlines() if re.match(r"cpu[0-9]+ ", line))
    if not count:
        raise ValueError("no cpuN line")
    return count


_PROCESSOR = re.compile(r"processor( [0-9]+)?$")  # "processor 0" on s390x


def count_processors(cpuinfo: str) -> int:
    """How many CPUs /proc/cpuinfo describes (one entry per online CPU).

    >>> count_processors("processor\\t: 0\\nmodel name\\t: EPYC\\n\\nprocessor\\t: 1\\n")
    2
    """
    keys = (line.partition(":")[0].strip() for line in cpuinfo.splitlines())
    count = sum(1 for key in keys if _PROCESSOR.match(key))
    if not count:
        raise ValueError("no processor entry")
    return count


def parse_swaps(text: str) -> list[dict[str, Any]]:
    r"""/proc/swaps -> one entry per swap area; the file gives KiB, the entries bytes.

    >>> [swap] = parse_swaps("Filename  Type  Size  Used  Priority\n/sw\\040ap  file  1024  4  -2")
    >>> swap["name"], swap["size_bytes"], swap["used_bytes"], swap["priority"]
    ('/sw ap', 1048576, 4096, -2)
    """
    devices: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("Filename"):
            continue
        name, kind, size, used, priority = line.rsplit(None, 4)
        devices.append({
            "name": unescape(name),
            "type": kind, "size_bytes": int(size) * 1024, "used_bytes": int(used) * 1024,
            "priority": int(priority),
        })  # fmt: skip
    return devices


def parse_cpu_flags(cpuinfo: str) -> set[str] | None:
    """The CPU flags of /proc/cpuinfo; None without a `flags` line (only x86 has one).

    >>> sorted(parse_cpu_flags("flags\\t\\t: fpu hypervisor\\n")), parse_cpu_flags("Features: fp")
    (['fpu', 'hypervisor'], None)
    """
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return None


def hypervisor_from_dmi(sys_vendor: str, product_name: str) -> str | None:
    """The hypervisor a DMI system vendor and product name show; None for real hardware.

    >>> hypervisor_from_dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)"), hypervisor_from_dmi(
    ...     "Microsoft Corporation", "Surface Laptop 5")
    ('kvm', None)
    """
    vendor, product = sys_vendor.strip(), product_name.strip()
    if vendor == "Microsoft Corporation":  # Surface laptops too: only "Virtual Machine" is one
        return "microsoft" if product == "Virtual Machine" else None
    return next((name for mark, name in _DMI_MARKS if mark in vendor or mark in product), None)


def detect_container(cgroup: str, mounts: list[Mount]) -> str | None:
    """The runtime named in the cgroup of PID 1 (cgroup v1, or v2 in the host's namespace), or
    in where /etc/hostname, /etc/hosts and /etc/resolv.conf are bind-mounted from (Docker, Podman
    and the kubelet keep them in their own directories); "container" when the only sign is an
    overlay root filesystem. An LXC container on cgroup v2 shows none of these: None.

    >>> detect_container("0::/system.slice/docker-3f2a.scope\\n", [])
    'docker'
    >>> from pgdyno.host.disks import parse_mountinfo
    >>> detect_container("0::/\\n", parse_mountinfo("1 0 0:52 / / rw - overlay overlay rw"))
    'container'
    """
    clues = [cgroup] + [mount.root for mount in mounts if mount.mount_point in _RUNTIME_FILES]
    for mark, runtime in _CONTAINER_MARKS:
        if any(mark in clue for clue in clues):
            return runtime
    root = mount_for("/", mounts)
    return "container" if root is not None and root.fstype == "overlay" else None


def parse_preempt_debugfs(text: str) -> str | None:
    """The active model of /sys/kernel/debug/sched/preempt: the word in parentheses.

    >>> parse_preempt_debugfs("none voluntary (full) lazy \\n"), parse_preempt_debugfs("full\\n")
    ('full', None)
    """
    match = re.search(r"\((\w+)\)", text)
    return match.group(1) if match and match.group(1) in PREEMPT_MODELS else None


def preempt_from_version(text: str) -> tuple[str | None, str]:
    """What the kernel's version string (/proc/sys/kernel/version, `uname -v`) says of its
    preemption model, and when it says nothing, why. PREEMPT_RT is "rt"; PREEMPT alone a
    preemptible build, "full" (from 6.13 a build with lazy preemption also says PREEMPT);
    PREEMPT_DYNAMIC a model chosen at boot, and no word a kernel built without preemption
    (none or voluntary): neither names the model in effect.

    >>> preempt_from_version("#1 SMP PREEMPT_RT Debian 6.1.76-1 (2024-02-01)")
    ('rt', '')
    >>> preempt_from_version("#1 SMP PREEMPT Tue Mar 12 11:21:15 UTC 2024")[0]
    'full'
    >>> preempt_from_version("#35-Ubuntu SMP PREEMPT_DYNAMIC Mon Sep 16 13:16:43 UTC 2024")[0]
    >>> preempt_from_version("#1 SMP Debian 5.10.209-2 (2024-01-31)")[0]
    """
    words = text.split()
    if "PREEMPT_RT" in words:
        return "rt", ""
    if "PREEMPT_DYNAMIC" in words:
        return None, f"{_UTS_VERSION} says PREEMPT_DYNAMIC: the model is chosen at boot"
    if "PREEMPT" in words:
        return "full", ""
    return None, (f"{_UTS_VERSION} names no preemption: built with none or voluntary, it "
                  "does not say which")  # fmt: skip


# Where a recorded tree says how many CPUs were online, tried in order: the kernel's list, a
# cpuN line of /proc/stat or a processor entry of /proc/cpuinfo for each online CPU.
_ONLINE: tuple[tuple[str, Callable[[str], int]], ...] = (
    (f"{_CPU}/online", parse_cpu_list),
    ("/proc/stat", count_stat_cpus),
    ("/proc/cpuinfo", count_processors),
)
# The cpuset of the tree's cgroup (v2, then v1); on the live machine the affinity mask has it.
_CPUSET: tuple[tuple[str, Callable[[str], int]], ...] = (
    ("/sys/fs/cgroup/cpuset.cpus.effective", parse_cpu_list),
    ("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", parse_cpu_list),
)

# The reader.


def _stripped(text: str) -> str | None:
    return text.strip() or None


class _Unreadable(Exception):
    """The sentence for `unread`; `absent` when the file does not exist."""

    def __init__(self, reason: str, absent: bool = False) -> None:
        super().__init__(reason)
        self.absent = absent


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise _Unreadable(f"{shown} is not present on this kernel", absent=True) from None
    except PermissionError:
        raise _Unreadable(f"{shown} is not readable without root") from None
    except (OSError, UnicodeDecodeError) as error:
        raise _Unreadable(f"{shown} could not be read ({error})") from None


class HostReader:
    """The one reader of the host: files by their real name ("/proc/sys/vm/swappiness") under
    the given roots (/etc, /usr and /var beside the /proc root), noting in `unread` every field
    it could not fill."""

    def __init__(self, proc_root: Path, sys_root: Path) -> None:
        self.proc_root, self.sys_root = proc_root, sys_root
        self.unread: dict[str, str] = {}

    def path(self, shown: str) -> Path:
        top, _, rest = shown.lstrip("/").partition("/")
        if top in ("proc", "sys"):
            return (self.proc_root if top == "proc" else self.sys_root) / rest
        return self.proc_root.parent / top / rest

    def text(self, shown: str) -> str:
        return _read_text(self.path(shown), shown)

    def optional(self, shown: str) -> str | None:
        try:
            return self.text(shown)
        except _Unreadable:
            return None

    def miss(self, name: str, reason: str) -> None:
        self.unread[f"host.{name}"] = reason.rstrip(".") + "."

    def value[T](self, name: str, shown: str, parse: Callable[[str], T | None]) -> T | None:
        """`parse` of the file's text; a parser's None or ValueError means the text is garbled."""
        try:
            text = self.text(shown)
        except _Unreadable as why:
            because = _ABSENT_BECAUSE.get(name) if why.absent else None
            self.miss(name, f"{why}: {because}" if because else str(why))
            return None
        try:
            value = parse(text)
        except (ValueError, ParseError):
            value = None
        if value is None:
            self.miss(name, f"{shown} could not be parsed ({text.strip()[:40]!r})")
        return value


# The two views: the doctor snapshot's `host` section, and the facts a run records.


def read_inventory(proc_root: Path, sys_root: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The `host` section of a doctor snapshot, and `unread`: dotted field name
    ("host.sched_migration_cost_ns") -> one sentence saying why it could not be read.

    Every field of HOST_FIELDS is present, None when unread. With a root other than the live
    /proc, every field comes from the recorded tree, `cpu_count` too (its online CPUs, cpuset
    and CPU quota), never from the machine running this.
    """
    r = HostReader(proc_root, sys_root)
    host: dict[str, Any] = {
        "hostname": _hostname(r),
        "kernel_release": _kernel_release(r),
        "arch": os.uname().machine
        if proc_root == LIVE_PROC
        else r.value("arch", "/proc/sys/kernel/arch", _stripped),
    }
    cpuinfo, host["cpu_model"] = _cpu_model(r)
    host.update(_memory(r))
    host["cpu_count"] = _cpu_count(r)
    host["cpu_count_host"] = r.value("cpu_count_host", f"{_CPU}/online", parse_cpu_list)
    host["numa_nodes"] = _numa_nodes(r)
    host["virtualization"] = _virtualization(r, cpuinfo)
    host["container"] = _container(r)
    for name in ("thp_enabled", "thp_defrag"):
        path = f"/sys/kernel/mm/transparent_hugepage/{name.removeprefix('thp_')}"
        host[name] = r.value(name, path, parse_bracketed)
    host["swap_devices"] = r.value("swap_devices", "/proc/swaps", parse_swaps)
    for name, path in _SYSCTLS.items():
        host[name] = r.value(name, path, int)
    host["sched_migration_cost_ns"], host["sched_migration_cost_path"] = _migration_cost(r)
    host["preempt_model"], host["preempt_model_source"] = _preempt_model(r)
    host["cpufreq_driver"], host["cpu_governor"], host["cpu_governors"] = _cpufreq(r)
    return {name: host.get(name) for name in HOST_FIELDS}, r.unread


def read_host(proc_root: Path, sys_root: Path) -> HostFacts:
    """The facts a run records, read by the functions that fill the snapshot's `host` section;
    what they could not read is recorded as unknown ("unknown", 0 or ""), the reasons being the
    snapshot's to give."""
    r = HostReader(proc_root, sys_root)
    cpuinfo, model = _cpu_model(r)
    memory = _memory(r)
    return HostFacts(
        kernel=_kernel_release(r) or "unknown",
        cpu_model=model or "unknown",
        cpu_count=_cpu_count(r) or 0,
        memory_bytes=memory["memory_bytes"] or 0,
        memory_total_bytes=memory["memory_total_bytes"] or 0,
        hostname=_hostname(r) or "",
        machine_id=_first_text(r, ("/etc/machine-id", "/var/lib/dbus/machine-id")),
        os_release=parse_os_release(_first_text(r, ("/etc/os-release", "/usr/lib/os-release"))),
        virtualization=_virtualization(r, cpuinfo) or "",
    )


# Reading functions: each fills its facts from the reader and notes why one is missing.


def _hostname(r: HostReader) -> str | None:
    """Of the UTS namespace this (or a remote sampler) runs in."""
    return r.value("hostname", "/proc/sys/kernel/hostname", _stripped)


def _kernel_release(r: HostReader) -> str | None:
    return r.value("kernel_release", "/proc/sys/kernel/osrelease", _stripped)


def _first_text(r: HostReader, paths: Sequence[str]) -> str:
    """The first of `paths` with some text, stripped; "" when none has."""
    for path in paths:
        text = (r.optional(path) or "").strip()
        if text:
            return text
    return ""


def _cpu_model(r: HostReader) -> tuple[str | None, str | None]:
    """/proc/cpuinfo's text and the CPU model it names."""
    cpuinfo = r.value("cpu_model", "/proc/cpuinfo", str)
    if cpuinfo is None:
        return None, None
    model = parse_cpu_model(cpuinfo)
    if model == "unknown":
        r.miss("cpu_model", "/proc/cpuinfo names no CPU model")
        return cpuinfo, None
    return cpuinfo, model


def _memory(r: HostReader) -> dict[str, int | None]:
    """Fields from /proc/meminfo and the cgroup limits; usable RAM (`memory_bytes`) is the
    smaller of MemTotal and the limits."""
    try:
        meminfo, problem = parse_meminfo(r.text("/proc/meminfo")), ""
    except _Unreadable as why:
        meminfo, problem = {}, str(why)
    except ValueError as error:
        meminfo, problem = {}, f"/proc/meminfo could not be parsed ({error})"
    memory: dict[str, int | None] = {"swap_used_bytes": None, "memory_bytes": None}
    for name, key in (*_MEMINFO.items(), ("memory_total_bytes", "MemTotal")):
        memory[name] = meminfo.get(key)
        if memory[name] is None:
            later = " (it came in kernel 3.14)" if key == "MemAvailable" else ""
            r.miss(name, problem or f"/proc/meminfo has no {key} line{later}")
    swap_total = memory["swap_total_bytes"]
    if swap_total is not None and "SwapFree" in meminfo:
        memory["swap_used_bytes"] = swap_total - meminfo["SwapFree"]
    else:
        r.miss("swap_used_bytes", problem or "/proc/meminfo has no SwapTotal or SwapFree line")
    limits, garbled = _memory_limits(r)
    memory["memory_limit_bytes"] = min(limits, default=None)
    total = memory["memory_total_bytes"]
    if garbled or total is None:
        r.miss("memory_bytes", garbled or problem or "/proc/meminfo has no MemTotal line")
    else:
        memory["memory_bytes"] = min([total, *limits])
    return memory


def _memory_limits(r: HostReader) -> tuple[list[int], str]:
    """The cgroup memory limits set (v2, then v1; "max" is none), and the sentence naming a
    garbled one ("" when none is): then usable RAM cannot be told. A limit file that cannot be
    read is noted and taken as no limit."""
    limits: list[int] = []
    garbled = ""
    for path in _MEMORY_LIMITS:
        if not r.path(path).exists():
            continue
        text = r.value("memory_limit_bytes", path, str)
        try:
            limit = parse_cgroup_memory_limit(text) if text is not None else None
        except ValueError:
            garbled = f"{path} could not be parsed ({(text or '').strip()[:40]!r})"
            r.miss("memory_limit_bytes", garbled)
            continue
        if limit:
            limits.append(limit)
    return limits, garbled


def _cpu_count(r: HostReader) -> int | None:
    """CPUs pgbench and PostgreSQL can use, capped by the cgroup's CPU quota: on the live
    /proc, this process's affinity mask; under any other root, what the tree recorded."""
    try:
        if r.proc_root == LIVE_PROC:
            count: int | None = len(os.sched_getaffinity(0))
        else:
            count = _recorded_cpus(r)
        quota = _cgroup_cpu_quota(r)
    except ValueError as error:  # the message names the garbled file
        r.miss("cpu_count", str(error))
        return None
    if count is None:
        r.miss("cpu_count", "none of /sys/devices/system/cpu/online, /proc/stat and "
               "/proc/cpuinfo could be read")  # fmt: skip
        return None
    return count if quota is None else max(1, min(count, int(quota)))


def _recorded_cpus(r: HostReader) -> int | None:
    """The CPUs a recorded host let its processes use: those online, narrowed to the cpuset
    of the tree's cgroup. Only the tree is read, never the machine running this; None when
    the tree names no CPU, ValueError (naming the file) when a file is garbled."""
    online = _first_count(r, _ONLINE)
    cpuset = _first_count(r, _CPUSET)
    if online is None or cpuset is None:
        return cpuset if online is None else online
    return min(online, cpuset)


def _first_count(r: HostReader, sources: Sequence[tuple[str, Callable[[str], int]]]) -> int | None:
    """The count the first readable file gives; a ValueError naming it when it is garbled."""
    for shown, parse in sources:
        text = r.optional(shown)
        if text is None:
            continue
        try:
            return parse(text)
        except ValueError:
            raise ValueError(f"{shown} could not be parsed ({text.strip()[:40]!r})") from None
    return None


def _cgroup_cpu_quota(r: HostReader) -> float | None:
    """The CPU quota of the cgroup (v2, then v1), in CPUs; a ValueError naming the file when
    it is garbled."""
    v2 = r.optional("/sys/fs/cgroup/cpu.max") or ""
    v1 = [
        r.optional(f"/sys/fs/cgroup/cpu/{name}")
        for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us")
    ]
    try:
        quota = parse_cgroup_cpu_quota(v2)
        if quota is None and v1[0] and v1[1] and not v1[0].strip().startswith("-"):  # -1: none
            quota = parse_cgroup_cpu_quota(f"{v1[0].strip()} {v1[1].strip()}")
    except (ValueError, ZeroDivisionError):
        raise ValueError(
            "/sys/fs/cgroup/cpu.max or /sys/fs/cgroup/cpu/cpu.cfs_quota_us could not be parsed"
        ) from None
    return quota


def _numa_nodes(r: HostReader) -> int | None:
    if r.path("/sys/devices/system/node").exists():
        return r.value("numa_nodes", "/sys/devices/system/node/online", parse_cpu_list)
    return 1  # a kernel built without NUMA support has no node directory: one node


def _virtualization(r: HostReader, cpuinfo: str | None) -> str | None:
    """The hypervisor the DMI tables name, else "unknown-hypervisor" when the CPU says it runs
    under one, else None (bare metal, or nothing to tell by: then noted)."""
    vendor = r.optional("/sys/class/dmi/id/sys_vendor")
    product = r.optional("/sys/class/dmi/id/product_name") or ""
    found = hypervisor_from_dmi(vendor, product) if vendor is not None else None
    if found:
        return found
    flags = parse_cpu_flags(cpuinfo or "")
    if flags is not None and "hypervisor" in flags:
        return "unknown-hypervisor"
    if flags is None and vendor is None:
        r.miss("virtualization", "no DMI vendor in /sys/class/dmi/id and no CPU flags in "
               "/proc/cpuinfo: a virtual machine cannot be told from bare metal")  # fmt: skip
    return None


def _container(r: HostReader) -> str | None:
    cgroup, mountinfo = r.optional("/proc/1/cgroup"), r.optional("/proc/self/mountinfo")
    try:
        mounts = parse_mountinfo(mountinfo) if mountinfo is not None else None
    except ParseError:
        mounts = None
    if cgroup is None and mounts is None:
        r.miss("container", "neither /proc/1/cgroup nor /proc/self/mountinfo could be read")
        return None
    return detect_container(cgroup or "", mounts or [])


def _migration_cost(r: HostReader) -> tuple[int | None, str | None]:
    why = _Unreadable("")
    for shown in _MIGRATION_COST:
        try:
            text = r.text(shown)
        except _Unreadable as error:
            why = error
            continue
        try:
            return int(text), shown
        except ValueError:
            r.miss("sched_migration_cost_ns", f"{shown} could not be parsed ({text[:40]!r})")
            return None, None
    reason = _debugfs_reason(
        r, why, "sched/migration_cost_ns (a kernel without scheduler debugging)"
    )
    r.miss("sched_migration_cost_ns", "not in /proc/sys/kernel (since 5.13 it is in debugfs), "
           f"and {reason}")  # fmt: skip
    return None, None


def _preempt_model(r: HostReader) -> tuple[str | None, str | None]:
    """The active preemption model and the file it was read from."""
    try:
        text = r.text(_PREEMPT_DEBUGFS)
    except _Unreadable as why:
        debugfs = _debugfs_reason(r, why, "sched/preempt (a kernel without PREEMPT_DYNAMIC)")
    else:
        model = parse_preempt_debugfs(text)
        if model is not None:
            return model, _PREEMPT_DEBUGFS
        debugfs = f"{_PREEMPT_DEBUGFS} could not be parsed ({text.strip()[:40]!r})"
    try:
        model, why_not = preempt_from_version(r.text(_UTS_VERSION))
    except _Unreadable as error:
        model, why_not = None, str(error)
    if model is not None:
        return model, _UTS_VERSION
    r.miss("preempt_model", f"{why_not}; and {debugfs}")
    return None, None


def _debugfs_reason(r: HostReader, why: _Unreadable, lacking: str) -> str:
    """Why a debugfs file was not read: not mounted, not on this kernel, or not permitted."""
    if not why.absent:
        return str(why)
    try:
        mounted = any(r.path("/sys/kernel/debug").iterdir())
    except OSError:
        mounted = False
    if mounted:
        return f"debugfs has no {lacking}"
    return "debugfs is not mounted (as root: mount -t debugfs none /sys/kernel/debug)"


def _cpufreq(r: HostReader) -> tuple[str | None, str | None, dict[str, int]]:
    """cpu0's scaling driver, the governor most CPUs use (the lowest CPU's on a tie), counts."""
    if not r.path(f"{_CPU}/cpu0/cpufreq").is_dir():
        r.miss("cpufreq_driver", _NO_CPUFREQ)
        r.miss("cpu_governor", _NO_CPUFREQ)
        return None, None, {}
    driver = r.value("cpufreq_driver", f"{_CPU}/cpu0/cpufreq/scaling_driver", _stripped)
    cpus = [path.name for path in r.path(_CPU).glob("cpu[0-9]*") if path.name[3:].isdigit()]
    counts = Counter(
        governor.strip()
        for cpu in sorted(cpus, key=lambda name: int(name[3:]))
        if (governor := r.optional(f"{_CPU}/{cpu}/cpufreq/scaling_governor"))
    )
    if not counts:
        r.miss("cpu_governor", f"no {_CPU}/cpu*/cpufreq/scaling_governor could be read")
    return driver, counts.most_common(1)[0][0] if counts else None, dict(counts.most_common())
