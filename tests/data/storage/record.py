"""Record the real output the storage parsers are tested on (tests/unit/test_storage_parsers.py).

Run as root on a host with e2fsprogs, xfsprogs, btrfs-progs, util-linux and fdisk (sfdisk):

    .venv/bin/python tests/data/storage/record.py

blkid/*.json: `blkid -p -o export` on image files holding each kind of signature (no loop
device needed: blkid probes a file as it probes a device). mountinfo/*.txt: the
/proc/self/mountinfo line of each filesystem mounted on a loop device with options, and whether
the ext4 driver made /sys/fs/ext4/<loop> for it (loop devices and mounts, all taken down
again). proc_filesystems.txt: this kernel's /proc/filesystems.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent
MIB = 2**20


def sh(
    *argv: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=check)


def image(directory: Path, name: str, mib: int) -> Path:
    path = directory / f"{name}.img"
    with path.open("wb") as file:
        file.truncate(mib * MIB)
    return path


def host() -> str:
    util_linux = sh("blkid", "--version").stdout.strip()
    return f"{platform.platform()}; {util_linux}; {datetime.now(UTC):%Y-%m-%d}"


def signatures(directory: Path) -> dict[str, Path]:
    """One image per case, named as the case."""
    made = {}
    made["ext4"] = image(directory, "ext4", 120)
    sh("mkfs.ext4", "-q", "-F", "-L", "pg data$1", str(made["ext4"]))
    made["ext3"] = image(directory, "ext3", 120)
    sh("mkfs.ext3", "-q", "-F", str(made["ext3"]))
    made["xfs"] = image(directory, "xfs", 300)
    sh("mkfs.xfs", "-q", "-f", str(made["xfs"]))
    made["btrfs"] = image(directory, "btrfs", 120)
    sh("mkfs.btrfs", "-q", "-f", str(made["btrfs"]))
    made["swap"] = image(directory, "swap", 64)
    sh("mkswap", str(made["swap"]))
    made["gpt"] = image(directory, "gpt", 64)
    sh("sfdisk", "-q", str(made["gpt"]), stdin="label: gpt\n,32M\n,\n")
    made["dos"] = image(directory, "dos", 64)
    sh("sfdisk", "-q", str(made["dos"]), stdin="label: dos\n,32M\n")
    made["empty"] = image(directory, "empty", 64)
    # an XFS image with an ext4 superblock copied over its second KiB: two filesystems
    made["ambivalent"] = image(directory, "ambivalent", 300)
    sh("mkfs.xfs", "-q", "-f", str(made["ambivalent"]))
    with made["ext4"].open("rb") as source, made["ambivalent"].open("r+b") as target:
        source.seek(1024)
        target.seek(1024)
        target.write(source.read(1024))
    return made


def record_blkid(directory: Path) -> None:
    out = HERE / "blkid"
    out.mkdir(exist_ok=True)
    recorded = host()
    for case, path in signatures(directory).items():
        done = sh("blkid", "-p", "-o", "export", str(path), check=False)
        text = json.dumps(
            {
                "command": f"blkid -p -o export {path.name}",
                "returncode": done.returncode,
                "stdout": done.stdout,
                "stderr": done.stderr,
                "recorded": recorded,
            },
            indent=2,
        )
        (out / f"{case}.json").write_text(text + "\n")


# (filesystem, mkfs argv, mount type, mount options, MiB)
MOUNTS = [
    ("ext4", ["mkfs.ext4", "-q", "-F"], "ext4", "noatime,nobarrier", 120),
    ("ext3", ["mkfs.ext3", "-q", "-F"], "ext3", "noatime", 120),
    ("xfs", ["mkfs.xfs", "-q", "-f"], "xfs", "noatime,logbsize=256k", 300),
    ("btrfs", ["mkfs.btrfs", "-q", "-f"], "btrfs", "noatime,compress=zstd", 120),
]


def record_mounts(directory: Path) -> None:
    out = HERE / "mountinfo"
    out.mkdir(exist_ok=True)
    for name, mkfs, fstype, options, mib in MOUNTS:
        path = image(directory, f"mnt-{name}", mib)
        device = sh("losetup", "--find", "--show", str(path)).stdout.strip()
        target = directory / f"mnt-{name}"
        target.mkdir()
        try:
            sh(*mkfs, device)
            sh("mount", "-t", fstype, "-o", options, device, str(target))
            try:
                lines = Path("/proc/self/mountinfo").read_text().splitlines()
                line = next(line for line in lines if f" {target} " in line)
                ext4_dir = Path("/sys/fs/ext4") / Path(device).name
                (out / f"{name}.txt").write_text(
                    f"# mount -t {fstype} -o {options} on {host()}\n"
                    f"# /sys/fs/ext4/{Path(device).name} exists: {ext4_dir.is_dir()}\n"
                    f"{line}\n"
                )
            finally:
                sh("umount", str(target))
        finally:
            sh("losetup", "--detach", device)


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("record.py makes loop devices and mounts: run it as root.")
    (HERE / "proc_filesystems.txt").write_text(Path("/proc/filesystems").read_text())
    directory = Path(tempfile.mkdtemp(prefix="pgdyno-record-"))
    try:
        record_blkid(directory)
        record_mounts(directory)
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
