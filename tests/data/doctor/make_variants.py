"""Write the edited doctor snapshots from the one recorded on the development VM.

    python tests/data/doctor/make_variants.py

`recorded-vm.json` was written by `pgdyno doctor --sandbox --snapshot` as root on a 2-vCPU,
24 GiB Firecracker VM (kernel 6.18, PostgreSQL 18 sandbox). Every other file here is that
recording with the edits below, standing for hosts we cannot have here; each edit is the
smallest change that makes the host what its name says. Re-run after re-recording.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
GiB, MiB = 1024**3, 1024**2
Snapshot = dict[str, Any]


def setting(snap: Snapshot, name: str, value: str, source: str = "configuration file") -> None:
    row = snap["server"]["settings"][name]
    row.update(setting=value, source=source)


def healthy(snap: Snapshot) -> None:
    """What a careful DBA would leave: every warning-level finding of the VM fixed."""
    host = snap["host"]
    host.update(
        swap_total_bytes=2 * GiB, swap_used_bytes=0, swappiness=1, thp_enabled="madvise",
        thp_defrag="madvise", dirty_background_bytes=64 * MiB, dirty_bytes=512 * MiB,
        overcommit_memory=2, sched_autogroup_enabled=0,
        swap_devices=[{"name": "/swapfile", "type": "file", "size_bytes": 2 * GiB,
                       "used_bytes": 0, "priority": -2}],
    )  # fmt: skip
    quarter = host["memory_bytes"] // 4 // GiB * GiB
    setting(snap, "shared_buffers", str(quarter // 8192))
    setting(snap, "effective_cache_size", str(host["memory_bytes"] * 3 // 4 // GiB * GiB // 8192))
    setting(snap, "random_page_cost", "1.1")
    wal = snap["devices"]["wal"]
    wal.update(name="vdb", disk="vdb", major_minor="254:16", mount_point="/pgwal",
               source="/dev/vdb", path="/pgwal/pg_wal")  # fmt: skip
    snap["devices"]["wal_on_data_device"] = False
    # The recorded sandbox's checkpoints were all requested by CREATE DATABASE copies.
    snap["server"]["checkpoints"] = {"timed": 120, "requested": 3, "stats_reset": None}
    size = snap["server"]["settings"]["shared_buffers"]
    pages = int(int(size["setting"]) * 8192 * 1.05 / host["hugepage_size_bytes"])
    setting(snap, "shared_memory_size_in_huge_pages", str(pages), source="default")


def numa_two_nodes(snap: Snapshot) -> None:
    snap["host"].update(numa_nodes=2, zone_reclaim_mode=1, numa_balancing=1)


def thp_always(snap: Snapshot) -> None:
    snap["host"].update(thp_enabled="always", thp_defrag="always")


def kernel_3_2(snap: Snapshot) -> None:
    snap["host"].update(
        kernel_release="3.2.0-70-generic", sched_migration_cost_ns=500000,
        sched_migration_cost_path="/proc/sys/kernel/sched_migration_cost_ns",
    )  # fmt: skip


def ext3_data(snap: Snapshot) -> None:
    snap["devices"]["data"].update(fstype="ext3", mount_options="rw,relatime,data=ordered")


def ram_256g_dirty_ratio_20(snap: Snapshot) -> None:
    snap["host"].update(
        memory_total_bytes=256 * GiB, memory_bytes=256 * GiB, memory_available_bytes=200 * GiB,
        dirty_ratio=20, dirty_background_ratio=10, dirty_bytes=0, dirty_background_bytes=0,
    )  # fmt: skip


def container_4g_on_64g(snap: Snapshot) -> None:
    """shared_buffers sized from the host's 64 GB, as tools that ignore cgroups do."""
    snap["host"].update(
        memory_total_bytes=64 * GiB, memory_limit_bytes=4 * GiB, memory_bytes=4 * GiB,
        memory_available_bytes=3 * GiB, container="docker",
    )  # fmt: skip
    setting(snap, "shared_buffers", str(16 * GiB // 8192))


def wal_on_data_device(snap: Snapshot) -> None:
    """A bare-metal host with one spinning disk for data and WAL."""
    snap["host"].update(virtualization=None)
    for device in (snap["devices"]["data"], snap["devices"]["wal"]):
        device.update(name="sda2", disk="sda", major_minor="8:2", source="/dev/sda2",
                      rotational=True, virtual=False, nvme=False)  # fmt: skip
    snap["devices"]["wal_on_data_device"] = True
    setting(snap, "random_page_cost", "4", source="default")  # right for a spinning disk


def risky_server(snap: Snapshot) -> None:
    """A server tuned by folklore: durability off, checkpoints forced, a restart pending."""
    setting(snap, "fsync", "off")
    setting(snap, "synchronous_commit", "off")
    setting(snap, "full_page_writes", "off")
    setting(snap, "checkpoint_completion_target", "0.5")
    snap["server"]["settings"]["work_mem"]["pending_restart"] = False
    snap["server"]["settings"]["shared_buffers"]["pending_restart"] = True
    snap["server"]["checkpoints"] = {"timed": 12, "requested": 140, "stats_reset": None}


def large_buffers_no_huge_pages(snap: Snapshot) -> None:
    """64 GB of RAM, shared_buffers at a quarter of it, no huge pages reserved."""
    snap["host"].update(memory_total_bytes=64 * GiB, memory_bytes=64 * GiB,
                        memory_available_bytes=40 * GiB, nr_hugepages=0)  # fmt: skip
    setting(snap, "shared_buffers", str(16 * GiB // 8192))
    setting(snap, "shared_memory_size_in_huge_pages", "8400", source="default")


def too_few_huge_pages(snap: Snapshot) -> None:
    large_buffers_no_huge_pages(snap)
    snap["host"].update(nr_hugepages=4096, hugepages_free=4096)
    setting(snap, "huge_pages", "try", source="default")


def kernel_7_huge_pages_try(snap: Snapshot) -> None:
    """Linux 7.0 (lazy preemption), 16 GB of shared buffers in huge pages, huge_pages = try."""
    large_buffers_no_huge_pages(snap)
    snap["host"].update(kernel_release="7.0.0-14-generic", preempt_model="lazy",
                        preempt_model_source="/sys/kernel/debug/sched/preempt",
                        nr_hugepages=8400, hugepages_free=200)  # fmt: skip
    setting(snap, "huge_pages", "try", source="default")


def governor_ondemand(snap: Snapshot) -> None:
    """Bare metal with acpi-cpufreq scaling on demand."""
    snap["host"].update(virtualization=None, cpufreq_driver="acpi-cpufreq",
                        cpu_governor="ondemand", cpu_governors={"ondemand": 2})  # fmt: skip


def ram_8g_1108_huge_pages(snap: Snapshot) -> None:
    """8 GB of RAM with 1108 huge pages reserved and free: issue 31's case of huge pages."""
    snap["host"].update(
        memory_bytes=8 * GiB, memory_total_bytes=8 * GiB, memory_available_bytes=6 * GiB,
        nr_hugepages=1108, hugepages_free=1108,
    )  # fmt: skip
    setting(snap, "shared_buffers", str(2 * GiB // 8192))
    setting(snap, "effective_cache_size", str(6 * GiB // 8192))
    setting(snap, "shared_memory_size_in_huge_pages", "1108", source="default")


VARIANTS: dict[str, Callable[[Snapshot], None]] = {
    "healthy": healthy,
    "numa-two-nodes": numa_two_nodes,
    "thp-always": thp_always,
    "kernel-3.2": kernel_3_2,
    "ext3-data": ext3_data,
    "ram-256g-dirty-ratio-20": ram_256g_dirty_ratio_20,
    "container-4g-on-64g": container_4g_on_64g,
    "wal-on-data-device": wal_on_data_device,
    "risky-server": risky_server,
    "large-buffers-no-huge-pages": large_buffers_no_huge_pages,
    "too-few-huge-pages": too_few_huge_pages,
    "governor-ondemand": governor_ondemand,
    "kernel-7-huge-pages-try": kernel_7_huge_pages_try,
    "ram-8g-1108-huge-pages": ram_8g_1108_huge_pages,
}


def main() -> None:
    recorded = json.loads((HERE / "recorded-vm.json").read_text())
    for name, edit in VARIANTS.items():
        snap = copy.deepcopy(recorded)
        if name != "healthy":
            healthy(snap)  # each variant is one problem on an otherwise healthy host
        edit(snap)
        what = (edit.__doc__ or name).splitlines()[0]
        snap["target"] = f"{name} (edited from recorded-vm.json: {what})"
        (HERE / f"{name}.json").write_text(json.dumps(snap, indent=2) + "\n")


if __name__ == "__main__":
    main()
