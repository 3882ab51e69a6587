"""The host journal: every host setting pgdyno changes can be put back, even after a crash.

Safety model:

- Nothing is changed unless asked: `HostChanges.apply` is the only writer, and it writes
  only knobs the caller names (from a plan), after `validate` accepted the value.
- Journal first: before a knob is written, a "change" record holding its old value (and,
  for coupled sysctls, the old value of the partner the kernel resets) is appended to the
  journal and fsynced, and so is the directory when the journal is created. A record that
  never reached the disk is for a change that was never made.
- Restore always: `HostChanges` restores every change it made when the `with` block ends,
  however it ends (exception, KeyboardInterrupt, the CLI's Interrupted on SIGTERM), and
  `restore()` can be called in between. Each restore is read back and then marked with a
  "restored" record. SIGINT and SIGTERM are held off (and delivered right after) while a
  change or a restore is half done, so a second Ctrl-C cannot cut one short.
- Crash recovery: after SIGKILL, a crash or power loss, `rollback` restores every change the
  journal holds without a "restored" record, newest first. Changes made before a reboot
  are not written back: a reboot already reset them, and block device names may now belong
  to other disks. `ensure_clean` refuses to start new changes while any are outstanding.
- One writer: whoever changes or restores settings holds an exclusive flock on the journal,
  so `rollback` cannot race a running comparison; the kernel drops the lock of a killed
  process.

Module map: the records and their strict reading are in `journal_format`, the file (flock,
fsync, repair of a torn record) in `journal_file`, the deferred signals in `held_signals`,
and the restore policy and `rollback` in `journal_restore`; this module is the one writer.
"""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from pgdyno.errors import UsageError
from pgdyno.host.held_signals import signals_held
from pgdyno.host.hostlock import HostLock, journal_named, lock_path
from pgdyno.host.journal_file import HostJournalFile, ensure_clean, pending, read, unclean
from pgdyno.host.journal_format import Change, JournalError, boot_id, change_record, now
from pgdyno.host.journal_restore import HostRollback, Restored, RestoreError, restore, rollback
from pgdyno.host.knob_write import write_value
from pgdyno.host.knobs import HostChangeError, Knob, read_value, validate

__all__ = [
    "AppliedKnob",
    "Change",
    "Elsewhere",
    "HostChanges",
    "HostRollback",
    "JournalError",
    "RestoreError",
    "Restored",
    "ensure_clean",
    "pending",
    "pending_elsewhere",
    "rollback",
]


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
        self._journal: HostJournalFile | None = None
        self._host_lock = HostLock(lock_path(proc_root), journal_path)

    def __enter__(self) -> HostChanges:
        if self._journal is not None:
            raise RuntimeError("HostChanges is already in use")
        journal = HostJournalFile.open(
            self.journal_path, create=True, proc_root=self.proc_root, sys_root=self.sys_root
        )
        if journal is None:  # created by another process and removed again at once
            raise JournalError(
                f"the host journal {self.journal_path} vanished while it was being opened: "
                "check what else uses this work directory, then run again."
            )
        # Holding the lock and starting clean: every pending change from now on is ours.
        contents = journal.read()
        if contents.unresolved:
            journal.close()
            raise unclean(self.journal_path, contents)
        self._journal = journal
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

    def _require(self) -> HostJournalFile:
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
            journal.append(change_record(change))
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
