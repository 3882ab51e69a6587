"""The storage layer on the real kernel: loop devices, mkfs, mounts, SIGKILL and rollback.

Every test runs in a work directory of its own under a guard (`storage_workdir`) that, however
the test ends, looks for loop devices backed by a file in it (/sys/block/loop*/loop/backing_file)
and mounts in it (/proc/self/mountinfo), takes them down with plain code independent of pgdyno,
removes the directory, and fails the test if it had to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, one_clear_sentence, wait_for
from pgdyno.errors import UsageError
from pgdyno.host.disks import parse_mountinfo
from pgdyno.storage import kernel, loop
from pgdyno.storage.check import check_requests, inspect_request, mkfs_command
from pgdyno.storage.filesystems import KINDS
from pgdyno.storage.layer import (
    FsRequest,
    bind_mounted,
    built_filesystem,
    check_request,
)
from pgdyno.storage.model import Roots
from pgdyno.storage.mounts import LiveDevices
from pgdyno.undo.filesystems import StorageError, journal_path, pending_storage, rollback_storage
from pgdyno.undo.journal import CRASH_ENV
from storage_guard import assert_nothing_left, loops_under, mounts_under

MIB = 2**20
SIZES = {"ext4": 120 * MIB, "ext3": 120 * MIB, "xfs": 300 * MIB, "btrfs": 120 * MIB}


def _usable(filesystem: str) -> bool:
    kind = KINDS[filesystem]
    return mkfs_command(kind) is not None and kernel.support(kind, Roots()).mount_type is not None


pytestmark = [
    pytest.mark.skipif(not IS_ROOT, reason="makes loop devices and mounts: needs root"),
    pytest.mark.skipif(
        not Path("/dev/loop-control").exists(), reason="the kernel offers no loop devices"
    ),
]


def needs(filesystem: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not _usable(filesystem), reason=f"no {filesystem} here")


# -- the guard: nothing may stay behind --------------------------------------------------------


@pytest.fixture
def user_loop(storage_workdir: Path) -> Iterator[tuple[str, Path]]:
    """A loop device of the test's own (as a user's disk) on a 300 MiB image holding ext4."""
    image = storage_workdir / "disk" / "user.img"
    image.parent.mkdir()
    with image.open("wb") as file:
        file.truncate(300 * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield device, image
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


def mounted_at(target: Path) -> list[str]:
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return [m.source for m in mounts if m.mount_point == str(target)]


# -- building and taking down ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filesystem", "options", "expected"),
    [
        pytest.param("ext4", "noatime,nobarrier", {"noatime", "nobarrier"}, marks=needs("ext4")),
        pytest.param(
            "xfs", "noatime,logbsize=256k", {"noatime", "logbsize=256k"}, marks=needs("xfs")
        ),
        pytest.param(
            "btrfs", "noatime,compress=zstd", {"noatime", "compress=zstd:3"}, marks=needs("btrfs")
        ),
    ],
)
def test_build_and_take_down(
    storage_workdir: Path, filesystem: str, options: str, expected: set[str]
) -> None:
    log: list[str] = []
    request = FsRequest("data", filesystem, mount_options=options, size_bytes=SIZES[filesystem])
    with built_filesystem(storage_workdir, request, log.append) as built:
        assert built.mount_point == storage_workdir / "storage" / "mnt-data"
        assert mounted_at(built.mount_point) == [built.device]
        assert built.device.startswith("/dev/loop") and built.driver == filesystem
        assert expected <= set(built.mount_options.split(","))
        assert built.image is not None and built.image.stat().st_size == SIZES[filesystem]
        (built.mount_point / "file").write_text("written")
        os.sync()
    assert_nothing_left(storage_workdir)
    assert any(line.startswith(f"made {filesystem} on /dev/loop") for line in log), log
    assert log[-1] == f"removed the loop image {built.image}", log


@needs("ext3")
def test_ext3_says_which_driver_mounted_it(storage_workdir: Path) -> None:
    request = FsRequest("wal", "ext3", size_bytes=SIZES["ext3"])
    log: list[str] = []
    with built_filesystem(storage_workdir, request, log.append) as built:
        found = inspect_request(request, storage_workdir)
        # Linux >= 4.3: the type "ext3" is registered by the ext4 driver, which mounts it
        assert (built.filesystem, built.mount_type, built.driver) == ("ext3", "ext3", "ext4")
        assert found.notes == [kernel.ext3_note(os.uname().release, "ext3")]
    assert kernel.ext3_note(os.uname().release, "ext3") in log
    assert_nothing_left(storage_workdir)


@needs("ext4")
def test_an_error_inside_takes_it_all_down(storage_workdir: Path, python_sigint: None) -> None:
    request = FsRequest("data", "ext4", size_bytes=SIZES["ext4"])
    with pytest.raises(KeyboardInterrupt), built_filesystem(storage_workdir, request, print):
        raise KeyboardInterrupt
    assert_nothing_left(storage_workdir)


@needs("xfs")
def test_a_mount_the_kernel_refuses_is_taken_down(storage_workdir: Path) -> None:
    # XFS dropped nobarrier in Linux 4.19: mount fails after mkfs, loop and image were made
    request = FsRequest("data", "xfs", mount_options="nobarrier", size_bytes=SIZES["xfs"])
    with (
        pytest.raises(StorageError, match=r"^mount -t xfs -o nobarrier .* failed .*: check the "),
        built_filesystem(storage_workdir, request, print),
    ):
        pass
    assert_nothing_left(storage_workdir)


@needs("ext4")
def test_bind_mount_and_a_second_filesystem_nest(storage_workdir: Path) -> None:
    data = FsRequest("data", "ext4", size_bytes=SIZES["ext4"])
    wal = FsRequest("wal", "ext4", size_bytes=SIZES["ext4"], mount_options="noatime")
    target = storage_workdir / "clusters" / "pg_wal"
    target.mkdir(parents=True)
    with (
        built_filesystem(storage_workdir, data, print),
        built_filesystem(storage_workdir, wal, print) as built_wal,
    ):
        source = built_wal.mount_point / "pg_wal"
        source.mkdir()
        with bind_mounted(source, target, storage_workdir):
            (target / "segment").write_text("x")
            assert (source / "segment").read_text() == "x"
            assert len(mounts_under(storage_workdir)) == 3
        assert mounted_at(target) == []
    assert_nothing_left(storage_workdir)


# -- a crash, then rollback ----------------------------------------------------------------------

CHILD = """
import json, sys, time
from pathlib import Path
from pgdyno.storage.layer import FsRequest, bind_mounted, built_filesystem

workdir = Path(sys.argv[1])
request = FsRequest("data", "ext4", size_bytes=120 * 2**20, mount_options="noatime")
with built_filesystem(workdir, request, lambda line: None) as built:
    source = built.mount_point / "wal"
    source.mkdir()
    target = workdir / "bound"
    target.mkdir()
    with bind_mounted(source, target, workdir):
        print(json.dumps({"device": built.device, "mount": str(built.mount_point)}), flush=True)
        time.sleep(300)
"""


def start_child(workdir: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@needs("ext4")
def test_sigkill_then_rollback_leaves_nothing(storage_workdir: Path, run_cli) -> None:
    child = start_child(storage_workdir)
    try:
        assert child.stdout is not None
        built = json.loads(child.stdout.readline() or "{}")
        assert built, child.stderr.read() if child.stderr else ""
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert mounted_at(Path(built["mount"])) == [built["device"]]
    assert [s.kind for s in pending_storage(storage_workdir)] == ["image", "loop", "mount", "bind"]
    request = FsRequest("data", "ext4", size_bytes=SIZES["ext4"])
    with (
        pytest.raises(UsageError, match="run `pgdyno rollback` first"),
        built_filesystem(storage_workdir, request, print),
    ):
        pass
    assert "not undone" in " ".join(check_requests([request], storage_workdir).problems)

    done = run_cli(storage_workdir, "rollback")
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"unmounted the bind mount of {built['mount']}/wal on {storage_workdir}/bound",
        f"unmounted {built['mount']} ({built['device']})",
        f"detached {built['device']} ({storage_workdir}/storage/data.img)",
        f"removed the loop image {storage_workdir}/storage/data.img",
    ]
    assert_nothing_left(storage_workdir)
    again = run_cli(storage_workdir, "rollback")
    assert again.code == 0 and again.stdout == "nothing to restore (no pending change)\n"
    assert rollback_storage(storage_workdir, LiveDevices(Roots()), print) == []


@needs("ext4")
def test_a_busy_mount_stops_rollback_until_it_is_free(storage_workdir: Path, run_cli) -> None:
    child = start_child(storage_workdir)
    try:
        assert child.stdout is not None
        built = json.loads(child.stdout.readline() or "{}")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    mount = Path(built["mount"])
    with (mount / "open-file").open("w"):  # the mount is busy while this is open
        busy = run_cli(storage_workdir, "rollback")
        assert busy.code == 1
        assert one_clear_sentence(busy.stderr) == (
            f"pgdyno: error: umount {mount} failed (exit code 32: umount: {mount}: target is "
            f"busy): stop what uses it (`fuser -vm {mount}`), then run `pgdyno rollback`."
        )
        assert busy.stdout.startswith("unmounted the bind mount of")  # done before it stopped
        assert [s.kind for s in pending_storage(storage_workdir)] == ["image", "loop", "mount"]
    done = run_cli(storage_workdir, "rollback")
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"unmounted {mount} ({built['device']})"
    assert_nothing_left(storage_workdir)


def test_a_damaged_line_is_named_then_set_aside(storage_workdir: Path, run_cli) -> None:
    journal = journal_path(storage_workdir)
    record = {"op": "change", "id": 1, "kind": "mount", "path": "/", "at": "t", "pid": 1}
    journal.write_text(json.dumps(record) + "\n")
    refused = run_cli(storage_workdir, "rollback")
    assert refused.code == 1
    sentence = one_clear_sentence(refused.stderr)
    assert f"line 1 of {journal} (it names /, outside {storage_workdir}/storage" in sentence
    assert sentence.endswith(
        "run `pgdyno rollback --confirm-damaged` to set the damaged journal aside."
    )
    assert mounted_at(Path("/"))  # never acted on
    confirmed = run_cli(storage_workdir, "rollback", "--confirm-damaged")
    assert confirmed.code == 0, confirmed.stderr
    assert confirmed.stdout.startswith("set the damaged storage journal aside as ")
    assert not journal.exists() and pending_storage(storage_workdir) == []


CRASH_POINTS = [f"{when}:{n}" for n in range(1, 7) for when in ("before", "after")]


@needs("ext4")
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_at_any_journal_write_is_rolled_back(storage_workdir: Path, point: str) -> None:
    """SIGKILL at each record of the build (image, loop, mkfs, mkfs done, mount, bind), before
    it reaches the disk and after, before the step it records is made."""
    child = start_child(storage_workdir, {**os.environ, CRASH_ENV: point})
    _out, err = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, err
    rollback_storage(storage_workdir, LiveDevices(Roots()), print)
    assert_nothing_left(storage_workdir)


# -- refusals --------------------------------------------------------------------------------------


@needs("ext4")
def test_a_device_kept_by_another_mount_namespace_names_the_process(storage_workdir: Path) -> None:
    """A process that made a mount namespace while the filesystem was mounted (unshare, a
    container, a systemd unit with PrivateTmp) keeps its copy of the mount where mounts do not
    propagate, and with it the loop device, after the unmount here: detach names that process;
    once it ends the kernel lets the device go."""
    image = storage_workdir / "kept.img"
    with image.open("wb") as file:
        file.truncate(120 * MIB)
    device = loop.attach(image)
    subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
    target = storage_workdir / "mnt"
    target.mkdir()
    subprocess.run(["mount", device, str(target)], check=True)
    keeper = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sleep", "600"],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        namespace = Path(f"/proc/{keeper.pid}/ns/mnt")
        assert wait_for(lambda: namespace.readlink() != Path("/proc/self/ns/mnt").readlink(), 10)
        subprocess.run(["umount", str(target)], check=True)
        with pytest.raises(StorageError) as kept:
            loop.detach(image, Roots(), timeout=0.2)
        assert str(kept.value) == (
            f"{device} still holds {image} after losetup --detach: it is still mounted in the "
            f"mount namespace of process {keeper.pid} (sleep), which copied the mount when it "
            "started, and the kernel lets the device go when that namespace ends: end that "
            "process, then run `pgdyno rollback`."
        )
    finally:
        keeper.kill()
        keeper.wait()
    loop.detach(image, Roots())  # the namespace is gone: the device goes
    assert loop.loops_backed_by(image, Roots()) == []


@needs("ext4")
def test_a_mounted_device_is_refused_even_with_destroy_device(storage_workdir: Path) -> None:
    request = FsRequest("data", "ext4", size_bytes=SIZES["ext4"])
    with built_filesystem(storage_workdir, request, print) as built:
        other = FsRequest("wal", "ext4", device=Path(built.device), destroy_device=True)
        expected = (
            f"the device {built.device} for wal is mounted on {built.mount_point}: pgdyno never "
            "formats a device in use, even with destroy_device; name another device."
        )
        assert check_request(other, storage_workdir) == [expected]
        with pytest.raises(UsageError) as refused, built_filesystem(storage_workdir, other, print):
            pass
        assert str(refused.value) == expected
    assert_nothing_left(storage_workdir)


@needs("xfs")
def test_a_device_holding_ext4_needs_destroy_device(
    storage_workdir: Path, user_loop: tuple[str, Path]
) -> None:
    device, _image = user_loop
    kept = FsRequest("data", "xfs", device=Path(device))
    expected = (
        f"the device {device} for data holds a filesystem (ext4), and pgdyno formats a named "
        "device only with destroy_device = true: set it if everything on the device may be lost."
    )
    assert check_request(kept, storage_workdir) == [expected]
    with (
        pytest.raises(UsageError, match="only with destroy_device = true"),
        built_filesystem(storage_workdir, kept, print),
    ):
        pass
    assert subprocess.run(["blkid", "-p", "-s", "TYPE", "-o", "value", device],
                          capture_output=True, text=True).stdout.strip() == "ext4"  # fmt: skip

    log: list[str] = []
    erased = FsRequest("data", "xfs", device=Path(device), destroy_device=True)
    assert check_request(erased, storage_workdir) == []
    with built_filesystem(storage_workdir, erased, log.append) as built:
        assert (built.device, built.driver, built.image) == (device, "xfs", None)
    assert log[0] == f"erasing {device} (destroy_device = true), which holds a filesystem (ext4)"
    assert loops_under(storage_workdir) == [device]  # the user's device stays attached
    assert mounts_under(storage_workdir) == [] and pending_storage(storage_workdir) == []


@needs("ext4")
def test_a_device_held_open_exclusively_is_in_use(
    storage_workdir: Path, user_loop: tuple[str, Path]
) -> None:
    device, _image = user_loop
    fd = os.open(device, os.O_RDONLY | os.O_EXCL)
    try:
        request = FsRequest("data", "ext4", device=Path(device), destroy_device=True)
        assert check_request(request, storage_workdir) == [
            f"the device {device} for data is in use (the kernel refuses to open it "
            "exclusively): pgdyno never formats a device in use, even with destroy_device; "
            "name another device."
        ]
    finally:
        os.close(fd)


def test_what_is_not_a_block_device_is_refused(storage_workdir: Path) -> None:
    plain = storage_workdir / "plain.img"
    plain.write_bytes(b"\0" * 4096)
    for path, what in [
        (plain, "is not a block device (it is a regular file)"),
        (storage_workdir, "is not a block device (it is a directory)"),
        (storage_workdir / "none", "does not exist"),
        (Path("/dev/null"), "is not a block device (it is another kind of file)"),
    ]:
        request = FsRequest("data", "ext4", device=path, destroy_device=True)
        assert check_request(request, storage_workdir) == [
            f"the device {path} for data {what}: name a block device, or give a size for a "
            "loop image."
        ]
    assert_nothing_left(storage_workdir)


def test_check_request_messages(storage_workdir: Path, tmp_path: Path) -> None:
    small = FsRequest("data", "xfs", size_bytes=200 * MIB)
    assert check_request(small, storage_workdir) == [
        "the 200 MiB image for data is smaller than the 300 MiB xfs needs: give at least 300 MiB."
    ]
    huge = FsRequest("data", "ext4", size_bytes=2**60)
    (problem,) = check_request(huge, storage_workdir)
    assert problem.startswith(f"the work directory {storage_workdir} has ")
    assert problem.endswith("free space, give a smaller size or another --workdir.")
    outside = FsRequest("wal", "xfs", size_bytes=300 * MIB, mkfs_options=("-l", "logdev=/dev/vda"))
    assert check_request(outside, storage_workdir) == [
        "the mkfs option 'logdev=/dev/vda' for wal is refused (it names a path): leave it out."
    ]
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "filesystems").write_text("nodev\tsysfs\n\text4\n")
    roots = Roots(proc=tmp_path / "proc", modules=tmp_path / "modules", release="6.1.0-x")
    found = inspect_request(FsRequest("data", "xfs", size_bytes=300 * MIB), storage_workdir, roots)
    assert found.problems == [
        f"this kernel offers no xfs filesystem: it is not in {tmp_path}/proc/filesystems and "
        f"no module xfs is installed (and {tmp_path}/modules/6.1.0-x is missing); load it "
        "(`modprobe xfs`) or choose another filesystem."
    ]
    pair = [
        FsRequest("data", "ext4", size_bytes=2**40),
        FsRequest("data", "ext4", size_bytes=2**40),
    ]
    assert "two storage requests name the role data: give each its own." in (
        check_requests(pair, storage_workdir).problems
    )
    assert not (storage_workdir / "storage").exists()  # a check creates nothing
