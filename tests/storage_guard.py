"""What a storage test checks afterwards: no loop device backed by a file of its work directory
(/sys/block/loop*/loop/backing_file), no mount in it (/proc/self/mountinfo), nothing in the
storage journal; `take_down` removes what was left with plain commands, independent of pgdyno.
The fixture `storage_workdir` (tests/conftest.py) runs it after every storage test."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pgdyno.host.disks import parse_mountinfo
from pgdyno.storage.journal import journal_path
from pgdyno.storage.layer import pending_storage


def loops_under(directory: Path) -> list[str]:
    found = []
    for entry in Path("/sys/block").glob("loop*"):
        try:
            backing = (entry / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.startswith(f"{directory}/"):
            found.append(f"/dev/{entry.name}")
    return found


def mounts_under(directory: Path) -> list[str]:
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return [m.mount_point for m in mounts if m.mount_point.startswith(f"{directory}/")]


def take_down(directory: Path) -> list[str]:
    """Whatever pgdyno left in `directory`, removed with plain commands; what it found."""
    left = [*mounts_under(directory), *loops_under(directory)]
    for point in sorted(mounts_under(directory), key=len, reverse=True):
        if subprocess.run(["umount", point], check=False).returncode != 0:
            subprocess.run(["umount", "-l", point], check=False)
    for device in loops_under(directory):
        subprocess.run(["losetup", "--detach", device], check=False)
    return left


def assert_nothing_left(workdir: Path) -> None:
    assert not mounts_under(workdir) and not loops_under(workdir)
    assert not (workdir / "storage").exists()  # images, mount points and the directory: gone
    assert pending_storage(workdir) == []
    journal = journal_path(workdir)
    assert not journal.exists() or journal.read_bytes() == b""
