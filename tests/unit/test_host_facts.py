"""Host facts read from recorded /proc and /sys snapshots (tests/data/hosts/README.md)."""

import os
import shutil
from pathlib import Path

from pgdyno.host.facts import read_host

HOSTS = Path(__file__).parent.parent / "data" / "hosts"


def facts(name: str):
    root = HOSTS / name
    return read_host(root / "proc", root / "sys")


def test_recorded_vm_reads_kernel_cpu_and_memory():
    host = facts("firecracker-2cpu")
    assert host.kernel == "6.18.44-fc-v669"
    assert host.cpu_model == "AMD EPYC"
    assert host.cpu_count == 2  # cpu/online 0-1, no quota (cpu.cfs_quota_us -1)
    # MemTotal from the recorded meminfo; the v1 cgroup "limit" is the unlimited sentinel.
    assert host.memory_total_bytes == 24_684_084 * 1024
    assert host.memory_bytes == host.memory_total_bytes


def test_container_limit_caps_usable_memory_and_cpus():
    host = facts("container-4g")
    assert host.memory_bytes == 4 * 1024**3
    assert host.memory_total_bytes > 20 * 1024**3
    assert host.cpu_count == 1  # a 1.5 CPU quota leaves one whole CPU for pgbench jobs


def test_a_recorded_host_has_its_own_cpu_count(tmp_path: Path):
    """4 CPUs on a machine with 2: nothing is read from the machine running the test."""
    root = tmp_path / "host"
    for layer in ("firecracker-2cpu", "bare-metal-governor"):
        shutil.copytree(HOSTS / layer, root, dirs_exist_ok=True)
    host = read_host(root / "proc", root / "sys")
    assert host.cpu_count == 4
    assert host.cpu_model == "AMD EPYC"


def test_missing_files_give_unknowns_not_errors(tmp_path: Path):
    host = read_host(tmp_path / "proc", tmp_path / "sys")
    assert host.kernel == "unknown"
    assert host.cpu_model == "unknown"
    assert host.memory_bytes == 0
    assert host.cpu_count == 0  # not this machine's count


def test_the_live_machine_counts_its_affinity_mask():
    host = read_host(Path("/proc"), Path("/sys"))
    assert 1 <= host.cpu_count <= len(os.sched_getaffinity(0))
