"""Loop devices: attached and detached with losetup (util-linux), found through
/sys/block/loop*/loop/backing_file.

A loop device is found by its image, never by a name remembered from before: the journal records
the image before `losetup --find` picks a device, so after a crash the device is the one whose
backing file is that image. The image is attached with direct I/O where the host filesystem
allows it, so the page cache holds the benchmark's pages once (in the filesystem on the loop
device), not twice.
"""

from __future__ import annotations

import time
from pathlib import Path

from pgdyno.host.disks import parse_mountinfo
from pgdyno.storage.model import Roots
from pgdyno.storage.tools import run_tool
from pgdyno.undo.filesystems import StorageError

_DELETED = " (deleted)"


def backing_path(text: str) -> str:
    """A backing_file's text -> the image path (the kernel marks a removed image).

    >>> backing_path("/var/lib/pgdyno/storage/data.img (deleted)\\n")
    '/var/lib/pgdyno/storage/data.img'
    """
    path = text.rstrip("\n")
    return path.removesuffix(_DELETED)


def loops_backed_by(image: Path, roots: Roots) -> list[str]:
    """/dev/loopN of every loop device whose backing file is `image` (absolute), by number."""
    found = []
    for entry in (roots.sys / "block").glob("loop*"):
        if not entry.name[4:].isdigit():
            continue
        try:
            text = (entry / "loop" / "backing_file").read_text()
        except OSError:
            continue  # not attached, or detached meanwhile
        if backing_path(text) == str(image):
            found.append(entry.name)
    return [f"/dev/{name}" for name in sorted(found, key=lambda n: int(n[4:]))]


def loop_support_problem(roots: Roots) -> str | None:
    """Why this kernel cannot give loop devices, or None."""
    if (roots.sys / "module" / "loop").is_dir() or (roots.sys / "block" / "loop0").exists():
        return None
    if Path("/dev/loop-control").exists():
        return None
    return (
        "the kernel offers no loop devices (no /dev/loop-control): load the loop module "
        "with `modprobe loop`, or name a block device with destroy_device = true."
    )


def attach(image: Path) -> str:
    """Attach `image` to a free loop device (direct I/O where possible); its /dev path."""
    hint = "check that loop devices are free (`losetup -a`) and run again"
    done = run_tool(
        ["losetup", "--find", "--show", "--direct-io=on", image],
        what=f"losetup {image}", hint=hint, check=False,
    )  # fmt: skip
    if done.returncode != 0:  # a host filesystem without O_DIRECT: buffered, then
        done = run_tool(["losetup", "--find", "--show", image], what=f"losetup {image}", hint=hint)
    device = done.stdout.strip()
    if not device.startswith("/dev/loop"):
        raise StorageError(
            f"losetup attached {image} but printed {device!r}, not a loop device: check "
            "`losetup -j` for it and run `pgdyno rollback`."
        )
    return device


def direct_io(device: str, roots: Roots) -> bool | None:
    """Whether the loop device reads and writes its image with direct I/O (None: unknown)."""
    name = Path(device).name
    try:
        return (roots.sys / "block" / name / "loop" / "dio").read_text().strip() == "1"
    except OSError:
        return None


def detach(image: Path, roots: Roots, *, timeout: float = 10.0) -> list[str]:
    """Detach every loop device backed by `image` and wait until the kernel let them go; the
    devices detached ([] when none was attached: already done)."""
    devices = loops_backed_by(image, roots)
    for device in devices:
        done = run_tool(
            ["losetup", "--detach", device], what=f"losetup --detach {device}",
            hint="check what holds it open (`losetup -a`) and run `pgdyno rollback`",
            check=False,
        )  # fmt: skip
        if done.returncode != 0 and device in loops_backed_by(image, roots):
            raise StorageError(
                f"losetup --detach {device} failed ({done.stderr.strip() or 'no output'}): "
                f"check what holds it open (`losetup -a`), then run `pgdyno rollback`."
            )
    # A device still open (udev probing it) is detached by the kernel when it is closed.
    deadline = time.monotonic() + timeout
    while held := loops_backed_by(image, roots):
        if time.monotonic() > deadline:
            raise StorageError(f"{', '.join(held)} still holds {image} after losetup --detach: "
                               f"{_holder_hint(held, roots)}")  # fmt: skip
        time.sleep(0.05)
    return devices


def _holder_hint(devices: list[str], roots: Roots) -> str:
    elsewhere = [found for device in devices for found in mounted_elsewhere(device, roots)]
    if not elsewhere:
        return "check what has it open (`fuser -v DEVICE`), then run `pgdyno rollback`."
    pid, command = elsewhere[0]
    return (
        f"it is still mounted in the mount namespace of process {pid} ({command}), which copied "
        "the mount when it started, and the kernel lets the device go when that namespace ends: "
        "end that process, then run `pgdyno rollback`."
    )


def mounted_elsewhere(device: str, roots: Roots) -> list[tuple[int, str]]:
    """(pid, command) of one process per other mount namespace where `device` is still mounted.

    A process that made a mount namespace of its own (unshare, a container, a systemd unit with
    PrivateTmp) copied every mount there was; where mounts do not propagate, its copy keeps the
    filesystem, and so the loop device, in use after it is unmounted here.
    """
    try:
        numbers = (roots.sys / "block" / Path(device).name / "dev").read_text().strip()
        own = (roots.proc / "self" / "ns" / "mnt").readlink()
    except OSError:
        return []
    found: list[tuple[int, str]] = []
    seen = {own}
    for entry in roots.proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            namespace = (entry / "ns" / "mnt").readlink()
            if namespace in seen:
                continue
            seen.add(namespace)
            mounts = parse_mountinfo((entry / "mountinfo").read_text())
            command = (entry / "comm").read_text().strip()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if any(f"{mount.major}:{mount.minor}" == numbers for mount in mounts):
            found.append((int(entry.name), command))
    return found
