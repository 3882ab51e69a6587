"""Storage sets (issue 23): `compare` with the sandbox's data directory on filesystems pgdyno
builds on loop images (ext4, XFS, pg_wal apart), as a user runs it, as root; SIGKILL then
`pgdyno rollback`; `plan check` refusing a mounted device. Every test runs under the storage
guard (tests/storage_guard.py): nothing may stay mounted or attached."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import IS_ROOT, PGDYNO, one_clear_sentence, wait_for
from pgdyno.host.disks import mount_for, parse_mountinfo
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import pid_alive
from storage_guard import assert_nothing_left

pytestmark = [
    pytest.mark.skipif(not IS_ROOT, reason="builds loop devices and mounts: needs root"),
    pytest.mark.skipif(not Path("/sbin/mkfs.xfs").exists() and not Path("/usr/sbin/mkfs.xfs")
                       .exists(), reason="needs xfsprogs (scripts/bootstrap dev installs it)"),
]  # fmt: skip

# seed 3: ext4 first, after the first run's rate probe, as before the balanced orders (a
# 2 s run right after a set switch without it was once seen with no sample of its loop device).
PLAN = """\
name = "fs"
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = {duration}
warmup = 0
repeats = 1
seed = 3
[[set]]
name = "ext4"
[set.storage]
filesystem = "ext4"
mount_options = "noatime"
[[set]]
name = "xfs-wal-apart"
[set.storage]
filesystem = "xfs"
[set.storage.wal]
filesystem = "ext4"
"""


def pgdyno(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PGDYNO), *args, "--workdir", str(workdir)], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def devices(workdir: Path, run_id: int) -> dict[str, dict[str, object]]:
    shown = pgdyno(workdir, "runs", "show", str(run_id), "--json")
    return json.loads(shown.stdout)["devices"]  # type: ignore[no-any-return]


def test_each_set_runs_on_its_own_filesystems_and_nothing_is_left(storage_workdir: Path) -> None:
    plan = storage_workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=2))
    data_dir = storage_workdir / "clusters" / "pg18" / "data"
    done = pgdyno(storage_workdir, "compare", str(plan), "--json")
    assert done.returncode == 0, done.stderr
    runs = {r["set_name"]: r for r in json.loads(done.stdout)["runs"]}
    assert {r["status"] for r in runs.values()} == {"ok"}
    ext4 = devices(storage_workdir, runs["ext4"]["id"])
    assert ext4["data"]["fstype"] == "ext4" and str(ext4["data"]["name"]).startswith("loop")
    assert "noatime" in str(ext4["data"]["mount_options"]) and ext4["wal_on_data_device"]
    xfs = devices(storage_workdir, runs["xfs-wal-apart"]["id"])
    assert xfs["data"]["fstype"] == "xfs" and xfs["wal"]["fstype"] == "ext4"
    assert xfs["data"]["name"] != xfs["wal"]["name"] and xfs["wal_on_data_device"] is False
    assert "building its storage" in done.stderr and "removed the loop image" in done.stderr
    # the timeline samples the loop device and the disk its image is on
    shown = json.loads(pgdyno(storage_workdir, "runs", "show", str(runs["ext4"]["id"]),
                              "--json").stdout)  # fmt: skip
    loop = ext4["data"]["name"]
    assert any(k.startswith(f"disk.{loop}.") for k in shown["samples"])
    below = mount_for(
        str(storage_workdir), parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    )
    assert below is not None
    backing = {k.split(".")[1] for k in shown["samples"] if k.startswith("disk.")} - {loop}
    assert backing, "the image's own disk was not sampled"
    assert_nothing_left(storage_workdir)
    # the sandbox's own data directory is back, on the work directory's disk
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    below = mount_for(str(data_dir), mounts)
    assert below is not None and not below.mount_point.startswith(str(storage_workdir))
    assert (data_dir / "PG_VERSION").is_file() and not (data_dir / "pg_wal").is_symlink()


def test_sigkill_in_a_set_then_rollback_leaves_nothing(storage_workdir: Path) -> None:
    plan = storage_workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=60))
    proc = subprocess.Popen(
        [str(PGDYNO), "compare", str(plan), "--workdir", str(storage_workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        mounted = storage_workdir / "storage"

        def in_a_set() -> bool:
            """the first set's filesystem mounted under the data directory"""
            text = Path("/proc/self/mountinfo").read_text()
            return str(storage_workdir / "clusters") in text and mounted.exists()

        assert wait_for(in_a_set, 300), "the first set's storage was never in place"
        proc.kill()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # At once, before the sandbox's watchdog has stopped the killed compare's server: rollback
    # stops pgdyno's own sandbox, which holds the bind mount, before taking the storage down.
    done = pgdyno(storage_workdir, "rollback")
    assert done.returncode == 0, done.stderr
    assert "removed the loop image" in done.stdout + done.stderr
    assert_nothing_left(storage_workdir)
    pid_file = storage_workdir / "clusters" / "pg18" / "data" / "postmaster.pid"
    assert not pid_file.exists() or not pid_alive(int(pid_file.read_text().split()[0]))


def test_plan_check_refuses_a_mounted_device_in_one_sentence(storage_workdir: Path) -> None:
    root = mount_for("/", parse_mountinfo(Path("/proc/self/mountinfo").read_text()))
    if root is None or not root.source.startswith("/dev/"):
        pytest.skip(f"/ is not on a block device here ({root and root.source})")
    plan = storage_workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=2).replace(
        'filesystem = "ext4"\nmount_options', f'filesystem = "ext4"\ndevice = "{root.source}"\n'
        "mount_options", 1))  # fmt: skip
    done = pgdyno(storage_workdir, "plan", "check", str(plan))
    assert done.returncode == 2
    line = one_clear_sentence(done.stderr)
    assert "plan.toml line" in line and root.source in line and "mounted" in line
    assert_nothing_left(storage_workdir)


def test_storage_sets_are_for_the_sandbox_only(storage_workdir: Path, server: Sandbox) -> None:
    plan = storage_workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=2))
    done = pgdyno(storage_workdir, "compare", str(plan), "--dsn", server.conninfo())
    assert done.returncode == 2, done.stderr
    line = one_clear_sentence(done.stderr)
    assert "builds a filesystem for the data directory" in line and "without --dsn" in line
    assert_nothing_left(storage_workdir)
