"""Host settings (sysctls, transparent huge pages, block-device queue settings): each change
journalled, applied and put back, even after a crash.

Safety model:

- Nothing is changed unless asked: `HostChanges.apply` is the only writer, and it writes
  only knobs the caller names (from a plan), after `validate` accepted the value.
- Journal first: before a knob is written, a "change" record holding its old value (and,
  for coupled sysctls, the old value of the partner the kernel resets) is appended to the
  journal and fsynced (pgdyno.undo.journal). A record that never reached the disk whole is for
  a change that was never made.
- Restore always: `HostChanges` restores every change it made when the `with` block ends,
  however it ends (exception, KeyboardInterrupt, the CLI's Interrupted on SIGTERM), and
  `restore()` can be called in between. Each restore is read back and then marked with a
  "restored" record. SIGINT and SIGTERM are held off (pgdyno.undo.signals) while a change or a
  restore is half done, so a second Ctrl-C cannot cut one short.
- Crash recovery: after SIGKILL, a crash or power loss, `rollback` restores every change the
  journal holds without a "restored" record, newest first, in groups (all changes of one knob,
  and of a coupled pair, together: the oldest old value wins). Changes made before a reboot
  are not written back: a reboot already reset them, and block device names may now belong
  to other disks. `ensure_clean` refuses to start new changes while any are outstanding.
- One writer: whoever changes or restores settings holds an exclusive flock on the journal,
  and the first change of a command takes the host-wide lock (pgdyno.undo.hostlock).

Format: JSON lines, append-only (truncated to empty once every change is restored)::

    {"op": "change", "id": 1, "kind": "sysctl", "name": "vm.dirty_ratio", "device": null,
     "path": "/proc/sys/vm/dirty_ratio", "old": "20", "new": "40", "at": "<ISO time>",
     "pid": 4242, "boot_id": "<kernel boot id>",
     "partner": {"name": "vm.dirty_bytes", "path": "/proc/sys/vm/dirty_bytes", "old": "0"}}
    {"op": "restored", "id": 1, "at": "<ISO time>"}

(one line each; "partner" only for coupled sysctls). "kind" is "sysctl", "block" (with
"device") or "thp" (name "enabled" or "defrag", path under
/sys/kernel/mm/transparent_hugepage); journals written before THP existed read as they did.
A damaged line is salvaged where its id, knob, path and old value survive, and restored like
any other; otherwise it is unreadable: named to the user, and blocking new changes until
confirmed.
"""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.host.knobs import (
    KNOB_KINDS,
    HostChangeError,
    Knob,
    read_value,
    restore_writes,
    validate,
    write_value,
)
from pgdyno.undo import journal
from pgdyno.undo.hostlock import HostLock, journal_named, lock_path
from pgdyno.undo.journal import Contents, Journal, JournalError, Unreadable, Words, now
from pgdyno.undo.signals import signals_held

JOURNAL_NAME = "host-journal.jsonl"
WORDS = Words(
    "the host journal", "change", "restored", "changes not restored",
    "left by an interrupted run or by `pgdyno tune --apply`",
)  # fmt: skip


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


class _Damaged(ValueError):
    """A record that cannot be used as it stands (the reason is the message)."""


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


@dataclass(frozen=True, slots=True)
class HostCodec:
    """The host journal's records (see the module's docstring) for the one journal; a record
    is read against the /proc and /sys it was written for."""

    proc_root: Path
    sys_root: Path
    words: Words = WORDS

    def encode(self, change: Change) -> dict[str, Any]:
        return change_record(change)

    def decode(self, fields: dict[str, Any], salvaged: bool) -> Change:
        if salvaged:
            return _salvaged(fields, self.proc_root, self.sys_root)
        return _change(fields, self.proc_root, self.sys_root)

    def known(self, fields: dict[str, Any]) -> str | None:
        return _known(fields)


HostJournal = Journal[Change]


def read(
    journal_path: Path, *, proc_root: Path, sys_root: Path, check_free: bool
) -> Contents[Change]:
    """The journal as it stands, without taking it; an empty one when there is none."""
    return journal.contents(journal_path, HostCodec(proc_root, sys_root), check_free=check_free)


def unclean(path: Path, found: Contents[Change]) -> UsageError:
    return journal.unclean(path, found, WORDS)


def pending(journal_path: Path, *, proc_root: Path, sys_root: Path) -> list[Change]:
    """Changes not yet restored, in the order they were made; [] when there is no journal."""
    return read(journal_path, proc_root=proc_root, sys_root=sys_root, check_free=False).pending


def ensure_clean(journal_path: Path, *, proc_root: Path, sys_root: Path) -> None:
    """UsageError unless the journal is free and nothing in it is left to restore or confirm."""
    found = read(journal_path, proc_root=proc_root, sys_root=sys_root, check_free=True)
    if found.unresolved:
        raise unclean(journal_path, found)


# -- putting host settings back -----------------------------------------------------------------


class RestoreError(HostChangeError):
    """Some host settings could not be restored; they stay in the journal for rollback.
    `done` is what was restored all the same."""

    def __init__(self, message: str, failed: list[Knob], done: list[Restored]) -> None:
        super().__init__(message)
        self.failed = failed
        self.done = done


@dataclass(frozen=True, slots=True)
class Restored:
    """One setting put back (or found put back by a reboot)."""

    knob: Knob
    old: str  # the value before pgdyno changed it: what it was restored to
    set_to: str | None  # the value pgdyno had set; None if only its coupled partner was set
    found: str | None  # the value in effect before restoring; None if it could not be read
    now: str | None  # read back after restoring; None if it could not be read
    rebooted: bool = False  # the change was undone by a reboot: nothing was written


def _try_read(knob: Knob) -> str | None:
    try:
        return read_value(knob)
    except HostChangeError:
        return None


def _group_key(knob: Knob) -> frozenset[Path]:
    """Changes restored together: all of one knob, and of a coupled pair."""
    partner = knob.partner
    return frozenset((knob.path,) if partner is None else (knob.path, partner.path))


def _undone_by_reboot(change: Change, boot: str | None) -> bool:
    return bool(change.boot_id and boot and change.boot_id != boot)


def _rebooted(change: Change) -> Restored:
    # A block device name may now be another disk: its value would say nothing.
    now = _try_read(change.knob) if change.knob.kind != "block" else None
    return Restored(change.knob, change.old, change.new, None, now, rebooted=True)


def _targets(live: list[Change]) -> dict[Path, tuple[Knob, str]]:
    """The value each path of the group goes back to: the oldest old value wins."""
    targets: dict[Path, tuple[Knob, str]] = {}
    for change in live:
        targets.setdefault(change.knob.path, (change.knob, change.old))
        partner = change.knob.partner
        if partner is not None and change.partner_old is not None:
            targets.setdefault(partner.path, (partner, change.partner_old))
    return targets


def _restore_group(changes: list[Change], boot: str | None) -> list[Restored]:
    """Put back the settings of one group (oldest old value wins), read back, verify."""
    done = [_rebooted(change) for change in changes if _undone_by_reboot(change, boot)]
    live = [change for change in changes if not _undone_by_reboot(change, boot)]
    if not live:
        return done
    targets = _targets(live)
    set_to = {change.knob.path: change.new for change in live}
    found = {path: _try_read(knob) for path, (knob, _old) in targets.items()}
    if any(found[path] != old for path, (_knob, old) in targets.items()):
        for knob, old in restore_writes(list(targets.values())):
            write_value(knob, old)
    for path, (knob, old) in targets.items():
        now = read_value(knob)
        if now != old:
            raise HostChangeError(
                f"{knob} reads {now!r} after restoring {old!r}: check it by hand.",
                reason=f"it reads {now!r} after the write",
            )
        if path in set_to or found[path] != now:  # a partner only if the kernel had reset it
            done.append(Restored(knob, old, set_to.get(path), found[path], now))
    return done


def _newest_first(changes: list[Change]) -> list[list[Change]]:
    groups: dict[frozenset[Path], list[Change]] = {}
    for change in changes:
        groups.setdefault(_group_key(change.knob), []).append(change)
    return sorted(groups.values(), key=lambda group: changes.index(group[-1]))[::-1]


def restore(host_journal: HostJournal, changes: list[Change]) -> list[Restored]:
    """Restore `changes` newest first, mark each restored, and raise RestoreError at the end
    for those that could not be."""
    boot = boot_id(_codec(host_journal).proc_root)
    done: list[Restored] = []
    failed: list[tuple[Knob, str]] = []
    with signals_held():
        for group in _newest_first(changes):
            try:
                restored = _restore_group(group, boot)
                for change in group:
                    host_journal.mark_restored(change)
            except (HostChangeError, JournalError) as error:
                first = group[0]  # its old value is the one being restored
                reason = error.reason if isinstance(error, HostChangeError) else str(error)
                failed.append((first.knob, f"{first.knob} to {first.old!r} ({reason})"))
                continue
            done.extend(restored)
        if failed:
            raise RestoreError(
                f"could not restore {'; '.join(text for _knob, text in failed)}: "
                f"the journal keeps {'it' if len(failed) == 1 else 'them'}, "
                "run `pgdyno rollback` to retry.",
                [knob for knob, _text in failed],
                done,
            )
        host_journal.compact()
    return done


@dataclass(frozen=True)
class HostRollback:
    """What `rollback` did: what it restored, what it could not (`failed`), the damaged lines
    it could not act on, and where the journal went when the user confirmed them."""

    restored: list[Restored]
    failed: RestoreError | None = None
    unreadable: list[Unreadable] = field(default_factory=list)
    set_aside: Path | None = None


def rollback(
    journal_path: Path, *, proc_root: Path, sys_root: Path, confirm_damaged: bool = False
) -> HostRollback:
    """Restore every change the journal holds that was not restored (after a crash or kill),
    newest first, salvaged ones included. Idempotent: with nothing pending it does nothing.

    Damaged lines that say too little to restore are returned, and the journal is kept (new
    changes stay refused) until `confirm_damaged`, once the rest is restored: then it is set
    aside under another name."""
    opened = HostJournal.open(journal_path, HostCodec(proc_root, sys_root), create=False)
    if opened is None:
        return HostRollback([])
    with opened as host_journal:
        found = host_journal.read()
        try:
            done, failed = restore(host_journal, found.pending), None
        except RestoreError as error:
            done, failed = error.done, error
        if found.unreadable and confirm_damaged and failed is None:
            return HostRollback(done, None, [], host_journal.set_aside())
        return HostRollback(done, failed, found.unreadable)


def _codec(host_journal: HostJournal) -> HostCodec:
    codec = host_journal.codec
    if not isinstance(codec, HostCodec):
        raise TypeError(f"{host_journal.path} is not a host journal")
    return codec


# -- changing host settings ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """Another work directory's host journal holding changes not restored."""

    journal: Path
    unresolved: int

    def __str__(self) -> str:
        changes = "change" if self.unresolved == 1 else "changes"
        return (
            f"the host journal {self.journal} of another work directory holds {self.unresolved} "
            f"{changes} not restored (left by an interrupted run or by `pgdyno tune --apply`)"
        )

    def refusal(self) -> UsageError:
        return UsageError(f"{self}: run `pgdyno rollback --workdir {self.journal.parent}` first.")


def pending_elsewhere(journal_path: Path, *, proc_root: Path, sys_root: Path) -> Elsewhere | None:
    """Another work directory's journal holding changes not restored, as the host-settings lock
    file names it, or None. `HostChanges.apply` refuses its first change then; a command that
    will change host settings asks first, before it measures anything, and `pgdyno rollback`
    names it."""
    try:
        text = lock_path(proc_root).read_text(errors="replace")
    except OSError:  # no lock file yet: no command ever changed this host's settings
        return None
    return _left_in(journal_named(text), journal_path, proc_root, sys_root)


def _left_in(
    other: Path | None, journal_path: Path, proc_root: Path, sys_root: Path
) -> Elsewhere | None:
    if other is None or other == journal_path:
        return None
    left = read(other, proc_root=proc_root, sys_root=sys_root, check_free=False)
    return Elsewhere(other, left.unresolved) if left.unresolved else None


@dataclass(frozen=True, slots=True)
class AppliedKnob:
    """What `HostChanges.apply` did: `effective` is the value read back after writing."""

    knob: Knob
    old: str
    requested: str
    effective: str

    @property
    def took_effect(self) -> bool:
        return self.effective == self.requested


class HostChanges:
    """Changes host settings and restores them on exit, whatever the exit.

    The caller runs `ensure_clean(journal_path)` first, then inside `with HostChanges(...) as
    host` calls `host.apply(knob, value)` for each setting of a set, reports each
    `AppliedKnob.effective`, and calls `host.restore()` before the next set; leaving the block
    restores whatever is still changed.
    """

    def __init__(
        self,
        journal_path: Path,
        *,
        is_root: bool | None = None,
        proc_root: Path,
        sys_root: Path,
        keep: bool = False,
    ) -> None:
        self.journal_path = journal_path
        # keep: leave the changes in effect (and pending in the journal) when the block ends,
        # for `pgdyno tune --apply`; `pgdyno rollback` restores them.
        self.keep = keep
        self.is_root = os.geteuid() == 0 if is_root is None else is_root
        self.proc_root = proc_root
        self.sys_root = sys_root
        self._journal: HostJournal | None = None
        self._host_lock = HostLock(lock_path(proc_root), journal_path)

    def __enter__(self) -> HostChanges:
        if self._journal is not None:
            raise RuntimeError("HostChanges is already in use")
        opened = HostJournal.open(
            self.journal_path, HostCodec(self.proc_root, self.sys_root), create=True
        )
        if opened is None:  # created by another process and removed again at once
            raise JournalError(
                f"the host journal {self.journal_path} vanished while it was being opened: "
                "check what else uses this work directory, then run again."
            )
        # Holding the lock and starting clean: every pending change from now on is ours.
        found = opened.read()
        if found.unresolved:
            opened.close()
            raise unclean(self.journal_path, found)
        self._journal = opened
        return self

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        journal = self._require()
        try:
            if not self.keep or exc is not None:
                restore(journal, journal.read().pending)
        finally:
            journal.close()
            self._journal = None
            self._host_lock.release()

    def _lock_host(self) -> None:
        """Before the first change: this command alone changes the host's settings, and no
        other work directory's journal holds changes a killed command left behind."""
        self._host_lock.acquire()
        refusal = _left_in(
            self._host_lock.previous_journal, self.journal_path, self.proc_root, self.sys_root
        )
        if refusal is not None:
            self._host_lock.release()
            raise refusal.refusal()

    def _require(self) -> HostJournal:
        if self._journal is None:
            raise RuntimeError("use HostChanges in a with block")
        return self._journal

    def apply(self, knob: Knob, value: object) -> AppliedKnob:
        """Validate, journal (fsynced), write, read back. A value equal to the current one is
        not written (and not journalled)."""
        journal = self._require()
        root, expected = (
            (knob.proc_root, self.proc_root)
            if knob.kind == "sysctl"
            else (knob.sys_root, self.sys_root)
        )
        if root != expected:
            raise ValueError(f"{knob} lives under {root}, not {expected} like this journal's")
        new = validate(knob, value, is_root=self.is_root)
        self._lock_host()  # before reading the old value: no other command may move it now
        old = read_value(knob)
        if new == old:
            return AppliedKnob(knob, old, new, old)
        partner_old = None if knob.partner is None else read_value(knob.partner)
        with signals_held():
            change = Change(
                id=journal.read().next_id(),
                knob=knob,
                old=old,
                new=new,
                at=now(),
                pid=os.getpid(),
                boot_id=boot_id(self.proc_root),
                partner_old=partner_old,
            )
            journal.append(change)
            try:
                effective = write_value(knob, new)
            except HostChangeError:
                # Refused, so most likely unchanged: put back what may have moved, and mark
                # it; if that fails too, the change stays pending for exit or rollback.
                with suppress(RestoreError):
                    restore(journal, [change])
                raise
        return AppliedKnob(knob, old, new, effective)

    def restore(self) -> list[Restored]:
        """Restore every change made so far (newest first); RestoreError if some cannot be."""
        journal = self._require()
        return restore(journal, journal.read().pending)
