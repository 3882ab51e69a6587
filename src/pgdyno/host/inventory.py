"""The `host` section of a doctor snapshot (docs/doctor-snapshot.md); host/device_inventory.py
reads the `devices` section.

Each fact comes from one file under /proc or /sys, read under injectable roots so tests run on
recorded hosts (tests/data/hosts/); the parsers (host/parsers.py) are pure functions of file
text. A fact that cannot be read is None, and `unread` gets one sentence naming the file and
why ("host.swappiness": "/proc/sys/vm/swappiness is not readable without root."): a missing or
garbled file never raises.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgdyno.errors import ParseError
from pgdyno.host.devices import parse_mountinfo
from pgdyno.host.devices import parse_scheduler as parse_bracketed
from pgdyno.host.facts import (
    LIVE_PROC,
    parse_cgroup_memory_limit,
    parse_cpu_model,
    parse_meminfo,
    usable_cpus,
    usable_memory,
    virtualization,
)
from pgdyno.host.parsers import (
    detect_container,
    parse_cpu_flags,
    parse_cpu_list,
    parse_swaps,
)

__all__ = [
    "HOST_FIELDS", "PREEMPT_MODELS", "parse_preempt_debugfs", "preempt_from_version",
    "read_inventory",
]  # fmt: skip

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


class _Reader:
    """Reads host files by their real name ("/proc/sys/vm/swappiness") under the given roots,
    noting in `unread` every field it could not fill."""

    def __init__(self, proc_root: Path, sys_root: Path) -> None:
        self.proc_root, self.sys_root = proc_root, sys_root
        self.unread: dict[str, str] = {}

    def path(self, shown: str) -> Path:
        top, _, rest = shown.lstrip("/").partition("/")
        return (self.proc_root if top == "proc" else self.sys_root) / rest

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


def read_inventory(proc_root: Path, sys_root: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The `host` section of a doctor snapshot, and `unread`: dotted field name
    ("host.sched_migration_cost_ns") -> one sentence saying why it could not be read.

    Every field of HOST_FIELDS is present, None when unread. With a root other than the live
    /proc, every field comes from the recorded tree, `cpu_count` too (its online CPUs, cpuset
    and CPU quota), never from the machine running this.
    """
    r = _Reader(proc_root, sys_root)
    host: dict[str, Any] = {
        "hostname": r.value("hostname", "/proc/sys/kernel/hostname", _stripped),
        "kernel_release": r.value("kernel_release", "/proc/sys/kernel/osrelease", _stripped),
        "arch": os.uname().machine
        if proc_root == LIVE_PROC
        else r.value("arch", "/proc/sys/kernel/arch", _stripped),
    }
    cpuinfo = r.value("cpu_model", "/proc/cpuinfo", str)
    if cpuinfo is not None:
        host["cpu_model"] = parse_cpu_model(cpuinfo)
        if host["cpu_model"] == "unknown":
            host["cpu_model"] = None
            r.miss("cpu_model", "/proc/cpuinfo names no CPU model")
    _memory(r, host)
    host["cpu_count"] = _cpu_count(r)
    host["cpu_count_host"] = r.value("cpu_count_host", f"{_CPU}/online", parse_cpu_list)
    if r.path("/sys/devices/system/node").exists():
        host["numa_nodes"] = r.value(
            "numa_nodes", "/sys/devices/system/node/online", parse_cpu_list
        )
    else:  # a kernel built without NUMA support has no node directory: one node
        host["numa_nodes"] = 1
    host["virtualization"] = _virtualization(r, cpuinfo)
    cgroup, mountinfo = r.optional("/proc/1/cgroup"), r.optional("/proc/self/mountinfo")
    try:
        mounts = parse_mountinfo(mountinfo) if mountinfo is not None else None
    except ParseError:
        mounts = None
    if cgroup is None and mounts is None:
        r.miss("container", "neither /proc/1/cgroup nor /proc/self/mountinfo could be read")
    else:
        host["container"] = detect_container(cgroup or "", mounts or [])
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


def _memory(r: _Reader, host: dict[str, Any]) -> None:
    """Fields from /proc/meminfo and the cgroup limits; usable RAM as read_host has it."""
    try:
        meminfo, problem = parse_meminfo(r.text("/proc/meminfo")), ""
    except _Unreadable as why:
        meminfo, problem = {}, str(why)
    except ValueError as error:
        meminfo, problem = {}, f"/proc/meminfo could not be parsed ({error})"
    for name, key in (*_MEMINFO.items(), ("memory_total_bytes", "MemTotal")):
        host[name] = meminfo.get(key)
        if host[name] is None:
            later = " (it came in kernel 3.14)" if key == "MemAvailable" else ""
            r.miss(name, problem or f"/proc/meminfo has no {key} line{later}")
    if host["swap_total_bytes"] is not None and "SwapFree" in meminfo:
        host["swap_used_bytes"] = host["swap_total_bytes"] - meminfo["SwapFree"]
    else:
        r.miss("swap_used_bytes", problem or "/proc/meminfo has no SwapTotal or SwapFree line")
    limits = [  # the files read_host reads; 0 stands for "no limit" ("max")
        r.value("memory_limit_bytes", path, lambda text: parse_cgroup_memory_limit(text) or 0)
        for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
        if r.path(path).exists()
    ]
    host["memory_limit_bytes"] = min((limit for limit in limits if limit), default=None)
    try:
        _total, usable = usable_memory(r.proc_root, r.sys_root)
    except ValueError as error:
        r.miss("memory_bytes", f"/proc/meminfo or a cgroup limit could not be parsed ({error})")
        return
    if host["memory_total_bytes"] is not None:
        host["memory_bytes"] = usable
    else:
        r.miss("memory_bytes", problem or "/proc/meminfo has no MemTotal line")


def _cpu_count(r: _Reader) -> int | None:
    """Usable CPUs as `read_host` counts them: the live affinity mask, or the recorded tree's
    own CPU files (never this machine's), capped by the cgroup quota."""
    try:
        count = usable_cpus(r.proc_root, r.sys_root)
    except ValueError as error:  # the message names the garbled file
        r.miss("cpu_count", str(error))
        return None
    if count is None:
        r.miss("cpu_count", "none of /sys/devices/system/cpu/online, /proc/stat and "
               "/proc/cpuinfo could be read")  # fmt: skip
    return count


def _virtualization(r: _Reader, cpuinfo: str | None) -> str | None:
    """The run records' rule (host/facts.py), noting when nothing could tell."""
    found = virtualization(r.sys_root, cpuinfo or "")
    if found:
        return found
    no_flags = cpuinfo is None or parse_cpu_flags(cpuinfo) is None
    if no_flags and r.optional("/sys/class/dmi/id/sys_vendor") is None:
        r.miss("virtualization", "no DMI vendor in /sys/class/dmi/id and no CPU flags in "
               "/proc/cpuinfo: a virtual machine cannot be told from bare metal")  # fmt: skip
    return None


def _migration_cost(r: _Reader) -> tuple[int | None, str | None]:
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
    try:
        debugfs_mounted = any(r.path("/sys/kernel/debug").iterdir())
    except OSError:
        debugfs_mounted = False
    if not why.absent:
        reason = str(why)
    elif debugfs_mounted:
        reason = "debugfs has no sched/migration_cost_ns (a kernel without scheduler debugging)"
    else:
        reason = "debugfs is not mounted (as root: mount -t debugfs none /sys/kernel/debug)"
    r.miss("sched_migration_cost_ns", "not in /proc/sys/kernel (since 5.13 it is in debugfs), "
           f"and {reason}")  # fmt: skip
    return None, None


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


def _preempt_model(r: _Reader) -> tuple[str | None, str | None]:
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


def _debugfs_reason(r: _Reader, why: _Unreadable, lacking: str) -> str:
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


def _cpufreq(r: _Reader) -> tuple[str | None, str | None, dict[str, int]]:
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
