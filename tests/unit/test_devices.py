"""The device under a path, on mountinfo and /sys recorded on this VM and on an edited host
with NVMe, SATA, LVM, btrfs and tmpfs mounts (tests/data/proc/README.md)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from pgdyno.errors import ParseError
from pgdyno.host.disks import BlockDevice, device_for_path, mount_for, parse_mountinfo

DATA = Path(__file__).parent.parent / "data"
VM_PROC = DATA / "proc" / "idle" / "t0"
VM_SYS = DATA / "sys" / "firecracker-vda"
EDITED_PROC = DATA / "proc" / "edited-nvme-sdb"
EDITED_SYS = DATA / "sys" / "edited-nvme-sdb"


def on_vm(path: str) -> BlockDevice | None:
    return device_for_path(Path(path), proc_root=VM_PROC, sys_root=VM_SYS)


def on_edited(path: str) -> BlockDevice | None:
    return device_for_path(Path(path), proc_root=EDITED_PROC, sys_root=EDITED_SYS)


@pytest.mark.parametrize("path", ["/work", "/work/main/src", "/tmp", "/tmp/../tmp/x"])
def test_recorded_vm_root_filesystem_is_the_virtio_disk(path):
    device = on_vm(path)
    assert device == BlockDevice(
        name="vda",
        disk="vda",
        major_minor="254:0",
        mount_point="/",
        fstype="ext4",
        mount_options="rw,relatime,discard,resv_strict,resuid=65534,resgid=65534",
        source="/dev/vda",
        rotational=True,  # virtio-blk reports 1
        scheduler="mq-deadline",
        read_ahead_kb=8192,
        schedulers=("none", "mq-deadline", "kyber", "bfq"),
    )


def test_recorded_vm_tmpfs_has_no_block_device():
    device = on_vm("/dev/shm/PostgreSQL.1234")
    assert device is not None
    assert (device.name, device.disk, device.fstype) == ("tmpfs", None, "tmpfs")
    # /dev/shm is mounted twice; the later mount hides the first.
    assert device.major_minor == "0:27"
    assert (device.rotational, device.scheduler, device.read_ahead_kb) == (None, None, None)


def test_edited_nvme_partition_belongs_to_its_disk():
    device = on_edited("/etc/postgresql/18/main")
    assert device is not None
    assert (device.name, device.disk, device.major_minor) == ("nvme0n1p2", "nvme0n1", "259:2")
    assert (device.rotational, device.scheduler, device.read_ahead_kb) == (False, "none", 128)
    assert device.mount_options == "rw,relatime,errors=remount-ro"


def test_edited_rotational_sata_partition():
    device = on_edited("/var/lib/postgresql/18/main/base")
    assert device is not None
    assert (device.name, device.disk, device.fstype) == ("sdb1", "sdb", "xfs")
    assert device.mount_point == "/var/lib/postgresql"
    assert (device.rotational, device.scheduler, device.read_ahead_kb) == (
        True,
        "mq-deadline",
        4096,
    )
    assert "noatime" in device.mount_options.split(",")


def test_edited_device_mapper_volume_with_a_space_in_its_mount_point():
    device = on_edited("/srv/pg archive/wal")
    assert device is not None
    assert (device.name, device.disk, device.source) == ("dm-0", "dm-0", "/dev/mapper/vg0-archive")
    assert device.mount_point == "/srv/pg archive"
    assert (device.rotational, device.scheduler) == (False, "none")


def test_edited_btrfs_anonymous_device_number_is_found_through_its_source():
    device = on_edited("/home/alice")
    assert device is not None
    assert (device.name, device.disk, device.major_minor) == ("nvme0n1p3", "nvme0n1", "0:40")
    assert device.scheduler == "none"


@pytest.mark.parametrize(
    ("path", "fstype"),
    [("/tmp/pgdyno", "tmpfs"), ("/var/lib/docker/overlay2/6f1c/merged/data", "overlay")],
)
def test_edited_filesystems_without_a_block_device(path, fstype):
    device = on_edited(path)
    assert device is not None
    assert (device.name, device.disk, device.fstype) == (fstype, None, fstype)


def test_name_from_uevent_when_sysfs_has_no_symlink(tmp_path: Path):
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "self/mountinfo").write_text("1 0 8:0 / / rw - ext4 /dev/root rw\n")
    (sys / "dev/block/8:0").mkdir(parents=True)
    (sys / "dev/block/8:0/uevent").write_text("MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n")
    device = device_for_path(Path("/data"), proc_root=proc, sys_root=sys)
    assert device is not None
    assert (device.name, device.disk, device.rotational) == ("sda", "sda", None)


def test_name_from_the_mount_source_without_sysfs(tmp_path: Path):
    device = device_for_path(Path("/work"), proc_root=VM_PROC, sys_root=tmp_path)
    assert device is not None
    assert (device.name, device.disk, device.scheduler) == ("vda", "vda", None)


def test_unreadable_mountinfo_gives_none(tmp_path: Path):
    assert device_for_path(Path("/"), proc_root=tmp_path, sys_root=tmp_path) is None


def test_parse_mountinfo_keeps_optional_fields_out():
    mounts = parse_mountinfo((EDITED_PROC / "self/mountinfo").read_text())
    archive = next(m for m in mounts if m.major == 253)
    assert (archive.fstype, archive.source, archive.super_options) == (
        "ext4",
        "/dev/mapper/vg0-archive",
        "rw,stripe=16",
    )
    assert archive.options == "rw,relatime"


def test_mount_for_matches_whole_path_components():
    mounts = parse_mountinfo((EDITED_PROC / "self/mountinfo").read_text())
    assert mount_for("/tmpx", mounts).mount_point == "/"
    assert mount_for(PurePosixPath("/tmp"), mounts).mount_point == "/tmp"
    assert mount_for("/", mounts).mount_point == "/"
    assert mount_for("/", []) is None
    with pytest.raises(ValueError):
        mount_for("relative/path", mounts)


@pytest.mark.parametrize(
    "text",
    [
        "garbage\n",
        "22 1 254:0 / / rw,relatime ext4 /dev/vda rw\n",  # no " - " separator
        "x 1 254:0 / / rw - ext4 /dev/vda rw\n",
        "22 1 254 / / rw - ext4 /dev/vda rw\n",
    ],
)
def test_garbage_mountinfo_raises_parse_error(text):
    with pytest.raises(ParseError, match="mountinfo"):
        parse_mountinfo(text)
