"""The `host` and `devices` sections of a doctor snapshot, read from the host recorded on the
development VM, from edited copies of it (tests/data/hosts/README.md), and from this machine."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pgdyno.host.disks import parse_mountinfo, read_devices
from pgdyno.host.machine import (
    HOST_FIELDS,
    detect_container,
    hypervisor_from_dmi,
    parse_cpu_list,
    parse_swaps,
    read_inventory,
)
from pgdyno.terminal.doctor import headline

REPO = Path(__file__).parents[2]
HOSTS = REPO / "tests" / "data" / "hosts"
RECORDED = HOSTS / "firecracker-2cpu"
DOC = REPO / "docs" / "doctor-snapshot.md"
KiB = 1024


def edited(name: str, tmp_path: Path) -> Path:
    """The recorded host with `tests/data/hosts/<name>/` laid over it: its files replace the
    recorded ones, and the files listed in its `absent` file are removed."""
    root = tmp_path / name
    shutil.copytree(RECORDED, root, symlinks=True, copy_function=shutil.copyfile)
    if name != RECORDED.name:
        shutil.copytree(HOSTS / name, root, dirs_exist_ok=True, copy_function=shutil.copyfile,
                        ignore=shutil.ignore_patterns("absent"))  # fmt: skip
        absent = HOSTS / name / "absent"
        for line in absent.read_text().split() if absent.exists() else []:
            (root / line).unlink()
    return root


def inventory(root: Path) -> tuple[dict[str, Any], dict[str, str]]:
    return read_inventory(root / "proc", root / "sys")


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def documented_fields(section: str) -> list[str]:
    """The backticked names in the first column of a table of docs/doctor-snapshot.md."""
    text = DOC.read_text()
    start = text.index(f"## `{section}`")
    end = text.find("\n## ", start + 1)
    names: list[str] = []
    for line in text[start : end if end > 0 else None].splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])
    return names


# The recorded host


def test_recorded_vm_facts():
    host, _ = inventory(RECORDED)
    assert list(host) == list(HOST_FIELDS)
    expected = {
        "hostname": "pgdyno-test-vm",
        "kernel_release": "6.18.44-fc-v669",
        "arch": "x86_64",
        "cpu_model": "AMD EPYC",
        "cpu_count": 2,  # its own cpu/online (0-1), no cpuset narrower, no quota (-1)
        "cpu_count_host": 2,
        "memory_total_bytes": 24_684_084 * KiB,
        "memory_limit_bytes": None,  # cgroup v1, and the "limit" is the unlimited sentinel
        "memory_bytes": 24_684_084 * KiB,
        "memory_available_bytes": 24_321_944 * KiB,
        "numa_nodes": 1,
        "virtualization": "unknown-hypervisor",  # Firecracker: no DMI, cpuinfo flag only
        "container": None,
        "thp_enabled": "madvise",
        "thp_defrag": "madvise",
        "hugepage_size_bytes": 2048 * KiB,
        "nr_hugepages": 0,
        "hugepages_free": 0,
        "swap_total_bytes": 0,
        "swap_used_bytes": 0,
        "swap_devices": [],
        "swappiness": 60,
        "dirty_ratio": 20,
        "dirty_background_ratio": 10,
        "dirty_bytes": 0,
        "dirty_background_bytes": 0,
        "dirty_expire_centisecs": 3000,
        "dirty_writeback_centisecs": 500,
        "zone_reclaim_mode": 0,
        "numa_balancing": 0,
        "overcommit_memory": 0,
        "overcommit_ratio": 50,
        "sched_migration_cost_ns": None,
        "sched_migration_cost_path": None,
        "sched_autogroup_enabled": 1,
        "preempt_model": None,  # PREEMPT_DYNAMIC, and debugfs not mounted
        "preempt_model_source": None,
        "cpufreq_driver": None,
        "cpu_governor": None,
        "cpu_governors": {},
    }
    assert {name: host[name] for name in expected} == expected


def test_recorded_vm_says_why_the_scheduler_and_cpufreq_facts_are_missing():
    _, unread = inventory(RECORDED)
    assert set(unread) == {
        "host.sched_migration_cost_ns",
        "host.preempt_model",
        "host.cpufreq_driver",
        "host.cpu_governor",
    }
    assert unread["host.preempt_model"] == (
        "/proc/sys/kernel/version says PREEMPT_DYNAMIC: the model is chosen at boot; and "
        "debugfs is not mounted (as root: mount -t debugfs none /sys/kernel/debug)."
    )
    assert unread["host.sched_migration_cost_ns"] == (
        "not in /proc/sys/kernel (since 5.13 it is in debugfs), and debugfs is not mounted "
        "(as root: mount -t debugfs none /sys/kernel/debug)."
    )
    assert "usual in virtual machines" in unread["host.cpufreq_driver"]
    assert all(reason.endswith(".") for reason in unread.values())


# Edited hosts


def test_numa_host(tmp_path: Path):
    host, unread = inventory(edited("numa-2node", tmp_path))
    assert (host["numa_nodes"], host["zone_reclaim_mode"], host["numa_balancing"]) == (2, 1, 1)
    assert "host.numa_nodes" not in unread


def test_transparent_huge_pages_always(tmp_path: Path):
    host, _ = inventory(edited("thp-always", tmp_path))
    assert (host["thp_enabled"], host["thp_defrag"]) == ("always", "always")


def test_bare_metal_with_cpufreq(tmp_path: Path):
    host, unread = inventory(edited("bare-metal-governor", tmp_path))
    assert host["virtualization"] is None  # a Dell DMI vendor and no hypervisor flag
    assert host["cpu_count_host"] == 4
    assert host["cpu_count"] == 4  # its own 4 CPUs, not the 2 of the machine running the test
    assert host["cpufreq_driver"] == "acpi-cpufreq"
    assert host["cpu_governor"] == "ondemand"
    assert host["cpu_governors"] == {"ondemand": 3, "performance": 1}
    assert set(unread) == {"host.sched_migration_cost_ns", "host.preempt_model"}


def test_old_kernel(tmp_path: Path):
    host, unread = inventory(edited("kernel-3.2", tmp_path))
    assert host["kernel_release"] == "3.2.0-70-generic"
    assert host["sched_migration_cost_ns"] == 500_000
    assert host["sched_migration_cost_path"] == "/proc/sys/kernel/sched_migration_cost"
    assert host["thp_defrag"] == "always"
    for name in ("numa_balancing", "memory_available_bytes", "arch"):
        assert host[name] is None
    assert unread["host.numa_balancing"] == (
        "/proc/sys/kernel/numa_balancing is not present on this kernel: the kernel has no "
        "automatic NUMA balancing (built without, or before 3.8)."
    )
    assert "no MemAvailable line (it came in kernel 3.14)" in unread["host.memory_available_bytes"]
    assert "/proc/sys/kernel/arch is not present" in unread["host.arch"]
    assert "host.sched_migration_cost_ns" not in unread


def test_preemption_model_from_debugfs(tmp_path: Path):
    host, unread = inventory(edited("preempt-full", tmp_path))
    assert (host["preempt_model"], host["preempt_model_source"]) == (
        "full",
        "/sys/kernel/debug/sched/preempt",
    )
    assert "host.preempt_model" not in unread
    # debugfs is mounted there now, but this kernel keeps no migration cost in it
    assert unread["host.sched_migration_cost_ns"].endswith(
        "debugfs has no sched/migration_cost_ns (a kernel without scheduler debugging)."
    )


@pytest.mark.parametrize(
    ("version", "model"),
    [
        ("#1 SMP PREEMPT_RT Debian 6.1.76-1 (2024-02-01)\n", "rt"),
        ("#1 SMP PREEMPT Tue Mar 12 11:21:15 UTC 2024\n", "full"),
    ],
)
def test_preemption_model_from_the_version_string(tmp_path: Path, version: str, model: str):
    root = edited("firecracker-2cpu", tmp_path)
    write(root, {"proc/sys/kernel/version": version})
    host, unread = inventory(root)
    assert (host["preempt_model"], host["preempt_model_source"]) == (
        model,
        "/proc/sys/kernel/version",
    )
    assert "host.preempt_model" not in unread


def test_preemption_model_unknown_without_a_preempt_word(tmp_path: Path):
    root = edited("firecracker-2cpu", tmp_path)
    write(root, {"proc/sys/kernel/version": "#1 SMP Debian 5.10.209-2 (2024-01-31)\n",
                 "sys/kernel/debug/sched/preempt": "garbled\n"})  # fmt: skip
    host, unread = inventory(root)
    assert host["preempt_model"] is None and host["preempt_model_source"] is None
    assert unread["host.preempt_model"] == (
        "/proc/sys/kernel/version names no preemption: built with none or voluntary, it does "
        "not say which; and /sys/kernel/debug/sched/preempt could not be parsed ('garbled')."
    )


def test_debugfs_wins_over_the_version_string(tmp_path: Path):
    root = edited("preempt-full", tmp_path)
    write(root, {"proc/sys/kernel/version": "#1 SMP PREEMPT_RT x\n",
                 "sys/kernel/debug/sched/preempt": "full (lazy) \n"})  # fmt: skip
    assert inventory(root)[0]["preempt_model"] == "lazy"


def test_container_limits_and_runtime(tmp_path: Path):
    host, _ = inventory(edited("container-4g", tmp_path))
    assert host["container"] == "docker"  # from the bind mounts of /etc/hostname and co.
    assert host["memory_limit_bytes"] == host["memory_bytes"] == 4 * 1024**3
    assert host["memory_total_bytes"] == 24_684_084 * KiB
    assert host["cpu_count"] == 1  # a 1.5 CPU quota


# The CPUs of a recorded host come from its own files, never from the machine reading them.


def test_a_cpuset_narrows_the_recorded_cpus(tmp_path: Path):
    """The VM in a v1 cpuset of CPU 1 only (recorded, as `docker run --cpuset-cpus=1` shows it)."""
    host, unread = inventory(edited("cpuset-1cpu", tmp_path))
    assert (host["cpu_count"], host["cpu_count_host"]) == (1, 2)
    assert "host.cpu_count" not in unread


def test_the_cgroup_quota_caps_the_recorded_cpus(tmp_path: Path):
    root = edited("bare-metal-governor", tmp_path)
    write(root, {"sys/fs/cgroup/cpu.max": "300000 100000\n"})  # 3 CPUs of time a period
    assert inventory(root)[0]["cpu_count"] == 3
    write(root, {"sys/fs/cgroup/cpu.max": "lots 100000\n"})
    host, unread = inventory(root)
    assert host["cpu_count"] is None
    assert unread["host.cpu_count"] == (
        "/sys/fs/cgroup/cpu.max or /sys/fs/cgroup/cpu/cpu.cfs_quota_us could not be parsed."
    )


@pytest.mark.parametrize(
    ("absent", "count"),
    [
        ([], 4),  # cpu/online: 0-3
        # The base recording's /proc/stat (cpu0, cpu1) comes before the edited cpuinfo's 4.
        (["sys/devices/system/cpu/online"], 2),
        (["sys/devices/system/cpu/online", "proc/stat"], 4),  # four processor entries
    ],
)
def test_online_cpus_from_the_first_file_the_tree_has(tmp_path: Path, absent, count):
    root = edited("bare-metal-governor", tmp_path)
    for name in absent:
        (root / name).unlink()
    host, unread = inventory(root)
    assert host["cpu_count"] == count
    assert "host.cpu_count" not in unread


def test_a_tree_without_cpu_files_has_no_cpu_count(tmp_path: Path):
    root = edited(RECORDED.name, tmp_path)
    for name in ("sys/devices/system/cpu/online", "proc/stat", "proc/cpuinfo"):
        (root / name).unlink()
    host, unread = inventory(root)
    assert host["cpu_count"] is None
    assert unread["host.cpu_count"] == (
        "none of /sys/devices/system/cpu/online, /proc/stat and /proc/cpuinfo could be read."
    )
    # The doctor's headline says it does not know, rather than "None CPUs".
    line = headline({"target": "recorded", "host": host})
    assert "? CPUs" in line and "None" not in line


@pytest.mark.parametrize(
    ("files", "path"),
    [
        ({"proc/sys/kernel/sched_migration_cost_ns": "500000\n"}, "/proc/sys/kernel/"),
        ({"sys/kernel/debug/sched/migration_cost_ns": "500000\n"}, "/sys/kernel/debug/sched/"),
    ],
)
def test_migration_cost_is_read_where_the_kernel_keeps_it(tmp_path: Path, files, path):
    root = edited(RECORDED.name, tmp_path)
    write(root, files)
    host, unread = inventory(root)
    assert host["sched_migration_cost_ns"] == 500_000
    assert host["sched_migration_cost_path"] == path + Path(next(iter(files))).name
    assert "host.sched_migration_cost_ns" not in unread


def test_migration_cost_with_debugfs_mounted_but_no_scheduler_entries(tmp_path: Path):
    root = edited(RECORDED.name, tmp_path)
    write(root, {"sys/kernel/debug/tracing/README": "tracing\n"})
    _, unread = inventory(root)
    assert "debugfs has no sched/migration_cost_ns" in unread["host.sched_migration_cost_ns"]


def test_garbled_files_give_none_and_a_reason(tmp_path: Path):
    root = edited(RECORDED.name, tmp_path)
    write(root, {
        "proc/sys/vm/swappiness": "sixty\n",
        "sys/devices/system/cpu/online": "0-\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "always madvise never\n",
        "proc/swaps": "Filename\tType\n/dev/sda2\tpartition\n",
        "proc/meminfo": "MemTotal:  lots kB\n",
        "proc/sys/kernel/hostname": b"\xff\xfe\n",
        "proc/self/mountinfo": "not a mount line\n",
    })  # fmt: skip
    host, unread = inventory(root)
    for name in ("swappiness", "cpu_count_host", "thp_enabled", "swap_devices"):
        assert host[name] is None
        assert "could not be parsed" in unread[f"host.{name}"]
    assert unread["host.swappiness"] == "/proc/sys/vm/swappiness could not be parsed ('sixty')."
    for name in ("memory_total_bytes", "memory_bytes", "swap_total_bytes"):
        assert host[name] is None
        assert "/proc/meminfo" in unread[f"host.{name}"]
    assert host["cpu_count"] is None  # the garbled CPU list, not another file
    assert unread["host.cpu_count"] == "/sys/devices/system/cpu/online could not be parsed ('0-')."
    assert host["hostname"] is None
    assert "could not be read" in unread["host.hostname"]
    assert host["container"] is None  # the cgroup of PID 1 is still there, and says nothing
    devices, why = read_devices(Path("/var/lib/postgresql"), None, root / "proc", root / "sys")
    assert devices["data"] is None
    assert "is not a mount line" in why["devices.data"]


def test_an_empty_root_gives_reasons_not_errors(tmp_path: Path):
    host, unread = read_inventory(tmp_path / "proc", tmp_path / "sys")
    assert host["numa_nodes"] == 1  # no node directory: a kernel without NUMA support
    assert host["cpu_governors"] == {}
    for key, reason in unread.items():
        assert host[key.removeprefix("host.")] is None
        assert reason.endswith(".")
    assert unread["host.swappiness"] == "/proc/sys/vm/swappiness is not present on this kernel."
    assert len(unread) > 30


# Pure parsers


@pytest.mark.parametrize(
    ("text", "count"), [("0\n", 1), ("0-1\n", 2), ("0-3,6", 5), ("0,2,4-7", 6), ("0-255", 256)]
)
def test_cpu_list(text: str, count: int):
    assert parse_cpu_list(text) == count


@pytest.mark.parametrize("text", ["", "\n", "0-", "3-1", "a-b", "0,,1"])
def test_cpu_list_garbage(text: str):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_swaps():
    text = (
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/nvme0n1p3                          partition\t16777212\t262144\t\t-2\n"
        "/swap\\040file                           file\t\t2097148\t\t0\t\t-3\n"
    )
    assert parse_swaps(text) == [
        {"name": "/dev/nvme0n1p3", "type": "partition", "size_bytes": 16_777_212 * KiB,
         "used_bytes": 256 * 1024**2, "priority": -2},
        {"name": "/swap file", "type": "file", "size_bytes": 2_097_148 * KiB, "used_bytes": 0,
         "priority": -3},
    ]  # fmt: skip
    assert parse_swaps("Filename\tType\tSize\tUsed\tPriority\n") == []


@pytest.mark.parametrize(
    ("cgroup", "runtime"),
    [
        ("12:memory:/docker/3f2a9c1e\n0::/docker/3f2a9c1e\n", "docker"),
        ("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-3f2a.scope\n", "kubernetes"),
        ("11:pids:/kubepods/besteffort/pod1a2b/3f2a9c1e\n", "kubernetes"),
        ("0::/machine.slice/libpod-3f2a9c1e.scope/container\n", "podman"),
        ("0::/lxc.payload.pg1\n", "lxc"),
        ("0::/init.scope\n", None),
        ("0::/\n", None),
    ],
)
def test_container_from_the_cgroup_of_pid_1(cgroup: str, runtime: str | None):
    assert detect_container(cgroup, []) == runtime


def test_container_from_the_runtime_files_and_the_root_filesystem():
    pod = parse_mountinfo(
        "1 0 0:52 / / rw - overlay overlay rw\n"
        "2 1 254:0 /var/lib/kubelet/pods/1a2b/etc-hosts /etc/hosts rw - ext4 /dev/vda rw\n"
        "3 1 254:0 /var/lib/docker/containers/3f2a/hostname /etc/hostname rw - ext4 /dev/vda rw\n"
    )
    assert detect_container("0::/\n", pod) == "kubernetes"
    assert detect_container("0::/\n", pod[:1]) == "container"
    assert (
        detect_container("0::/\n", parse_mountinfo((RECORDED / "proc/self/mountinfo").read_text()))
        is None
    )


@pytest.mark.parametrize(
    ("vendor", "product", "hypervisor"),
    [
        ("QEMU", "Standard PC (i440FX + PIIX, 1996)", "kvm"),
        ("Red Hat", "KVM", "kvm"),
        ("VMware, Inc.", "VMware Virtual Platform", "vmware"),
        ("Xen", "HVM domU", "xen"),
        ("Microsoft Corporation", "Virtual Machine", "microsoft"),
        ("Microsoft Corporation", "Surface Pro 9", None),
        ("Amazon EC2", "m6i.large", "amazon"),
        ("Google", "Google Compute Engine", "google"),
        ("Dell Inc.", "PowerEdge R6525", None),
    ],
)
def test_hypervisor_from_dmi(vendor: str, product: str, hypervisor: str | None):
    assert hypervisor_from_dmi(vendor + "\n", product + "\n") == hypervisor


# Devices


def test_devices_on_the_recorded_vm():
    devices, unread = read_devices(
        Path("/var/lib/postgresql/18/main"),
        Path("/var/lib/postgresql/18/main/pg_wal"),
        RECORDED / "proc",
        RECORDED / "sys",
    )
    # The free space is read on the machine itself only: a recorded path is another machine's.
    assert unread == {
        f"devices.{role}.free_bytes": f"the free space at {path} is read on the machine itself "
        "(statvfs), not from a recorded /proc."
        for role, path in (("data", "/var/lib/postgresql/18/main"),
                           ("wal", "/var/lib/postgresql/18/main/pg_wal"))
    }  # fmt: skip
    assert devices["data"] == {
        "path": "/var/lib/postgresql/18/main",
        "name": "vda",
        "disk": "vda",
        "major_minor": "254:0",
        "mount_point": "/",
        "source": "/dev/vda",
        "fstype": "ext4",
        "mount_options": "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534",
        "rotational": True,
        "nvme": False,
        "virtual": True,  # a virtio disk: its rotational flag says nothing
        "scheduler": "mq-deadline",
        "schedulers": ["none", "mq-deadline", "kyber", "bfq"],
        "read_ahead_kb": 8192,
        "free_bytes": None,
    }
    assert devices["wal"]["path"] == "/var/lib/postgresql/18/main/pg_wal"
    assert devices["wal_on_data_device"] is True


def test_devices_in_a_container(tmp_path: Path):
    root = edited("container-4g", tmp_path)
    devices, _ = read_devices(
        Path("/var/lib/postgresql/data"), Path("/wal"), root / "proc", root / "sys"
    )
    assert devices["data"]["name"] == "vda"  # a volume bind-mounted from the host's disk
    assert devices["data"]["mount_point"] == "/var/lib/postgresql/data"
    wal = devices["wal"]
    assert (wal["name"], wal["disk"], wal["fstype"]) == ("overlay", None, "overlay")
    assert (wal["nvme"], wal["virtual"], wal["rotational"]) == (False, False, None)
    assert devices["wal_on_data_device"] is False


def test_devices_on_nvme_and_sata():
    proc, sys = REPO / "tests/data/proc/edited-nvme-sdb", REPO / "tests/data/sys/edited-nvme-sdb"
    devices, unread = read_devices(Path("/var/lib/postgresql/18/main"), Path("/pg_wal"), proc, sys)
    assert set(unread) == {"devices.data.free_bytes", "devices.wal.free_bytes"}
    assert (devices["data"]["disk"], devices["data"]["nvme"]) == ("sdb", False)
    assert devices["data"]["rotational"] is True
    assert (devices["wal"]["name"], devices["wal"]["nvme"]) == ("nvme0n1p2", True)
    assert devices["wal"]["schedulers"] == ["none", "mq-deadline"]
    assert devices["wal_on_data_device"] is False


def test_free_space_is_read_on_the_live_machine(tmp_path: Path):
    """statvfs of the directory itself, on this machine's /proc (no recorded tree)."""
    devices, unread = read_devices(tmp_path, None, Path("/proc"), Path("/sys"))
    assert "devices.data.free_bytes" not in unread
    free = devices["data"]["free_bytes"]
    assert isinstance(free, int) and free > 0


def test_unknown_directories():
    devices, unread = read_devices(None, None, RECORDED / "proc", RECORDED / "sys")
    assert devices == {"data": None, "wal": None, "wal_on_data_device": None}
    assert unread == {}
    devices, unread = read_devices(
        Path("var/lib/postgresql"), Path("/pg_wal"), RECORDED / "proc", RECORDED / "sys"
    )
    assert devices["data"] is None
    assert devices["wal"] is not None
    assert devices["wal_on_data_device"] is None
    assert unread == {
        "devices.data": "the device under var/lib/postgresql is unknown: "
        "var/lib/postgresql is not an absolute path.",
        "devices.wal.free_bytes": "the free space at /pg_wal is read on the machine itself "
        "(statvfs), not from a recorded /proc.",
    }


# This machine, and the contract


def test_documented_fields_are_the_ones_gathered():
    assert documented_fields("host") == list(HOST_FIELDS)


def test_this_machine():
    host, unread = read_inventory(Path("/proc"), Path("/sys"))
    assert list(host) == documented_fields("host")
    assert host["arch"] == os.uname().machine
    assert 1 <= host["cpu_count"] <= len(os.sched_getaffinity(0))  # a quota may lower it
    for name in ("hostname", "kernel_release", "cpu_model"):
        assert isinstance(host[name], str) and host[name]
    for name in ("cpu_count", "cpu_count_host", "memory_total_bytes", "memory_bytes"):
        assert isinstance(host[name], int) and host[name] > 0
    assert host["memory_bytes"] <= host["memory_total_bytes"]
    assert isinstance(host["swap_devices"], list)
    assert isinstance(host["cpu_governors"], dict)
    assert sum(host["cpu_governors"].values()) <= host["cpu_count_host"]
    for key, reason in unread.items():
        assert key.startswith("host.") and host[key.removeprefix("host.")] is None
        assert isinstance(reason, str) and reason.endswith(".")
    devices, unread = read_devices(
        Path(__file__).parent, Path(__file__).parent, Path("/proc"), Path("/sys")
    )
    assert unread == {}
    assert list(devices["data"]) == documented_fields("devices")
    assert devices["wal_on_data_device"] is True
