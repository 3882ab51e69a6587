"""The host journal's records: what a change record holds, and reading them back strictly.

Format: JSON lines, append-only (truncated to empty once every change is restored)::

    {"op": "change", "id": 1, "kind": "sysctl", "name": "vm.dirty_ratio", "device": null,
     "path": "/proc/sys/vm/dirty_ratio", "old": "20", "new": "40", "at": "<ISO time>",
     "pid": 4242, "boot_id": "<kernel boot id>",
     "partner": {"name": "vm.dirty_bytes", "path": "/proc/sys/vm/dirty_bytes", "old": "0"}}
    {"op": "restored", "id": 1, "at": "<ISO time>"}

(one line each; "partner" only for coupled sysctls). "kind" is "sysctl", "block" (with
"device") or "thp" (name "enabled" or "defrag", path under
/sys/kernel/mm/transparent_hugepage); journals written before THP existed read as they did.
A damaged line (cut short by a crash or a
cut file, or garbled) is salvaged where its id, knob, path and old value survive, and restored
like any other; otherwise it is unreadable: named to the user, and blocking new changes until
confirmed (pgdyno.journal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.host.knobs import KNOB_KINDS, Knob
from pgdyno.journal import JournalError, Line, Unreadable, now, read_changes

__all__ = [
    "Change",
    "HostJournalContents",
    "JournalError",
    "boot_id",
    "change_record",
    "now",
    "parse",
]


@dataclass(frozen=True, slots=True)
class Change:
    """A journalled change that may be in effect."""

    id: int
    knob: Knob
    old: str  # the value before the change
    new: str  # the value written
    at: str
    pid: int
    boot_id: str | None = None
    partner_old: str | None = None  # coupled sysctls: the partner's value before the change


def boot_id(proc_root: Path) -> str | None:
    """The kernel's boot id: a change made under another one was reset by a reboot."""
    try:
        return (proc_root / "sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def change_record(change: Change) -> dict[str, object]:
    knob = change.knob
    record: dict[str, object] = {
        "op": "change",
        "id": change.id,
        "kind": knob.kind,
        "name": knob.name,
        "device": knob.device,
        "path": str(knob.path),
        "old": change.old,
        "new": change.new,
        "at": change.at,
        "pid": change.pid,
        "boot_id": change.boot_id,
    }
    if knob.partner is not None and change.partner_old is not None:
        record["partner"] = {
            "name": knob.partner.name,
            "path": str(knob.partner.path),
            "old": change.partner_old,
        }
    return record


def restored_record(change_id: int) -> dict[str, object]:
    return {"op": "restored", "id": change_id, "at": now()}


class _Damaged(ValueError):
    """A record that cannot be used as it stands (the reason is the message)."""


@dataclass
class HostJournalContents:
    """A journal read back: its changes, which were restored, and the lines it cannot act on."""

    changes: list[Change] = field(default_factory=list)
    restored: set[int] = field(default_factory=set)
    unreadable: list[Unreadable] = field(default_factory=list)

    @property
    def pending(self) -> list[Change]:
        return [change for change in self.changes if change.id not in self.restored]

    @property
    def unresolved(self) -> int:
        """Changes still to restore, and lines that may record one."""
        return len(self.pending) + len(self.unreadable)

    def next_id(self) -> int:
        return max((change.id for change in self.changes), default=0) + 1


def _get[T](record: dict[str, Any], key: str, kind: type[T]) -> T:
    value = record.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise _Damaged(f"{key!r} is missing or not a {kind.__name__}")
    return value


def _knob(record: dict[str, Any], proc_root: Path, sys_root: Path) -> Knob:
    device = record.get("device")
    if device is not None and not isinstance(device, str):
        raise _Damaged("'device' is not a string")
    text = _get(record, "kind", str)
    kind = next((k for k in KNOB_KINDS if k == text), None)  # as a KnobKind
    if kind is None:
        raise _Damaged(f"unknown kind {text!r}")
    try:
        knob = Knob(
            kind,
            _get(record, "name", str),
            device=device,
            proc_root=proc_root,
            sys_root=sys_root,
        )
    except UsageError as error:
        raise _Damaged(str(error).rstrip(".")) from None
    # Restores only ever write where pgdyno itself would: the path must follow from the name.
    if _get(record, "path", str) != str(knob.path):
        raise _Damaged(f"it names {record['path']} for {knob}, which is {knob.path}")
    return knob


def _partner_old(record: dict[str, Any], knob: Knob) -> str | None:
    partner = record.get("partner")
    if partner is None:
        return None
    if not isinstance(partner, dict) or knob.partner is None:
        raise _Damaged(f"{knob} has no coupled setting")
    if partner.get("path") != str(knob.partner.path):
        raise _Damaged(f"the coupled setting of {knob} is {knob.partner.path}")
    return _get(partner, "old", str)


def _change(record: dict[str, Any], proc_root: Path, sys_root: Path) -> Change:
    knob = _knob(record, proc_root, sys_root)
    boot = record.get("boot_id")
    partner_old = _partner_old(record, knob)
    return Change(
        id=_get(record, "id", int),
        knob=knob,
        old=_get(record, "old", str),
        new=_get(record, "new", str),
        at=_get(record, "at", str),
        pid=_get(record, "pid", int),
        boot_id=boot if isinstance(boot, str) else None,
        partner_old=partner_old,
    )


def _known(fields: dict[str, Any]) -> str | None:
    """What a damaged change line still says, for the message."""
    kind, name = fields.get("kind"), fields.get("name")
    if not isinstance(name, str):
        return None
    device = fields.get("device")
    what = f"{name} of block device {device}" if kind == "block" else f"{kind} {name}"
    if isinstance(fields.get("old"), str):
        return f"{what}, whose old value was {fields['old']!r}"
    return f"{what}, whose old value is lost"


def _salvaged(fields: dict[str, Any], proc_root: Path, sys_root: Path) -> Change:
    """A change from a damaged line's surviving fields: what a restore needs (id, the knob
    and its path, the old value) must all be there. A coupled sysctl whose partner's old value
    is lost is restored alone."""
    record = {"at": "?", "pid": 0, "new": "?", **fields}
    return _change(record, proc_root, sys_root)


def parse(lines: list[Line], path: Path, proc_root: Path, sys_root: Path) -> HostJournalContents:
    """Every record of a journal; damaged lines are salvaged where they still say what a
    restore needs, and kept as unreadable otherwise."""

    def build(fields: dict[str, Any], salvaged: bool) -> Change:
        if salvaged:
            return _salvaged(fields, proc_root, sys_root)
        return _change(fields, proc_root, sys_root)

    found = read_changes(lines, path, build, lambda c: c.id, _known)
    return HostJournalContents(found.changes, found.restored, found.unreadable)
