"""Which filesystems the kernel can mount: /proc/filesystems, and the modules it could load.

A filesystem is offered when /proc/filesystems lists it (built in, or its module loaded), or
when /lib/modules/<release>/modules.dep or modules.builtin names its module (mount loads it).
The parsers are pure and tested on recorded files.

ext3: since Linux 4.3 there is no ext3 driver; the ext4 driver registers the type "ext3" and
mounts ext3 filesystems. Where no "ext3" type is offered, pgdyno mounts an ext3 filesystem as
ext4 (the same driver, without ext3's feature checks). Which driver mounted a filesystem is read
after the mount: the ext4 driver makes /sys/fs/ext4/<device> for each filesystem it mounts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pgdyno.storage.filesystems import FsKind
from pgdyno.storage.model import Roots

_MODULE = re.compile(r"(?:^|/)([^/:\s]+)\.ko(?:\.[a-z0-9]+)?:?$")
# The release that dropped the ext3 driver (its type is served by ext4's since).
EXT3_DRIVER_REMOVED = (4, 3)


def parse_filesystems(text: str) -> frozenset[str]:
    """/proc/filesystems -> the filesystem types the kernel has registered.

    >>> sorted(parse_filesystems("nodev\\tsysfs\\n\\text3\\n\\text4\\n"))
    ['ext3', 'ext4', 'sysfs']
    """
    return frozenset(line.split()[-1] for line in text.splitlines() if line.split())


def parse_modules(text: str) -> frozenset[str]:
    """modules.dep or modules.builtin -> module names (file names without .ko and compression).

    >>> sorted(parse_modules("kernel/fs/xfs/xfs.ko.zst: kernel/lib/libcrc32c.ko.zst\\n"
    ...                      "kernel/fs/ext4/ext4.ko\\n"))
    ['ext4', 'xfs']
    """
    names = set()
    for line in text.splitlines():
        first = line.split()[0] if line.split() else ""
        match = _MODULE.search(first)
        if match:
            names.add(match.group(1).replace("-", "_"))
    return frozenset(names)


def release_version(release: str) -> tuple[int, int] | None:
    """
    >>> release_version("6.18.44-fc-v657"), release_version("4.2.0"), release_version("x")
    ((6, 18), (4, 2), None)
    """
    match = re.match(r"(\d+)\.(\d+)", release)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


@dataclass(frozen=True)
class KernelSupport:
    """What the kernel offers for one filesystem: the type to give mount -t, and how."""

    mount_type: str | None  # None: the kernel offers none of the filesystem's types
    how: str  # "registered", "module", or why nothing was found
    modules_known: bool  # whether the module lists could be read


def registered(roots: Roots) -> frozenset[str]:
    return parse_filesystems(_read(roots.proc / "filesystems") or "")


def loadable(roots: Roots) -> frozenset[str] | None:
    """Module names of modules.dep and modules.builtin; None when neither can be read."""
    base = roots.modules / roots.release
    texts = [_read(base / name) for name in ("modules.dep", "modules.builtin")]
    if all(text is None for text in texts):
        return None
    return frozenset().union(*(parse_modules(text) for text in texts if text is not None))


def support(kind: FsKind, roots: Roots) -> KernelSupport:
    """The first of the filesystem's mount types the kernel offers: registered, or with a
    module of that name to load (ext3 falls back to ext4, its last type)."""
    types = registered(roots)
    modules = loadable(roots)
    for mount_type in kind.mount_types:
        if mount_type in types:
            return KernelSupport(mount_type, "registered", modules is not None)
        if modules is not None and mount_type in modules:
            return KernelSupport(mount_type, "module", True)
    return KernelSupport(None, "absent", modules is not None)


def ext3_note(release: str, mount_type: str) -> str:
    """What an ext3 request really measures on this kernel."""
    if mount_type != "ext3":
        return (
            "this kernel offers no ext3 filesystem type, so pgdyno mounts the ext3 filesystem "
            "with the ext4 driver as ext4 (ext3's on-disk format, ext4's code)."
        )
    version = release_version(release)
    if version is not None and version >= EXT3_DRIVER_REMOVED:
        return (
            f"Linux {version[0]}.{version[1]} mounts ext3 with the ext4 driver (the ext3 driver "
            "was removed in 4.3): the on-disk format is ext3's, the code is ext4's."
        )
    return "ext3 is mounted by this kernel's ext3 type."


def driver_of(fstype: str, kernel_name: str, roots: Roots) -> str:
    """The driver that mounted a filesystem: ext4 for ext2/ext3 it serves, else the type."""
    if fstype in ("ext2", "ext3") and (roots.sys / "fs" / "ext4" / kernel_name).is_dir():
        return "ext4"
    return fstype
