"""Host knobs: the kernel settings pgdyno may change, and how to read and check them
(`write_value` below writes them).

A knob is a sysctl under /proc/sys, a queue setting of a block device under
/sys/block/<disk>/queue (only those in `BLOCK_SETTINGS`), or a transparent huge pages (THP)
setting under /sys/kernel/mm/transparent_hugepage (only those in `THP_SETTINGS`: an allow-list,
so nothing else under /sys is reachable). This module only knows single
knobs; it never changes anything on its own. The safety model lives in
`pgdyno.undo.host`: a change is journalled (old value, fsynced) before `write_value` is
called, and restored afterwards.

- `validate` runs before anything is journalled: it refuses knobs that do not exist, that
  need root, that are read-only or whose current value cannot be read (it could not be
  restored), and values of the wrong form. Its messages are for the person who wrote the plan.
- `write_value` writes with one plain write(2) on the kernel file (no
  subprocess, no shell) and reads the value back: the kernel may clamp or refuse, and what is
  in effect is what gets reported.
- Some sysctls are coupled: writing vm.dirty_bytes zeroes vm.dirty_ratio and the other way
  round (likewise the dirty_background pair), and the kernel refuses 0 for the *_bytes ones.
  Restoring such a knob alone can fail, so `partner` names the other one and
  `restore_writes` picks the single write that puts the pair back.

Roots are injectable so the pure parts run on a fake tree in tests.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.disks import parse_scheduler

KnobKind = Literal["sysctl", "block", "thp"]
KNOB_KINDS: tuple[KnobKind, ...] = ("sysctl", "block", "thp")

BLOCK_SETTINGS = ("scheduler", "read_ahead_kb")
# Both files read like a block scheduler: the words offered, the active one in brackets
# ("always [madvise] never"). Only these two: khugepaged/ and the rest are not for plans.
THP_SETTINGS = ("enabled", "defrag")
THP_DIR = "kernel/mm/transparent_hugepage"
# Values are one word the file offers (validated against the file itself).
_BRACKETED = ("scheduler", *THP_SETTINGS)

# Pairs where writing one sets the other to 0 (mm/page-writeback.c); the *_bytes ones refuse 0.
COUPLED_SYSCTLS = {
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_ratio": "vm.dirty_bytes",
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
}

_INTEGERS = re.compile(r"-?\d+( -?\d+)*")
_DEVICE = re.compile(r"[^/\s]+")


class HostChangeError(PgdynoError):
    """A host setting could not be read, written or restored. `reason` is the short cause
    ("EINVAL: Invalid argument"), for messages that put it in their own words."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message.rstrip(".")


@dataclass(frozen=True, slots=True)
class Knob:
    """One host setting. A sysctl `name` is dotted ("vm.dirty_ratio") or slashed
    ("net/ipv4/conf/eth0.1/rp_filter", where a dot belongs to an interface name); a block
    knob is a queue setting of the whole disk `device` ("vda", "nvme0n1"); a THP knob is
    "enabled" or "defrag". The /proc and /sys roots are always given: a knob of a recorded host
    is never written on the live one.

    >>> roots = {"proc_root": Path("/x"), "sys_root": Path("/y")}
    >>> Knob("sysctl", "vm.dirty_ratio", **roots).path
    PosixPath('/x/sys/vm/dirty_ratio')
    >>> Knob("sysctl", "net/ipv4/conf/eth0.1/rp_filter", **roots).path
    PosixPath('/x/sys/net/ipv4/conf/eth0.1/rp_filter')
    >>> str(Knob("block", "read_ahead_kb", device="vda", **roots))
    'read_ahead_kb of block device vda'
    >>> Knob.thp("defrag", **roots).path, str(Knob.thp("enabled", **roots))
    (PosixPath('/y/kernel/mm/transparent_hugepage/defrag'), 'transparent_hugepage/enabled')
    """

    kind: KnobKind
    name: str
    device: str | None = None
    proc_root: Path = field(kw_only=True)
    sys_root: Path = field(kw_only=True)

    def __post_init__(self) -> None:
        # Names come from plans and from the journal, and end up in paths root writes to:
        # refuse anything that could step outside /proc/sys or /sys/block/<disk>/queue.
        if self.kind == "sysctl":
            parts = self.name.split("/") if "/" in self.name else self.name.split(".")
            if (
                self.device is not None
                or not all(parts)
                or any(part in (".", "..") for part in parts)
                or any(char.isspace() or char == "\0" for char in self.name)
            ):
                raise UsageError(
                    f"{self.name!r} is not a sysctl name: write it like vm.dirty_ratio."
                )
        elif self.kind == "block":
            if self.name not in BLOCK_SETTINGS:
                raise UsageError(
                    f"{self.name!r} is not a block device setting pgdyno changes: "
                    f"use one of {', '.join(BLOCK_SETTINGS)}."
                )
            if (
                self.device is None
                or not _DEVICE.fullmatch(self.device)
                or self.device in (".", "..")
            ):
                raise UsageError(
                    f"{self.device!r} is not a block device name: name a whole disk as in "
                    "/sys/block, such as vda or nvme0n1."
                )
        elif self.kind == "thp":
            if self.name not in THP_SETTINGS or self.device is not None:
                raise UsageError(
                    f"{self.name!r} is not a transparent huge pages setting pgdyno changes: "
                    f"use one of {', '.join(THP_SETTINGS)}."
                )
        else:
            raise UsageError(
                f"{self.kind!r} is not a kind of host setting: use one of {', '.join(KNOB_KINDS)}."
            )

    @classmethod
    def sysctl(cls, name: str, *, proc_root: Path, sys_root: Path) -> Knob:
        return cls("sysctl", name, proc_root=proc_root, sys_root=sys_root)

    @classmethod
    def block(cls, device: str, name: str, *, proc_root: Path, sys_root: Path) -> Knob:
        return cls("block", name, device=device, proc_root=proc_root, sys_root=sys_root)

    @classmethod
    def thp(cls, name: str, *, proc_root: Path, sys_root: Path) -> Knob:
        """/sys/kernel/mm/transparent_hugepage/`name`, name being "enabled" or "defrag"."""
        return cls("thp", name, proc_root=proc_root, sys_root=sys_root)

    @property
    def path(self) -> Path:
        if self.kind == "sysctl":
            relative = self.name if "/" in self.name else self.name.replace(".", "/")
            return self.proc_root / "sys" / relative
        if self.kind == "thp":
            return self.sys_root / THP_DIR / self.name
        assert self.device is not None
        return self.sys_root / "block" / self.device / "queue" / self.name

    @property
    def partner(self) -> Knob | None:
        """The sysctl that writing this one resets, if any.

        >>> Knob.sysctl("vm.dirty_background_bytes", proc_root=Path("/proc"),
        ...             sys_root=Path("/sys")).partner.name
        'vm.dirty_background_ratio'
        """
        if self.kind != "sysctl":
            return None
        other = COUPLED_SYSCTLS.get(self.name.replace("/", "."))
        return None if other is None else replace(self, name=other)

    def __str__(self) -> str:
        if self.kind == "sysctl":
            return f"sysctl {self.name}"
        if self.kind == "thp":  # also its key among a run's stored host settings
            return f"transparent_hugepage/{self.name}"
        return f"{self.name} of block device {self.device}"


def normalize_sysctl(text: str) -> str:
    """A sysctl value as pgdyno compares and journals it: whitespace runs collapsed.

    >>> normalize_sysctl("4\\t4\\t1\\t7\\n")
    '4 4 1 7'
    """
    return " ".join(text.split())


def offered_schedulers(text: str) -> list[str]:
    """queue/scheduler (or a THP file) -> the words it offers, the active one included.

    >>> offered_schedulers("none [mq-deadline] kyber bfq\\n")
    ['none', 'mq-deadline', 'kyber', 'bfq']
    >>> offered_schedulers("always defer defer+madvise [madvise] never\\n")
    ['always', 'defer', 'defer+madvise', 'madvise', 'never']
    """
    return [word.strip("[]") for word in text.split()]


def _read_text(knob: Knob) -> str:
    try:
        return knob.path.read_text()
    except OSError as error:
        raise HostChangeError(
            f"cannot read {knob} from {knob.path} ({error.strerror}): "
            "check that it exists and is readable.",
            reason=f"cannot read it: {error.strerror}",
        ) from None


def read_value(knob: Knob) -> str:
    """The value in effect, normalized: sysctls whitespace-collapsed, the active scheduler or
    THP word (the one in brackets), read_ahead_kb as integer text."""
    text = _read_text(knob)
    if knob.kind == "sysctl":
        return normalize_sysctl(text)
    if knob.name in _BRACKETED:
        active = parse_scheduler(text)
        if active is None:
            what = "scheduler" if knob.kind == "block" else "value"
            raise HostChangeError(
                f"{knob} reads {text.strip()!r}, which names no active {what}: check {knob.path}."
            )
        return active
    value = text.strip()
    if not value.isdigit():
        raise HostChangeError(f"{knob} reads {value!r}, not a whole number: check the device.")
    return str(int(value))


def as_text(value: object) -> str | None:
    """A plan value (TOML string, integer, boolean or array of those) as text; None if it is
    none of those.

    >>> as_text(True), as_text(40), as_text([4, 4, 1, 7]), as_text(1.5)
    ('1', '40', '4 4 1 7', None)
    """
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, list | tuple) and value:
        words: list[str] = []
        for item in value:
            word = as_text(item) if isinstance(item, int | str) else None
            if word is None:
                return None
            words.append(word)
        return " ".join(words)
    return None


def _is_read_only(path: Path) -> bool:
    # Root passes access(2) on ordinary files whatever the mode, so look at the owner write
    # bit too (kernel files are owned by root); /proc/sys applies its modes even to root.
    return not (path.stat().st_mode & stat.S_IWUSR) or not os.access(path, os.W_OK)


def _check_writable(knob: Knob, *, is_root: bool) -> str:
    """Root and a writable, readable knob; returns its current value."""
    if not is_root:
        raise UsageError(
            f"changing {knob} needs root: run pgdyno as root or remove it from the plan."
        )
    if _is_read_only(knob.path):
        raise UsageError(f"{knob} is read-only ({knob.path}): remove it from the plan.")
    try:
        knob.path.read_bytes()
    except OSError as error:  # write-only knobs such as vm.drop_caches
        raise UsageError(
            f"{knob} cannot be read ({error.strerror}), so pgdyno could not restore it: "
            "remove it from the plan."
        ) from None
    try:
        return read_value(knob)
    except HostChangeError as error:
        raise UsageError(str(error)) from None


def _validate_sysctl(knob: Knob, value: object, *, is_root: bool) -> str:
    if not knob.path.is_file():
        raise UsageError(
            f"the kernel has no {knob} (no file {knob.path}): "
            "remove it from the plan or check the name."
        )
    current = _check_writable(knob, is_root=is_root)
    if knob.partner is not None and not knob.partner.path.is_file():
        raise UsageError(
            f"{knob} resets {knob.partner}, which the kernel does not have "
            f"(no file {knob.partner.path}), so pgdyno could not restore it: "
            "remove it from the plan."
        )
    text = as_text(value)
    numeric = current != "" and _INTEGERS.fullmatch(current) is not None
    if text is not None and numeric:
        text = normalize_sysctl(text)
        if _INTEGERS.fullmatch(text):
            return text
    elif text is not None and "\n" not in text and "\0" not in text:
        return text.strip()
    expected = "whole numbers separated by spaces" if numeric else "one line of text"
    raise UsageError(
        f"{knob} takes {expected} (it is {current!r} now), not {value!r}: "
        "fix the value in the plan."
    )


def _validate_block(knob: Knob, value: object, *, is_root: bool) -> str:
    assert knob.device is not None
    disk = knob.sys_root / "block" / knob.device
    if not disk.is_dir():
        raise UsageError(
            f"there is no block device {knob.device} (no directory {disk}): "
            "name a whole disk as listed in /sys/block."
        )
    if not (disk / "queue").is_dir():
        raise UsageError(
            f"block device {knob.device} has no queue settings (no directory {disk / 'queue'}): "
            "name the whole disk that holds the data directory."
        )
    if not knob.path.is_file():
        raise UsageError(
            f"block device {knob.device} has no {knob.name} setting (no file {knob.path}): "
            "remove it from the plan."
        )
    _check_writable(knob, is_root=is_root)
    if knob.name == "scheduler":
        offered = offered_schedulers(_read_text(knob))
        if isinstance(value, str) and value.strip() in offered:
            return value.strip()
        raise UsageError(
            f"block device {knob.device} offers no scheduler {value!r} "
            f"(it offers {', '.join(offered)}): pick one of those, or load the scheduler's "
            "kernel module first."
        )
    text = None if isinstance(value, bool) else as_text(value)
    if text is not None and text.strip().isdigit():
        return str(int(text.strip()))
    raise UsageError(
        f"{knob} takes a whole number of KiB (0 or more), not {value!r}: fix the value in the plan."
    )


def _validate_thp(knob: Knob, value: object, *, is_root: bool) -> str:
    if not knob.path.is_file():
        raise UsageError(
            f"this kernel has no transparent huge pages setting {knob.name} (no file "
            f"{knob.path}; built without CONFIG_TRANSPARENT_HUGEPAGE?): remove it from the plan."
        )
    _check_writable(knob, is_root=is_root)
    offered = offered_schedulers(_read_text(knob))
    if isinstance(value, str) and value.strip() in offered:
        return value.strip()
    raise UsageError(
        f"{knob} offers no {value!r} (it offers {', '.join(offered)}): pick one of those."
    )


def validate(knob: Knob, value: object, *, is_root: bool) -> str:
    """The normalized text to write for a plan value, or UsageError saying what is wrong.

    Reads the knob's files (existence, mode, current value, offered words); writes nothing.
    """
    if knob.kind == "sysctl":
        return _validate_sysctl(knob, value, is_root=is_root)
    if knob.kind == "thp":
        return _validate_thp(knob, value, is_root=is_root)
    return _validate_block(knob, value, is_root=is_root)


# -- Writing host knobs: one write(2), the value read back ----------------------------------------


def _write_raw(path: Path, data: bytes) -> None:
    """One write(2) on an existing kernel file. O_TRUNC is what a shell's `>` does: the kernel
    ignores it for /proc/sys and /sys, and it keeps plain files (the fake tree) whole. No
    O_CREAT: a knob that does not exist must not be created."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(errno.EIO, f"short write ({written} of {len(data)} bytes)")


def write_value(knob: Knob, value: str) -> str:
    """Write `value` (as returned by `validate`, or an old value read earlier) and return the
    value read back, which is what is in effect."""
    try:
        _write_raw(knob.path, value.encode() + b"\n")
    except OSError as error:
        reason = errno.errorcode.get(error.errno or 0, "error")
        if error.errno in (errno.EACCES, errno.EPERM):
            advice = "run pgdyno as root or remove it from the plan"
        elif error.errno == errno.ENOENT:
            advice = "check that the setting still exists"
        else:
            advice = "fix the value in the plan or remove the setting"
        raise HostChangeError(
            f"the kernel refused {value!r} for {knob} ({reason}: {error.strerror}): {advice}.",
            reason=f"{reason}: {error.strerror}",
        ) from None
    effective = read_value(knob)
    if knob.kind == "sysctl" and knob.name == "vm.nr_hugepages":
        effective = _more_huge_pages(knob, value, effective)
    return effective


HUGE_PAGE_TRIES = 3


def _more_huge_pages(knob: Knob, value: str, effective: str) -> str:
    """The kernel reserves what free 2 MB blocks it finds, fewer than asked on a host whose
    memory is fragmented by the page cache: compact memory (vm.compact_memory, a trigger that
    holds no setting) and ask again, a few times."""
    trigger = knob.proc_root / "sys/vm/compact_memory"
    for _ in range(HUGE_PAGE_TRIES):
        if not (effective.isdigit() and value.isdigit() and int(effective) < int(value)):
            break
        try:
            _write_raw(trigger, b"1\n")
            _write_raw(knob.path, value.encode() + b"\n")
        except OSError:
            break
        effective = read_value(knob)
    return effective


def _zero(value: str) -> bool:
    return value.strip() in ("", "0")


def restore_writes(targets: Sequence[tuple[Knob, str]]) -> list[tuple[Knob, str]]:
    """The writes that put `targets` (knob, old value) back, in order. Knobs are written as
    they are, except coupled pairs: of those only the one that was in use (non-zero) is
    written, which also puts its partner back to 0.

    >>> roots = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
    >>> bytes_ = Knob.sysctl("vm.dirty_bytes", **roots)
    >>> ratio = Knob.sysctl("vm.dirty_ratio", **roots)
    >>> [(k.name, v) for k, v in restore_writes([(bytes_, "0"), (ratio, "20")])]
    [('vm.dirty_ratio', '20')]
    """
    by_path = {knob.path: value for knob, value in targets}
    writes: list[tuple[Knob, str]] = []
    for knob, value in targets:
        partner = knob.partner
        if partner is not None and partner.path in by_path:
            if _zero(value) and not _zero(by_path[partner.path]):
                continue  # writing the partner resets this one
            if _zero(value) and partner.name.endswith("_ratio"):
                continue  # both 0: only the ratio accepts 0
        writes.append((knob, value))
    return writes
