"""The storage layer's pure parts on recorded real output (tests/data/storage, made by
tests/data/storage/record.py): blkid's probe, /proc/filesystems and the kernel's choice of mount
type, mountinfo lines of real mounts, /proc/swaps, loop backing files; the mkfs command line and
the options a plan may not pass."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pgdyno.host.disks import parse_mountinfo
from pgdyno.storage import blkid, kernel
from pgdyno.storage.check import _tool_problems
from pgdyno.storage.device_checks import BlockFacts, Part, mounted, parse_swaps
from pgdyno.storage.filesystems import (
    KINDS,
    mkfs_argv,
    mkfs_option_problems,
    mount_option_problems,
)
from pgdyno.storage.loop import backing_path
from pgdyno.storage.model import FILESYSTEMS, FsRequest, Roots, request_shape_problems
from pgdyno.storage.mounts import kernel_options

DATA = Path(__file__).parent.parent / "data" / "storage"
MIB = 2**20


def recorded(case: str) -> dict[str, object]:
    return json.loads((DATA / "blkid" / f"{case}.json").read_text())


@pytest.mark.parametrize(
    ("case", "described"),
    [
        ("ext4", "a filesystem (ext4, labelled 'pg data$1')"),
        ("ext3", "a filesystem (ext3)"),
        ("xfs", "a filesystem (xfs)"),
        ("btrfs", "a filesystem (btrfs)"),
        ("swap", "a signature of swap (other)"),
        ("gpt", "a partition table (gpt)"),
        ("dos", "a partition table (dos)"),
        ("ambivalent", "several contradicting signatures (blkid -p is ambivalent)"),
    ],
)
def test_blkid_names_what_a_device_holds(case: str, described: str) -> None:
    out = recorded(case)
    found = blkid.interpret(
        int(str(out["returncode"])), str(out["stdout"]), str(out["stderr"]), "x"
    )
    assert found is not None and found.describe() == described


def test_blkid_finds_nothing_on_an_empty_device() -> None:
    out = recorded("empty")
    assert out["returncode"] == blkid.NOTHING
    assert blkid.interpret(blkid.NOTHING, str(out["stdout"]), str(out["stderr"]), "x") is None


def test_blkid_failure_is_one_sentence() -> None:
    with pytest.raises(blkid.StorageError, match=r"^blkid could not probe /dev/sdz .*: check"):
        blkid.interpret(4, "", "blkid: unknown option\n", "/dev/sdz")


def roots_with(tmp_path: Path, filesystems: str, modules: dict[str, str] | None) -> Roots:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "filesystems").write_text(filesystems)
    if modules is not None:
        base = tmp_path / "lib" / "6.1.0-test"
        base.mkdir(parents=True)
        for name, text in modules.items():
            (base / name).write_text(text)
    return Roots(proc=tmp_path / "proc", sys=tmp_path / "sys", modules=tmp_path / "lib",
                 release="6.1.0-test")  # fmt: skip


def test_this_kernel_registers_every_filesystem() -> None:
    registered = kernel.parse_filesystems((DATA / "proc_filesystems.txt").read_text())
    assert {"ext3", "ext4", "xfs", "btrfs"} <= registered and "sysfs" in registered


def test_ext3_is_mounted_as_ext3_where_the_type_exists(tmp_path: Path) -> None:
    roots = roots_with(tmp_path, (DATA / "proc_filesystems.txt").read_text(), None)
    found = kernel.support(KINDS["ext3"], roots)
    assert (found.mount_type, found.how, found.modules_known) == ("ext3", "registered", False)
    note = kernel.ext3_note("6.18.44-fc-v657", "ext3")
    assert note.startswith("Linux 6.18 mounts ext3 with the ext4 driver")


def test_ext3_falls_back_to_ext4_without_an_ext3_type(tmp_path: Path) -> None:
    dep = "kernel/fs/ext4/ext4.ko.xz: kernel/fs/mbcache.ko.xz kernel/fs/jbd2/jbd2.ko.xz\n"
    roots = roots_with(tmp_path, "nodev\tsysfs\n\txfs\n", {"modules.dep": dep})
    found = kernel.support(KINDS["ext3"], roots)
    assert (found.mount_type, found.how) == ("ext4", "module")
    assert "as ext4" in kernel.ext3_note(roots.release, "ext4")
    assert kernel.support(KINDS["xfs"], roots).mount_type == "xfs"
    assert kernel.support(KINDS["btrfs"], roots).mount_type is None


def test_builtin_modules_count(tmp_path: Path) -> None:
    roots = roots_with(tmp_path, "", {"modules.builtin": "kernel/fs/btrfs/btrfs.ko\n"})
    assert kernel.support(KINDS["btrfs"], roots).mount_type == "btrfs"


@pytest.mark.parametrize(
    ("name", "options", "driver"),
    [
        ("ext4", {"noatime", "nobarrier"}, "ext4"),
        ("ext3", {"noatime"}, "ext4"),  # served by the ext4 driver on this kernel
        ("xfs", {"noatime", "logbsize=256k"}, "xfs"),
        ("btrfs", {"noatime", "compress=zstd:3"}, "btrfs"),
    ],
)
def test_recorded_mounts(tmp_path: Path, name: str, options: set[str], driver: str) -> None:
    text = (DATA / "mountinfo" / f"{name}.txt").read_text()
    comments = [line for line in text.splitlines() if line.startswith("#")]
    mount = parse_mountinfo("\n".join(line for line in text.splitlines() if line[:1] != "#"))[0]
    assert options <= set(kernel_options(mount).split(","))
    loop = Path(mount.source).name
    if comments[1].endswith("True"):  # the ext4 driver's directory, as it was
        (tmp_path / "fs" / "ext4" / loop).mkdir(parents=True)
    assert kernel.driver_of(mount.fstype, loop, Roots(sys=tmp_path)) == driver


def test_a_mounted_partition_or_btrfs_source_is_found() -> None:
    facts = BlockFacts("sdb", "8:16", (Part("sdb1", "8:17"),), read_only=False, size_bytes=None)
    lines = (
        "30 1 8:17 / /srv rw - ext4 /dev/sdb1 rw\n"
        "31 1 0:52 / /b rw - btrfs /dev/sdb rw\n"
        "32 1 8:1 / /other rw - ext4 /dev/sda1 rw\n"
    )
    assert mounted(facts, parse_mountinfo(lines)) == [("sdb1", "/srv"), ("sdb", "/b")]


def test_swaps_and_backing_files() -> None:
    swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/vdb2  partition\t1\t0\t-2\n"
    assert parse_swaps(swaps) == ["/dev/vdb2"]
    assert backing_path("/w/storage/data.img\n") == "/w/storage/data.img"
    assert backing_path("/w/storage/data.img (deleted)\n") == "/w/storage/data.img"


def test_every_filesystem_is_known_with_its_package_and_evidence() -> None:
    assert set(KINDS) == set(FILESYSTEMS)
    assert {kind.package for kind in KINDS.values()} == {"e2fsprogs", "xfsprogs", "btrfs-progs"}
    for name in ("ext3", "xfs"):
        assert (
            "Greg Smith, Linux filesystems and PostgreSQL checkpoint benchmarks" in KINDS[name].cite
        )
    assert KINDS["ext3"].mkfs == (("mkfs.ext3",), ("mke2fs", "-t", "ext3"))


def test_mkfs_command_line_merges_mke2fs_extended_options() -> None:
    argv = mkfs_argv(KINDS["ext4"], ("mkfs.ext4",), ("-E", "stride=16"), "/dev/sdb",
                     image=False, force=True)  # fmt: skip
    assert argv == ["mkfs.ext4", "-F", "-q", "-E",
                    "lazy_itable_init=0,lazy_journal_init=0,stride=16", "/dev/sdb"]  # fmt: skip
    xfs = mkfs_argv(KINDS["xfs"], ("mkfs.xfs",), ("-m", "reflink=1"), "/dev/loop1",
                    image=True, force=True)  # fmt: skip
    assert xfs == ["mkfs.xfs", "-f", "-q", "-K", "-m", "reflink=1", "/dev/loop1"]


@pytest.mark.parametrize(
    ("filesystem", "option", "why"),
    [
        ("xfs", "logdev=sdb", "an external log names another device"),
        ("xfs", "file,name=x.img", "it names a file to write the filesystem to"),
        ("ext4", "-d", "it copies a directory of the host into the filesystem"),
        ("ext4", "/dev/sda", "it names a path"),
        ("btrfs", "--rootdir=x", "it copies a directory of the host into the filesystem"),
    ],
)
def test_mkfs_options_that_reach_outside_are_refused(
    filesystem: str, option: str, why: str
) -> None:
    assert mkfs_option_problems(KINDS[filesystem], (option,), "data") == [
        f"the mkfs option {option!r} for data is refused ({why}): leave it out."
    ]


def test_force_is_pgdynos_to_give() -> None:
    (problem,) = mkfs_option_problems(KINDS["xfs"], ("-f",), "wal")
    assert "pgdyno's to give" in problem


def test_mount_options() -> None:
    assert mount_option_problems("", "data") == []
    assert mount_option_problems("noatime,nobarrier,data=writeback", "data") == []
    problems = mount_option_problems("noatime,,bind,x-mount.mkdir,usrjquota=q", "wal")
    assert [p.split("(")[1].split(")")[0] for p in problems] == [
        "an empty option",
        "pgdyno makes its own bind mounts",
        "userspace mount options run helpers",
        "a quota file is a file of the host",
    ]


def test_request_shape() -> None:
    assert request_shape_problems(FsRequest("data", "xfs", size_bytes=300 * MIB)) == []
    both = FsRequest("wal", "xfs", size_bytes=1, device=Path("/dev/sdb"), destroy_device=True)
    assert request_shape_problems(both) == [
        "the xfs filesystem for wal names both a device and a size, but a device is used whole: "
        "leave the size out (it is for a loop image)."
    ]
    assert "not a plain name" in request_shape_problems(FsRequest("../x", "xfs", size_bytes=1))[0]
    relative = FsRequest("data", "ext4", device=Path("sdb"), destroy_device=True)
    assert "not an absolute path" in request_shape_problems(relative)[0]


def test_a_missing_mkfs_names_its_package() -> None:
    kind = replace(KINDS["xfs"], mkfs=(("mkfs.pgdyno-none",),), package="pgdyno-none-progs")
    problems = _tool_problems(FsRequest("data", "xfs", size_bytes=300 * MIB), kind)
    assert problems == [
        "mkfs.pgdyno-none is missing: install it with `apt-get install pgdyno-none-progs`."
    ]
