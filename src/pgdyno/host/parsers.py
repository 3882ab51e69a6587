"""Pure parsers of the host files the doctor's inventory reads: CPU and node lists, swap
areas, CPU flags, and the signs of a hypervisor or a container runtime.
"""

from __future__ import annotations

import re
from typing import Any

from pgdyno.host.devices import Mount, mount_for, unescape

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
    >>> from pgdyno.host.devices import parse_mountinfo
    >>> detect_container("0::/\\n", parse_mountinfo("1 0 0:52 / / rw - overlay overlay rw"))
    'container'
    """
    clues = [cgroup] + [mount.root for mount in mounts if mount.mount_point in _RUNTIME_FILES]
    for mark, runtime in _CONTAINER_MARKS:
        if any(mark in clue for clue in clues):
            return runtime
    root = mount_for("/", mounts)
    return "container" if root is not None and root.fstype == "overlay" else None
