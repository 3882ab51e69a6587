"""What a device holds: filesystem, partition table, LVM or RAID signatures (util-linux blkid).

Why `blkid -p -o export DEV` and not `wipefs -n`: pgdyno needs a yes/no answer with a name
for the message, not a list of offsets to erase (mkfs's force flag does the erasing). blkid's
low-level probe (-p) reads the device itself, never the blkid cache, and says the three answers
apart by its exit status: 0 and KEY=VALUE lines (TYPE and USAGE for a filesystem, LVM2_member
or linux_raid_member, PTTYPE for a partition table), 2 for nothing found, 8 for signatures that
contradict each other (several filesystems: refused like any signature). wipefs would list
every magic string it finds, one per line with its offset, which is more than a refusal needs
and says nothing by exit status. The export format's values are escaped with a backslash, so
they parse as one line each whatever a label holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgdyno.process import last_line
from pgdyno.storage.tools import run_tool
from pgdyno.undo.filesystems import StorageError

NOTHING = 2  # blkid's exit status when it finds no signature
AMBIVALENT = 8  # several signatures that contradict each other


@dataclass(frozen=True)
class Signature:
    """What blkid found on a device (empty fields: not reported)."""

    type: str = ""  # ext4, xfs, LVM2_member, linux_raid_member, swap, crypto_LUKS, ...
    usage: str = ""  # filesystem, raid, crypto, other
    pttype: str = ""  # gpt, dos: a partition table
    label: str = ""
    ambivalent: bool = False  # several signatures, none of them certain

    def describe(self) -> str:
        """
        >>> Signature(type="ext4", usage="filesystem", label="pg").describe()
        "a filesystem (ext4, labelled 'pg')"
        >>> Signature(pttype="gpt").describe()
        'a partition table (gpt)'
        >>> Signature(type="LVM2_member", usage="raid").describe()
        'a signature of LVM2_member (raid)'
        """
        if self.ambivalent:
            return "several contradicting signatures (blkid -p is ambivalent)"
        if self.pttype and not self.type:
            return f"a partition table ({self.pttype})"
        label = f", labelled {self.label!r}" if self.label else ""
        if self.usage == "filesystem":
            return f"a filesystem ({self.type}{label})"
        return f"a signature of {self.type} ({self.usage or 'unknown use'}{label})"


def _unescape(value: str) -> str:
    r"""blkid's export format puts a backslash before special characters.

    >>> _unescape(r"my\ disk\\x")
    'my disk\\x'
    """
    out = []
    chars = iter(value)
    for char in chars:
        out.append(next(chars, "") if char == "\\" else char)
    return "".join(out)


def parse_export(text: str) -> dict[str, str]:
    """`blkid -o export` -> its KEY=VALUE pairs (the first device's, when it lists several).

    >>> parse_export("DEVNAME=/dev/loop0\\nUUID=1b2\\nTYPE=ext4\\nUSAGE=filesystem\\n")
    {'DEVNAME': '/dev/loop0', 'UUID': '1b2', 'TYPE': 'ext4', 'USAGE': 'filesystem'}
    """
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if pairs:
                break  # a blank line ends one device's block
            continue
        key, sep, value = line.partition("=")
        if sep:
            pairs[key.strip()] = _unescape(value)
    return pairs


def signature_of(pairs: dict[str, str]) -> Signature | None:
    """None when the probe names neither a type nor a partition table."""
    found = Signature(
        type=pairs.get("TYPE", ""),
        usage=pairs.get("USAGE", ""),
        pttype=pairs.get("PTTYPE", ""),
        label=pairs.get("LABEL", ""),
    )
    return found if found.type or found.pttype else None


def interpret(returncode: int, stdout: str, stderr: str, device: str) -> Signature | None:
    """blkid's answer: a signature, None for nothing found; StorageError when it failed."""
    if returncode == NOTHING:
        return None
    if returncode == AMBIVALENT:
        return Signature(ambivalent=True)
    if returncode != 0:
        raise StorageError(
            f"blkid could not probe {device} (exit code {returncode}: "
            f"{last_line(stderr or stdout)}): check that the device can be read."
        )
    return signature_of(parse_export(stdout))


def probe(device: Path) -> Signature | None:
    """The signature `device` holds, or None (blkid -p: the device itself, never a cache)."""
    done = run_tool(
        ["blkid", "-p", "-o", "export", device], what=f"blkid -p {device}",
        hint="check that the device can be read", timeout=60, check=False,
    )  # fmt: skip
    return interpret(done.returncode, done.stdout, done.stderr, str(device))
