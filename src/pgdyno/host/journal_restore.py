"""Putting host settings back: the restore policy, used on every way out and by `rollback`.

Changes are restored newest first, in groups (all changes of one knob, and of a coupled pair,
together: the oldest old value wins). Each restore is read back and then marked with a
"restored" record. Changes made before a reboot are not written back: a reboot already reset
them, and block device names may now belong to other disks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.host.held_signals import signals_held
from pgdyno.host.journal_file import HostJournalFile
from pgdyno.host.journal_format import Change, JournalError, boot_id, restored_record
from pgdyno.host.knob_write import restore_writes, write_value
from pgdyno.host.knobs import HostChangeError, Knob, read_value
from pgdyno.journal import Unreadable


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


def restore(journal: HostJournalFile, changes: list[Change]) -> list[Restored]:
    """Restore `changes` newest first, mark each restored, and raise RestoreError at the end
    for those that could not be."""
    boot = boot_id(journal.proc_root)
    done: list[Restored] = []
    failed: list[tuple[Knob, str]] = []
    with signals_held():
        for group in _newest_first(changes):
            try:
                restored = _restore_group(group, boot)
                for change in group:
                    journal.append(restored_record(change.id))
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
        journal.compact()
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
    journal = HostJournalFile.open(
        journal_path, create=False, proc_root=proc_root, sys_root=sys_root
    )
    if journal is None:
        return HostRollback([])
    try:
        contents = journal.read()
        try:
            done, failed = restore(journal, contents.pending), None
        except RestoreError as error:
            done, failed = error.done, error
        if contents.unreadable and confirm_damaged and failed is None:
            return HostRollback(done, None, [], journal.set_aside())
        return HostRollback(done, failed, contents.unreadable)
    finally:
        journal.close()
