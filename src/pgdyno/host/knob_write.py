"""Writing host knobs: one plain write(2) on the kernel file, the value read back, huge pages
asked for again after compacting memory, and the writes that restore coupled sysctls.

host/knobs.py knows the knobs and checks values first; undo/host.py journals the old value
before `write_value` is called (see host/knobs.py for the whole safety model).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from pgdyno.host.knobs import HostChangeError, Knob, read_value


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
