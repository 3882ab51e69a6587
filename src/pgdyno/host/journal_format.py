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
A damaged last line is a record torn
by a crash and is dropped; damage anywhere else is an error, since pgdyno could then not
tell what is still changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.knobs import KNOB_KINDS, Knob


class JournalError(PgdynoError):
    """The host journal is damaged or cannot be written."""


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


def now() -> str:
    """The time stamp of a record."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


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


def _damaged(path: Path, number: int, why: str) -> JournalError:
    return JournalError(
        f"line {number} of the host journal {path} is damaged ({why}), so pgdyno cannot tell "
        "which host settings still need restoring: compare the settings it lists with the "
        "host by hand, then move the file away."
    )


@dataclass
class Contents:
    """A journal read back: its changes, which were restored, and where it is intact."""

    changes: list[Change] = field(default_factory=list)
    restored: set[int] = field(default_factory=set)
    good_size: int = 0  # bytes up to the end of the last intact record
    torn: bool = False  # a damaged last line follows good_size
    newline_missing: bool = False  # the last intact record lacks its newline

    @property
    def pending(self) -> list[Change]:
        return [change for change in self.changes if change.id not in self.restored]

    def next_id(self) -> int:
        return max((change.id for change in self.changes), default=0) + 1


def _get[T](record: dict[str, Any], key: str, kind: type[T], where: tuple[Path, int]) -> T:
    value = record.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise _damaged(*where, f"{key!r} is missing or not a {kind.__name__}")
    return value


def _knob(record: dict[str, Any], where: tuple[Path, int], proc_root: Path, sys_root: Path) -> Knob:
    device = record.get("device")
    if device is not None and not isinstance(device, str):
        raise _damaged(*where, "'device' is not a string")
    text = _get(record, "kind", str, where)
    kind = next((k for k in KNOB_KINDS if k == text), None)  # as a KnobKind
    if kind is None:
        raise _damaged(*where, f"unknown kind {text!r}")
    try:
        knob = Knob(
            kind,
            _get(record, "name", str, where),
            device=device,
            proc_root=proc_root,
            sys_root=sys_root,
        )
    except UsageError as error:
        raise _damaged(*where, str(error).rstrip(".")) from None
    # Restores only ever write where pgdyno itself would: the path must follow from the name.
    if _get(record, "path", str, where) != str(knob.path):
        raise _damaged(*where, f"it names {record['path']} for {knob}, which is {knob.path}")
    return knob


def _partner_old(record: dict[str, Any], knob: Knob, where: tuple[Path, int]) -> str | None:
    partner = record.get("partner")
    if partner is None:
        return None
    if not isinstance(partner, dict) or knob.partner is None:
        raise _damaged(*where, f"{knob} has no coupled setting")
    if partner.get("path") != str(knob.partner.path):
        raise _damaged(*where, f"the coupled setting of {knob} is {knob.partner.path}")
    return _get(partner, "old", str, where)


def _change(
    record: dict[str, Any], where: tuple[Path, int], proc_root: Path, sys_root: Path
) -> Change:
    knob = _knob(record, where, proc_root, sys_root)
    boot = record.get("boot_id")
    partner_old = _partner_old(record, knob, where)
    return Change(
        id=_get(record, "id", int, where),
        knob=knob,
        old=_get(record, "old", str, where),
        new=_get(record, "new", str, where),
        at=_get(record, "at", str, where),
        pid=_get(record, "pid", int, where),
        boot_id=boot if isinstance(boot, str) else None,
        partner_old=partner_old,
    )


def parse(data: bytes, path: Path, proc_root: Path, sys_root: Path) -> Contents:
    """Every record of a journal's bytes; JournalError names the first damaged line."""
    contents = Contents()
    ids: set[int] = set()
    lines = data.split(b"\n")
    offset = 0
    for number, line in enumerate(lines, 1):
        last = number == len(lines)  # the part after the final newline ("" if there is one)
        end = offset + len(line) + (0 if last else 1)
        where = (path, number)
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
                if not b"".join(lines[number:]).strip(b" \t\r\0"):
                    # Torn by a crash while appending (maybe padded with NULs by the file
                    # system). A torn change record's change was never made (records come
                    # first); a torn "restored" record leaves its change pending, and
                    # restoring that again is harmless.
                    contents.torn = True
                    break
                raise _damaged(*where, "not a JSON record") from None
            if not isinstance(record, dict):
                raise _damaged(*where, "not a JSON object")
            op = record.get("op")
            if op == "change":
                change = _change(record, where, proc_root, sys_root)
                if change.id in ids:
                    raise _damaged(*where, f"change {change.id} is recorded twice")
                ids.add(change.id)
                contents.changes.append(change)
            elif op == "restored":
                change_id = _get(record, "id", int, where)
                if change_id not in ids:
                    raise _damaged(*where, f"it restores change {change_id}, which is not above")
                contents.restored.add(change_id)
            else:
                raise _damaged(*where, f"unknown op {op!r}")
            contents.newline_missing = last
        contents.good_size = end
        offset = end
    return contents
