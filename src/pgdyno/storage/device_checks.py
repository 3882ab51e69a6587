"""Whether a block device the user names may be formatted: never one that is mounted or in
use, even with destroy_device; never one that holds anything without destroy_device.

In use means: the device or one of its partitions is mounted (mountinfo, by device number and
by source), is swap (/proc/swaps), has holders (device mapper, RAID, bcache: /sys/class/block/
<name>/holders), or the kernel refuses to open it exclusively (O_EXCL on a block device fails
with EBUSY while a filesystem or a holder has it). Signatures come from blkid -p.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pgdyno.host.disks import Mount
from pgdyno.storage import blkid
from pgdyno.storage.model import FsRequest, Roots
from pgdyno.storage.mounts import read_mounts


@dataclass(frozen=True)
class Part:
    name: str  # kernel name: "sdb1"
    numbers: str  # "8:17"


@dataclass(frozen=True)
class BlockFacts:
    """A block device as sysfs describes it, with its partitions."""

    name: str  # kernel name: "sdb", "loop3", "nvme0n1"
    numbers: str  # "8:16"
    parts: tuple[Part, ...]
    read_only: bool
    size_bytes: int | None

    def names(self) -> list[str]:
        return [self.name, *(part.name for part in self.parts)]

    def all_numbers(self) -> dict[str, str]:
        return {self.numbers: self.name} | {part.numbers: part.name for part in self.parts}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def block_facts(numbers: str, roots: Roots) -> BlockFacts | None:
    """The device with these numbers, from /sys/dev/block/M:m; None when sysfs lacks it."""
    entry = roots.sys / "dev" / "block" / numbers
    try:
        name = entry.resolve(strict=True).name
    except OSError:
        return None
    parts = []
    for child in sorted(entry.iterdir()) if entry.is_dir() else []:
        child_numbers = _read(child / "dev")
        if (child / "partition").is_file() and child_numbers:
            parts.append(Part(child.name, child_numbers))
    sectors = _read(entry / "size")
    return BlockFacts(
        name=name,
        numbers=numbers,
        parts=tuple(parts),
        read_only=_read(entry / "ro") == "1",
        size_bytes=int(sectors) * 512 if sectors and sectors.isdigit() else None,
    )


def holders(facts: BlockFacts, roots: Roots) -> list[str]:
    """Kernel names of the devices stacked on it or its partitions (dm-0, md0, bcache0)."""
    found = []
    for name in facts.names():
        directory = roots.sys / "class" / "block" / name / "holders"
        found.extend(sorted(p.name for p in directory.iterdir()) if directory.is_dir() else [])
    return found


def parse_swaps(text: str) -> list[str]:
    """/proc/swaps -> the swap files and devices.

    >>> parse_swaps("Filename\\tType\\tSize\\tUsed\\tPriority\\n/dev/vdb1 partition 1 0 -2\\n")
    ['/dev/vdb1']
    """
    return [line.split()[0] for line in text.splitlines()[1:] if line.split()]


def mounted(facts: BlockFacts, mounts: list[Mount]) -> list[tuple[str, str]]:
    """(kernel name, mount point) of each mount of the device or a partition: by device
    number, and by source (btrfs reports an anonymous number)."""
    by_numbers = facts.all_numbers()
    by_source = {f"/dev/{name}": name for name in facts.names()}
    found = []
    for mount in mounts:
        name = by_numbers.get(f"{mount.major}:{mount.minor}") or by_source.get(mount.source)
        if name is not None:
            found.append((name, mount.mount_point))
    return found


def _swapped(facts: BlockFacts, roots: Roots) -> list[str]:
    names = set(facts.names())
    found = []
    for entry in parse_swaps(_read(roots.proc / "swaps") or ""):
        try:
            device = Path(entry).resolve()
        except OSError:
            continue
        if device.parent == Path("/dev") and device.name in names:
            found.append(entry)
    return found


def _exclusive_refusal(device: Path) -> str | None:
    """Why the kernel will not let pgdyno open the device exclusively, or None."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.EBUSY:
            return "the kernel refuses to open it exclusively"
        return f"it cannot be opened ({error.strerror})"
    os.close(fd)
    return None


def _in_use(device: Path, facts: BlockFacts, roots: Roots) -> str | None:
    """The first reason the device is in use, as a clause ("is mounted on /mnt"), or None."""
    for name, point in mounted(facts, read_mounts(roots)):
        if name == facts.name:
            return f"is mounted on {point}"
        return f"has its partition {name} mounted on {point}"
    swap = _swapped(facts, roots)
    if swap:
        return f"is in use as swap ({', '.join(swap)})"
    held = holders(facts, roots)
    if held:
        return f"is held by {', '.join(held)} (device mapper, RAID or bcache)"
    refusal = _exclusive_refusal(device)
    return f"is in use ({refusal})" if refusal else None


def _not_block(device: Path) -> str | None:
    try:
        mode = device.stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    if stat.S_ISBLK(mode):
        return None
    kind = "a directory" if stat.S_ISDIR(mode) else "a regular file" if stat.S_ISREG(mode) else None
    return f"is not a block device (it is {kind or 'another kind of file'})"


def device_problems(request: FsRequest, roots: Roots, min_size_bytes: int) -> list[str]:
    """Why the named device may not be formatted, one sentence each ([]: it may be)."""
    device = request.device
    assert device is not None
    role = request.role
    what = f"the device {device} for {role}"
    problem = _not_block(device)
    if problem is not None:
        return [f"{what} {problem}: name a block device, or give a size for a loop image."]
    rdev = device.stat().st_rdev
    facts = block_facts(f"{os.major(rdev)}:{os.minor(rdev)}", roots)
    if facts is None:
        return [f"{what} is not in /sys/dev/block: check the device name."]
    in_use = _in_use(device, facts, roots)
    if in_use is not None:
        return [
            f"{what} {in_use}: pgdyno never formats a device in use, "
            "even with destroy_device; name another device."
        ]
    problems = []
    if facts.read_only:
        problems.append(f"{what} is read-only: name a writable device.")
    if facts.size_bytes is not None and facts.size_bytes < min_size_bytes:
        problems.append(
            f"{what} holds {facts.size_bytes / 2**20:,.0f} MiB, less than the "
            f"{min_size_bytes / 2**20:,.0f} MiB {request.filesystem} needs: name a larger one."
        )
    if not request.destroy_device:
        found = blkid.probe(device)
        holds = f"holds {found.describe()}" if found else "holds no signature blkid knows"
        problems.append(
            f"{what} {holds}, and pgdyno formats a named device only with destroy_device = "
            "true: set it if everything on the device may be lost."
        )
    return problems
