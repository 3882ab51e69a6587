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

Format: JSON lines, append-only (truncated to empty once every change is restored)::

    {"op": "change", "id": 1, "kind": "sysctl", "name": "vm.dirty_ratio", "device": null,
     "path": "/proc/sys/vm/dirty_ratio", "old": "20", "new": "40", "at": "<ISO time>",
     "pid": 4242, "boot_id": "<kernel boot id>",
     "partner": {"name": "vm.dirty_bytes", "path": "/proc/sys/vm/dirty_bytes", "old": "0"}}
    {"op": "restored", "id": 1, "at": "<ISO time>"}

(one line each; "partner" only for coupled sysctls). A damaged last line is a record torn
by a crash and is dropped; damage anywhere else is an error, since pgdyno could then not
tell what is still changed.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.hostlock import HostLock, lock_path
from pgdyno.host.knobs import (
    HostChangeError,
    Knob,
    read_value,
    restore_writes,
    validate,
    write_value,
)
from pgdyno.textsafe import strict_json


class JournalError(PgdynoError):
    """The host journal is damaged or cannot be written."""


class RestoreError(HostChangeError):
    """Some host settings could not be restored; they stay in the journal for rollback."""

    def __init__(self, message: str, failed: list[Knob]) -> None:
        super().__init__(message)
        self.failed = failed


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


@dataclass(frozen=True, slots=True)
class Applied:
    """What `HostChanges.apply` did: `effective` is the value read back after writing."""

    knob: Knob
    old: str
    requested: str
    effective: str

    @property
    def took_effect(self) -> bool:
        return self.effective == self.requested


@dataclass(frozen=True, slots=True)
class Restored:
    """One setting put back (or found put back by a reboot)."""

    knob: Knob
    old: str  # the value before pgdyno changed it: what it was restored to
    set_to: str | None  # the value pgdyno had set; None if only its coupled partner was set
    found: str | None  # the value in effect before restoring; None if it could not be read
    now: str | None  # read back after restoring; None if it could not be read
    rebooted: bool = False  # the change was undone by a reboot: nothing was written


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _boot_id(proc_root: Path) -> str | None:
    try:
        return (proc_root / "sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _in_use(path: Path) -> UsageError:
    return UsageError(
        f"another pgdyno process is changing host settings with the journal {path}: "
        "wait for it to finish (stopping it restores its changes)."
    )


def _unclean(path: Path, count: int) -> UsageError:
    changes = "change" if count == 1 else "changes"
    return UsageError(
        f"the host journal {path} holds {count} {changes} not restored after an interrupted "
        "run: run `pgdyno rollback` first."
    )


def _damaged(path: Path, number: int, why: str) -> JournalError:
    return JournalError(
        f"line {number} of the host journal {path} is damaged ({why}), so pgdyno cannot tell "
        "which host settings still need restoring: compare the settings it lists with the "
        "host by hand, then move the file away."
    )


# Held-off signals -------------------------------------------------------------------------

_Handler = Callable[[int, FrameType | None], Any] | int
_holding = False


@contextmanager
def _signals_held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM until the block ends, then deliver them to the handlers in
    place before (which raise KeyboardInterrupt or Interrupted as usual). Handlers can only be
    set from the main thread; elsewhere, and when nested, this does nothing."""
    global _holding
    if _holding or threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        caught.append(signum)

    previous: dict[signal.Signals, _Handler] = {}
    _holding = True
    try:
        for number in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(number)
            if handler is None:
                continue  # set outside Python: it could not be put back
            previous[number] = handler
            signal.signal(number, hold)
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _holding = False
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


# Reading the journal ----------------------------------------------------------------------


@dataclass
class _Contents:
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


def _change(
    record: dict[str, Any], where: tuple[Path, int], proc_root: Path, sys_root: Path
) -> Change:
    device = record.get("device")
    if device is not None and not isinstance(device, str):
        raise _damaged(*where, "'device' is not a string")
    kind = _get(record, "kind", str, where)
    if kind not in ("sysctl", "block"):
        raise _damaged(*where, f"unknown kind {kind!r}")
    try:
        knob = Knob(
            "sysctl" if kind == "sysctl" else "block",
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
    boot_id = record.get("boot_id")
    partner_old = None
    partner = record.get("partner")
    if partner is not None:
        if not isinstance(partner, dict) or knob.partner is None:
            raise _damaged(*where, f"{knob} has no coupled setting")
        if partner.get("path") != str(knob.partner.path):
            raise _damaged(*where, f"the coupled setting of {knob} is {knob.partner.path}")
        partner_old = _get(partner, "old", str, where)
    return Change(
        id=_get(record, "id", int, where),
        knob=knob,
        old=_get(record, "old", str, where),
        new=_get(record, "new", str, where),
        at=_get(record, "at", str, where),
        pid=_get(record, "pid", int, where),
        boot_id=boot_id if isinstance(boot_id, str) else None,
        partner_old=partner_old,
    )


def _parse(data: bytes, path: Path, proc_root: Path, sys_root: Path) -> _Contents:
    contents = _Contents()
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


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _open_existing(path: Path, flags: int) -> int | None:
    try:
        # O_NOFOLLOW: root appends to this file, so a symlink planted in its place is refused.
        return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise JournalError(
            f"cannot open the host journal {path} ({error.strerror}): "
            "check the work directory and its permissions."
        ) from None


def pending(
    journal_path: Path, *, proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")
) -> list[Change]:
    """Changes not yet restored, in the order they were made; [] when there is no journal."""
    fd = _open_existing(journal_path, os.O_RDONLY)
    if fd is None:
        return []
    try:
        return _parse(_read_all(fd), journal_path, proc_root, sys_root).pending
    finally:
        os.close(fd)


def ensure_clean(
    journal_path: Path, *, proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")
) -> None:
    """UsageError unless the journal is free and every change in it has been restored."""
    fd = _open_existing(journal_path, os.O_RDONLY)
    if fd is None:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(journal_path) from None
        count = len(_parse(_read_all(fd), journal_path, proc_root, sys_root).pending)
    finally:
        os.close(fd)
    if count:
        raise _unclean(journal_path, count)


# Writing the journal ----------------------------------------------------------------------


class _Journal:
    """The journal file, open for appending under an exclusive flock."""

    def __init__(self, path: Path, fd: int, proc_root: Path, sys_root: Path) -> None:
        self.path = path
        self.fd = fd
        self.proc_root = proc_root
        self.sys_root = sys_root

    @classmethod
    def open(cls, path: Path, *, create: bool, proc_root: Path, sys_root: Path) -> _Journal | None:
        flags = os.O_RDWR | os.O_APPEND
        fd = _open_existing(path, flags)
        if fd is None and create:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                _fsync_directory(path.parent)  # so the new file survives a power loss
            except FileExistsError:
                fd = _open_existing(path, flags)
            except OSError as error:
                raise JournalError(
                    f"cannot create the host journal {path} ({error.strerror}): "
                    "check the work directory and its permissions."
                ) from None
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _in_use(path) from None
        journal = cls(path, fd, proc_root, sys_root)
        try:
            journal._repair()
        except BaseException:
            journal.close()
            raise
        return journal

    def _repair(self) -> None:
        """Drop a torn last record and end the file with a newline, so appends stay whole."""
        contents = self.read()
        if not (contents.torn or contents.newline_missing):
            return
        try:
            os.ftruncate(self.fd, contents.good_size)
            if contents.newline_missing:
                os.write(self.fd, b"\n")
            os.fsync(self.fd)
        except OSError as error:
            raise self._write_error(error) from None

    def _write_error(self, error: OSError) -> JournalError:
        return JournalError(
            f"cannot write the host journal {self.path} ({error.strerror}): "
            "free disk space or fix permissions; the host setting was not changed."
        )

    def read(self) -> _Contents:
        return _parse(_read_all(self.fd), self.path, self.proc_root, self.sys_root)

    def append(self, record: dict[str, object]) -> None:
        line = (strict_json(record, indent=None) + "\n").encode()
        try:
            if os.write(self.fd, line) != len(line):
                raise OSError(0, "short write")
            os.fsync(self.fd)
        except OSError as error:
            raise self._write_error(error) from None

    def compact(self) -> None:
        """Empty the journal once nothing in it is pending."""
        if not self.read().pending:
            try:
                os.ftruncate(self.fd, 0)
                os.fsync(self.fd)
            except OSError:
                pass  # a longer journal is still correct

    def close(self) -> None:
        os.close(self.fd)  # releases the lock


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _change_record(change: Change) -> dict[str, object]:
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


# Restoring --------------------------------------------------------------------------------


def _try_read(knob: Knob) -> str | None:
    try:
        return read_value(knob)
    except HostChangeError:
        return None


def _group_key(knob: Knob) -> frozenset[Path]:
    """Changes restored together: all of one knob, and of a coupled pair."""
    partner = knob.partner
    return frozenset((knob.path,) if partner is None else (knob.path, partner.path))


def _restore_group(changes: list[Change], boot_id: str | None) -> list[Restored]:
    """Put back the settings of one group (oldest old value wins), read back, verify."""
    done: list[Restored] = []
    live: list[Change] = []
    for change in changes:
        if change.boot_id and boot_id and change.boot_id != boot_id:
            now = _try_read(change.knob) if change.knob.kind == "sysctl" else None
            done.append(Restored(change.knob, change.old, change.new, None, now, rebooted=True))
        else:
            live.append(change)
    if not live:
        return done
    targets: dict[Path, tuple[Knob, str]] = {}
    set_to: dict[Path, str] = {}
    for change in live:
        targets.setdefault(change.knob.path, (change.knob, change.old))
        partner = change.knob.partner
        if partner is not None and change.partner_old is not None:
            targets.setdefault(partner.path, (partner, change.partner_old))
        set_to[change.knob.path] = change.new
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


def _restore(journal: _Journal, changes: list[Change]) -> list[Restored]:
    """Restore `changes` newest first, mark each restored, and raise RestoreError at the end
    for those that could not be."""
    groups: dict[frozenset[Path], list[Change]] = {}
    for change in changes:
        groups.setdefault(_group_key(change.knob), []).append(change)
    newest_first = sorted(groups.values(), key=lambda group: changes.index(group[-1]))[::-1]
    boot_id = _boot_id(journal.proc_root)
    done: list[Restored] = []
    failed: list[tuple[Knob, str]] = []
    with _signals_held():
        for group in newest_first:
            try:
                restored = _restore_group(group, boot_id)
                for change in group:
                    journal.append({"op": "restored", "id": change.id, "at": _now()})
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
            )
        journal.compact()
    return done


def rollback(
    journal_path: Path, *, proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")
) -> list[Restored]:
    """Restore every change the journal holds that was not restored (after a crash or kill),
    newest first. Idempotent: with nothing pending it does nothing and returns []."""
    journal = _Journal.open(journal_path, create=False, proc_root=proc_root, sys_root=sys_root)
    if journal is None:
        return []
    try:
        return _restore(journal, journal.read().pending)
    finally:
        journal.close()


class HostChanges:
    """Changes host settings and restores them on exit, whatever the exit.

    The caller runs `ensure_clean(journal_path)` first, then inside `with HostChanges(...) as
    host` calls `host.apply(knob, value)` for each setting of a set, reports each
    `Applied.effective`, and calls `host.restore()` before the next set; leaving the block
    restores whatever is still changed.
    """

    def __init__(
        self,
        journal_path: Path,
        *,
        is_root: bool | None = None,
        proc_root: Path = Path("/proc"),
        sys_root: Path = Path("/sys"),
    ) -> None:
        self.journal_path = journal_path
        self.is_root = os.geteuid() == 0 if is_root is None else is_root
        self.proc_root = proc_root
        self.sys_root = sys_root
        self._journal: _Journal | None = None
        self._host_lock = HostLock(lock_path(proc_root), journal_path)

    def __enter__(self) -> HostChanges:
        if self._journal is not None:
            raise RuntimeError("HostChanges is already in use")
        journal = _Journal.open(
            self.journal_path, create=True, proc_root=self.proc_root, sys_root=self.sys_root
        )
        if journal is None:  # created by another process and removed again at once
            raise JournalError(
                f"the host journal {self.journal_path} vanished while it was being opened: "
                "check what else uses this work directory, then run again."
            )
        # Holding the lock and starting clean: every pending change from now on is ours.
        count = len(journal.read().pending)
        if count:
            journal.close()
            raise _unclean(self.journal_path, count)
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
            _restore(journal, journal.read().pending)
        finally:
            journal.close()
            self._journal = None
            self._host_lock.release()

    def _lock_host(self) -> None:
        """Before the first change: this command alone changes the host's settings, and no
        other work directory's journal holds changes a killed command left behind."""
        self._host_lock.acquire()
        other = self._host_lock.previous_journal
        if other is None or other == self.journal_path:
            return
        left = len(pending(other, proc_root=self.proc_root, sys_root=self.sys_root))
        if left:
            self._host_lock.release()
            changes = "change" if left == 1 else "changes"
            raise UsageError(
                f"the host journal {other} of another work directory holds {left} {changes} "
                f"not restored after an interrupted run: run `pgdyno rollback --workdir "
                f"{other.parent}` first."
            )

    def _require(self) -> _Journal:
        if self._journal is None:
            raise RuntimeError("use HostChanges in a with block")
        return self._journal

    def apply(self, knob: Knob, value: object) -> Applied:
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
            return Applied(knob, old, new, old)
        partner_old = None if knob.partner is None else read_value(knob.partner)
        with _signals_held():
            change = Change(
                id=journal.read().next_id(),
                knob=knob,
                old=old,
                new=new,
                at=_now(),
                pid=os.getpid(),
                boot_id=_boot_id(self.proc_root),
                partner_old=partner_old,
            )
            journal.append(_change_record(change))
            try:
                effective = write_value(knob, new)
            except HostChangeError:
                # Refused, so most likely unchanged: put back what may have moved, and mark
                # it; if that fails too, the change stays pending for exit or rollback.
                with suppress(RestoreError):
                    _restore(journal, [change])
                raise
        return Applied(knob, old, new, effective)

    def restore(self) -> list[Restored]:
        """Restore every change made so far (newest first); RestoreError if some cannot be."""
        journal = self._require()
        return _restore(journal, journal.read().pending)
