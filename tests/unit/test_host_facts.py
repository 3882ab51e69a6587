"""Host facts read from recorded /proc and /sys snapshots (tests/data/hosts/README.md)."""

import os
import shutil
from pathlib import Path

import pytest

from pgdyno.host.machine import read_host, read_inventory

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


# One reader of the host: a run records what the doctor's snapshot reads.


def layered(name: str, tmp_path: Path) -> Path:
    """The recorded VM with `tests/data/hosts/<name>/` laid over it (its `absent` files removed),
    as tests/unit/test_host_inventory.py builds its hosts."""
    root = tmp_path / name
    shutil.copytree(HOSTS / "firecracker-2cpu", root, symlinks=True, copy_function=shutil.copyfile)
    shutil.copytree(HOSTS / name, root, dirs_exist_ok=True, copy_function=shutil.copyfile,
                    ignore=shutil.ignore_patterns("absent"))  # fmt: skip
    absent = HOSTS / name / "absent"
    for line in absent.read_text().split() if absent.exists() else []:
        (root / line).unlink()
    return root


@pytest.mark.parametrize(
    "name", [*sorted(path.name for path in HOSTS.iterdir() if path.is_dir()), ""]
)
def test_a_run_records_the_facts_of_the_doctor_snapshot(name: str, tmp_path: Path):
    """Each recorded host, and this machine ("")."""
    root = layered(name, tmp_path) if name else Path("/")
    recorded = read_host(root / "proc", root / "sys")
    host, _unread = read_inventory(root / "proc", root / "sys")
    assert recorded.kernel == (host["kernel_release"] or "unknown")
    assert recorded.cpu_model == (host["cpu_model"] or "unknown")
    assert recorded.cpu_count == (host["cpu_count"] or 0)
    assert recorded.memory_bytes == (host["memory_bytes"] or 0)
    assert recorded.memory_total_bytes == (host["memory_total_bytes"] or 0)
    assert recorded.hostname == (host["hostname"] or "")
    assert recorded.virtualization == (host["virtualization"] or "")


def test_garbled_cpu_and_memory_files_are_unknowns_of_a_run_not_a_crash(tmp_path: Path):
    """Reading a run's facts used to stop with a ValueError traceback; now the run records the
    unknowns (0) and the snapshot says which file is garbled."""
    root = layered("container-4g", tmp_path)
    (root / "sys/devices/system/cpu/online").write_text("0-\n")
    (root / "sys/fs/cgroup/memory.max").write_text("lots\n")
    recorded = read_host(root / "proc", root / "sys")
    assert (recorded.cpu_count, recorded.memory_bytes) == (0, 0)
    assert recorded.memory_total_bytes == 24_684_084 * 1024  # what could be read still is
    assert recorded.kernel == "6.18.44-fc-v669"
    _host, unread = read_inventory(root / "proc", root / "sys")
    assert unread["host.cpu_count"] == "/sys/devices/system/cpu/online could not be parsed ('0-')."
    assert unread["host.memory_bytes"] == "/sys/fs/cgroup/memory.max could not be parsed ('lots')."
