"""The one journal of every change pgdyno makes and must be able to undo, after a crash too.

Each kind of change gives it a `Codec` (its frozen record to a JSON line and back, and the
words of its messages): host settings (pgdyno.undo.host), PostgreSQL settings
(pgdyno.undo.server) and filesystems (pgdyno.undo.filesystems); `Journal` appends, marks,
compacts and reads for all of them. What this module guarantees for every kind:

- **journal first**: a record is one JSON line, written with one write(2) on a file opened
  O_APPEND and fsynced before the caller makes the change it describes; the directory is
  fsynced when the file is created. A record that never reached the disk is for a change that
  was never made.
- **one writer**: whoever appends holds an exclusive flock for as long as the file is open, so
  a rollback cannot race a running command; the kernel drops the lock of a killed process.
- **a torn tail is dropped on open**: a last line without its newline is a record whose write
  never completed. Since every record is on the disk before its change is made, that change was
  never made: the line is cut off with one log line, as a write-ahead log ends at its last whole
  record (https://www.postgresql.org/docs/current/wal-internals.html), and readers never see
  it. Padding a crash left after the last newline goes too.
- **damage inside a complete line needs the user**: a line that ends with its newline but does
  not decode (garbled, or cut and then ended by an older pgdyno) is `salvage`d where its fields
  survive whole, and otherwise named.
- **reading never stops at damage**: every line comes back with its number, parsed or not; the
  kind of journal decides what an unreadable line means (pgdyno's rule: a change it cannot
  read whole is *unresolved*, named to the user with what is known of it, and blocks new
  changes until the user confirms it was dealt with, see `set_aside`).
- **strict JSON** on the way in (no NaN or Infinity), and errors that name the file.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, Self

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.textsafe import strict_json

_WHITESPACE = " \t\r"
_PADDING = b" \t\r\0"
_log = logging.getLogger(__name__)


class JournalError(PgdynoError):
    """A journal cannot be opened, read or written."""


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a journal as read back: its record, or the text of a damaged line."""

    number: int  # 1-based, as an editor shows it
    text: str  # decoded leniently, for salvage and messages
    record: Mapping[str, Any] | None  # None when the line is not a whole JSON object
    last: bool  # the last line of the file: the only one a crash can cut short

    @property
    def damaged(self) -> bool:
        return self.record is None


def now() -> str:
    """The time stamp of a record."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def split_tail(data: bytes) -> tuple[bytes, bytes]:
    """A journal's whole lines, and what follows its last newline: a torn record, padding, or
    nothing.

    >>> split_tail(b'{"id": 1}\\n{"id": 2}\\n{"op": "chan')
    (b'{"id": 1}\\n{"id": 2}\\n', b'{"op": "chan')
    >>> split_tail(b'{"id": 1}\\n')
    (b'{"id": 1}\\n', b'')
    """
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def torn_note(what: str, path: Path, torn: bytes) -> str:
    """The one log line for a dropped torn tail.

    >>> print(torn_note("the test journal", Path("/j"), b'{"op": "change", "na'))
    ... # doctest: +NORMALIZE_WHITESPACE
    the test journal /j ended in a record whose write never completed ({"op": "change", "na):
    its change was never made, so the record was dropped
    """
    text = torn.strip(_PADDING).decode("utf-8", errors="replace")
    shown = text if len(text) <= 60 else text[:57] + "..."
    return (
        f"{what} {path} ended in a record whose write never completed ({shown}): its change "
        "was never made, so the record was dropped"
    )


def parse_lines(data: bytes) -> list[Line]:
    """Every non-blank line of a journal's bytes, parsed when it is a whole JSON object.

    NUL bytes are what some file systems leave after a crash: a line of them is blank.

    >>> [(l.number, l.damaged, l.last) for l in parse_lines(b'{"a": 1}\\n\\n{"a": 2')]
    [(1, False, False), (3, True, True)]
    """
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1].strip(b" \t\r\0") == b"":
        raw_lines.pop()  # what follows the final newline: nothing, or padding
    lines: list[Line] = []
    for number, raw in enumerate(raw_lines, 1):
        stripped = raw.strip(b" \t\r\0")
        if not stripped:
            continue
        text = stripped.decode("utf-8", errors="replace")
        record: Mapping[str, Any] | None
        try:
            loaded = json.loads(stripped.decode("utf-8"))
            record = loaded if isinstance(loaded, dict) else None
        except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
            record = None
        lines.append(Line(number, text, record, number == len(raw_lines)))
    return lines


def salvage(text: str) -> dict[str, Any]:
    """The fields of a damaged record that can still be read whole, in order, up to the first
    one that cannot: a value counts only when nothing of it can be missing (a string with its
    closing quote, an object with its closing brace, a number followed by more text).

    >>> salvage('{"op": "change", "id": 12, "name": "vm.swappiness", "old": "6')
    {'op': 'change', 'id': 12, 'name': 'vm.swappiness'}
    >>> salvage('{"op": "change", "id": 1')  # 1 could be the start of 12
    {'op': 'change'}
    >>> salvage('{"server": {"kind": "sandbox"}, "old": null, "x')
    {'server': {'kind': 'sandbox'}, 'old': None}
    >>> salvage('garbage')
    {}
    """
    decoder = json.JSONDecoder()
    fields: dict[str, Any] = {}

    def skip(index: int) -> int:
        while index < len(text) and text[index] in _WHITESPACE:
            index += 1
        return index

    index = skip(0)
    if not text.startswith("{", index):
        return fields
    index += 1
    while True:
        try:
            key, index = decoder.raw_decode(text, skip(index))
            index = skip(index)
            if not isinstance(key, str) or not text.startswith(":", index):
                return fields
            value, end = decoder.raw_decode(text, skip(index + 1))
        except ValueError:
            return fields
        after = skip(end)
        if after >= len(text) and not isinstance(value, str | dict | list):
            return fields  # a number or a word may go on past the cut
        fields[key] = value
        if not text.startswith(",", after):
            return fields
        index = after + 1


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Closing:
    """A context manager that closes what it holds however the block ends."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class JournalFile(Closing):
    """A journal open for appending under an exclusive flock (a context manager).

    `what` names the journal in messages ("the host journal", "the PostgreSQL journal").
    """

    def __init__(self, path: Path, fd: int, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = fd

    @classmethod
    def open(cls, path: Path, *, what: str, create: bool) -> JournalFile | None:
        """The journal, locked and with a torn tail repaired; None when it does not exist and
        `create` is False. UsageError when another process holds it."""
        flags = os.O_RDWR | os.O_APPEND
        fd = _open_existing(path, flags, what)
        if fd is None and create:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                _fsync_directory(path.parent)  # so the new file survives a power loss
            except FileExistsError:
                fd = _open_existing(path, flags, what)
            except OSError as error:
                raise JournalError(
                    f"cannot create {what} {path} ({error.strerror}): check the work directory "
                    "and its permissions."
                ) from None
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise in_use(path, what) from None
        journal = cls(path, fd, what)
        try:
            journal._repair()
        except BaseException:
            journal.close()
            raise
        return journal

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise RuntimeError(f"{self.path} is closed")
        return self._fd

    def _repair(self) -> None:
        """Cut a torn tail (see the module's docstring) and padding after the last newline,
        so that the file holds whole records only and the next one starts a line of its own."""
        data = _read_all(self.fd)
        whole, torn = split_tail(data)
        if len(whole) == len(data):
            return
        try:
            os.ftruncate(self.fd, len(whole))
            os.fsync(self.fd)
        except OSError as error:
            raise self._write_error(error) from None
        if torn.strip(_PADDING):
            _log.warning("%s", torn_note(self.what, self.path, torn))

    def _write_error(self, error: OSError) -> JournalError:
        return JournalError(
            f"cannot write {self.what} {self.path} ({error.strerror}): free disk space or fix "
            "permissions; the change it was to record was not made."
        )

    def lines(self) -> list[Line]:
        return parse_lines(split_tail(_read_all(self.fd))[0])

    def append(self, record: Mapping[str, Any]) -> None:
        """One record, on a line of its own, on the disk when this returns."""
        line = (strict_json(dict(record), indent=None) + "\n").encode()
        _fault_point("before")
        try:
            if os.write(self.fd, line) != len(line):
                raise OSError(0, "short write")
            os.fsync(self.fd)
        except OSError as error:
            raise self._write_error(error) from None
        _fault_point("after")

    def empty(self) -> None:
        """Truncate to nothing: the caller has found nothing left to restore or confirm."""
        try:
            os.ftruncate(self.fd, 0)
            os.fsync(self.fd)
        except OSError:
            pass  # a longer journal is still correct

    def set_aside(self) -> Path:
        """Keep the file for the record under a new name and start over with none: for damaged
        lines the user has confirmed as dealt with. Returns the new name."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        kept = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        try:
            self.path.rename(kept)
            _fsync_directory(self.path.parent)
        except OSError as error:
            raise JournalError(
                f"cannot move {self.what} {self.path} aside ({error.strerror}): move it away "
                "by hand."
            ) from None
        return kept

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None


def in_use(path: Path, what: str) -> UsageError:
    return UsageError(
        f"another pgdyno command is using {what} {path}: wait for it to finish (stopping it "
        "restores its changes), then run again."
    )


def _open_existing(path: Path, flags: int, what: str) -> int | None:
    try:
        # O_NOFOLLOW: root appends to this file, so a symlink planted in its place is refused.
        return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise JournalError(
            f"cannot open {what} {path} ({error.strerror}): check the work directory and its "
            "permissions."
        ) from None


def peek(path: Path, *, what: str, check_free: bool = False) -> list[Line]:
    """The lines of a journal without taking it ([] when there is none): for listings,
    messages and checks. With `check_free`, UsageError while another process holds it."""
    fd = _open_existing(path, os.O_RDONLY, what)
    if fd is None:
        return []
    try:
        if check_free:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise in_use(path, what) from None
        return parse_lines(split_tail(_read_all(fd))[0])
    finally:
        os.close(fd)


# -- fault injection ---------------------------------------------------------------------------
# The crash-point sweep (tests/faults/test_crash_points.py) kills a real pgdyno with SIGKILL at
# one journal write, the way storage engines test recovery: PGDYNO_CRASH_AT=before:N or after:N
# (N counts the writes of the process, from 1). A record comes before its change, so "before N"
# falls between change N-1 and record N, and "after N" between record N and its change.
CRASH_ENV = "PGDYNO_CRASH_AT"
_writes = {"before": 0, "after": 0}


def _fault_point(when: str) -> None:
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    _writes[when] += 1
    if wanted == f"{when}:{_writes[when]}":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


# -- what a kind of journal could not read -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A line of a journal that may record a change pgdyno cannot restore on its own."""

    path: Path
    line: int
    why: str  # "it is cut short", "it is not a JSON record", "'old' is missing"
    known: str | None = None  # what can still be read of the change ("sysctl vm.swappiness")

    def describe(self) -> str:
        known = f"; it names {self.known}" if self.known else ""
        return f"line {self.line} of {self.path} ({self.why}{known})"


def fields_of(line: Line, ops: tuple[str, ...]) -> dict[str, Any]:
    """A line's record, or what `salvage` reads of a damaged one; for a line cut before its
    "op" was whole, the op is the one of `ops` whose opening the text begins, if only one does.

    >>> ops = ("change", "restored")
    >>> fields_of(Line(3, '{"op": "re', None, True), ops)
    {'op': 'restored'}
    >>> fields_of(Line(3, '{"op', None, True), ops)
    {}
    """
    if line.record is not None:
        return dict(line.record)
    fields = salvage(line.text)
    if "op" not in fields:
        openings = [op for op in ops if json.dumps({"op": op}).startswith(line.text)]
        if len(openings) == 1:
            fields["op"] = openings[0]
    return fields


def why_damaged(line: Line) -> str:
    """
    >>> why_damaged(Line(2, '{"op": "change", "id": 3, "na', None, False))
    'it is cut short'
    >>> why_damaged(Line(2, 'garbage', None, True))
    'it is not a JSON record'
    """
    if line.record is not None:
        return "it is not a record pgdyno knows"
    if line.text.startswith("{"):  # began as a record: readable up to where it stops
        return "it is cut short"
    return "it is not a JSON record"


class JournalDamaged(PgdynoError):
    """Journal lines pgdyno cannot act on: named, kept, and blocking new changes until the user
    confirms them with `pgdyno rollback --confirm-damaged`."""

    def __init__(self, lines: list[Unreadable], restored_note: str = "") -> None:
        self.lines = lines
        named = "; ".join(line.describe() for line in lines)
        which = "a damaged journal line" if len(lines) == 1 else f"{len(lines)} damaged lines"
        super().__init__(
            f"{restored_note}{which} may record a change pgdyno cannot restore ({named}): "
            "check that setting by hand and set it back, then run `pgdyno rollback "
            "--confirm-damaged` to set the damaged journal aside."
        )


# -- one journal, any kind of change -----------------------------------------------------------


class Identified(Protocol):
    """A change as a kind's frozen record holds it: its id in the journal comes first."""

    @property
    def id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Words:
    """How a kind of journal names itself and its changes in messages."""

    what: str  # "the host journal"
    noun: str  # one change, for "holds 2 changes not restored"
    undone: str  # "restored", "undone"
    at_risk: str  # what a damaged line may record: "changes not restored"
    left_by: str  # "left by an interrupted run"


class Codec[C: Identified](Protocol):
    """What a kind of change tells the one journal: how its frozen record becomes a JSON line
    and back, and the words of its messages."""

    @property
    def words(self) -> Words: ...

    def encode(self, change: C) -> dict[str, Any]:
        """The "change" record of `change`, as written."""
        ...

    def decode(self, fields: dict[str, Any], salvaged: bool) -> C:
        """A change from a record's fields (or a damaged line's salvaged ones); ValueError
        naming what is missing."""
        ...

    def known(self, fields: dict[str, Any]) -> str | None:
        """What a damaged line still says of its change, for the message."""
        ...


@dataclass
class Contents[C: Identified]:
    """A journal read back: its changes in order, the ids restored (or undone), and the lines
    it cannot act on."""

    changes: list[C]
    restored: set[int]
    unreadable: list[Unreadable]

    @property
    def pending(self) -> list[C]:
        """Changes not yet restored, in the order they were made."""
        return [change for change in self.changes if change.id not in self.restored]

    @property
    def unresolved(self) -> int:
        """Changes still to restore, and lines that may record one."""
        return len(self.pending) + len(self.unreadable)

    def next_id(self) -> int:
        return max((change.id for change in self.changes), default=0) + 1


def decode[C: Identified](lines: list[Line], path: Path, codec: Codec[C]) -> Contents[C]:
    """The "change" and "restored" records of a journal's lines. `codec.decode` makes a change
    or raises ValueError naming what is missing; a damaged line is salvaged, and one that cannot
    be decoded is unreadable, with what `codec.known` says of it. A damaged "restored" line
    leaves its change pending (restoring it again is harmless), and one naming no change above
    is of no use either way."""
    found: Contents[C] = Contents([], set(), [])
    ids: set[int] = set()
    for line in lines:
        fields = fields_of(line, ("change", "restored"))
        op = fields.get("op")
        if op == "restored":
            change_id = fields.get("id")
            if line.record is not None and isinstance(change_id, int) and change_id in ids:
                found.restored.add(change_id)
            continue
        try:
            if op != "change":
                raise ValueError(f"unknown op {op!r}")
            change = codec.decode(fields, line.record is None)
            if change.id in ids:
                raise ValueError(f"change {change.id} is recorded twice")
        except ValueError as error:
            why = why_damaged(line) if line.record is None else str(error)
            found.unreadable.append(Unreadable(path, line.number, why, codec.known(fields)))
            continue
        ids.add(change.id)
        found.changes.append(change)
    return found


def contents[C: Identified](
    path: Path, codec: Codec[C], *, check_free: bool = False
) -> Contents[C]:
    """The journal as it stands, without taking it (empty when there is none): for listings,
    messages and checks. With `check_free`, UsageError while another process holds it."""
    return decode(peek(path, what=codec.words.what, check_free=check_free), path, codec)


def unclean[C: Identified](path: Path, found: Contents[C], words: Words) -> UsageError:
    """Why new changes are refused while `found` holds changes or damaged lines."""
    if found.unreadable:
        lines = ", ".join(str(u.line) for u in found.unreadable)
        verb = "restore" if words.undone == "restored" else "undo"
        return UsageError(
            f"{words.what} {path} has damaged lines ({lines}) that may record {words.at_risk}: "
            f"run `pgdyno rollback` to {verb} what it can and name them."
        )
    count = len(found.pending)
    noun = words.noun if count == 1 else f"{words.noun}s"
    return UsageError(
        f"{words.what} {path} holds {count} {noun} not {words.undone} ({words.left_by}): run "
        "`pgdyno rollback` first."
    )


def restored_record(change_id: int) -> dict[str, object]:
    return {"op": "restored", "id": change_id, "at": now()}


class Journal[C: Identified](Closing):
    """A journal of one kind of change, open for appending under its exclusive flock (a context
    manager): append a change before making it, mark it restored, compact, set aside."""

    def __init__(self, file: JournalFile, codec: Codec[C]) -> None:
        self.file = file
        self.codec = codec
        self.path = file.path

    @classmethod
    def open(cls, path: Path, codec: Codec[C], *, create: bool) -> Self | None:
        """The journal, locked, its torn tail dropped; None when it does not exist and `create`
        is False. UsageError when another process holds it."""
        file = JournalFile.open(path, what=codec.words.what, create=create)
        return None if file is None else cls(file, codec)

    def read(self) -> Contents[C]:
        return decode(self.file.lines(), self.path, self.codec)

    def next_id(self) -> int:
        return self.read().next_id()

    def append(self, change: C) -> None:
        """The change's record, fsynced: call before making the change."""
        self.file.append(self.codec.encode(change))

    def mark_restored(self, change: C) -> None:
        self.file.append(restored_record(change.id))

    def ensure_clean(self) -> None:
        """UsageError while the journal holds changes not restored or damaged lines."""
        found = self.read()
        if found.unresolved:
            raise unclean(self.path, found, self.codec.words)

    def compact(self) -> None:
        """Empty the file once nothing in it is pending or unreadable (it is then of no use)."""
        if not self.read().unresolved:
            self.file.empty()

    def set_aside(self) -> Path:
        return self.file.set_aside()

    def close(self) -> None:
        self.file.close()
