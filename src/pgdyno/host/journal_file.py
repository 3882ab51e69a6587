"""The host journal file: pgdyno.journal (flock, fsync, repair of a torn tail) with the host's
records (pgdyno.host.journal_format) read from it.

Whoever changes or restores settings holds the journal's exclusive flock, so `rollback` cannot
race a running comparison; the kernel drops the lock of a killed process.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.host.journal_format import Change, HostJournalContents, parse
from pgdyno.journal import JournalFile as _File
from pgdyno.journal import peek

WHAT = "the host journal"


def unclean(path: Path, contents: HostJournalContents) -> UsageError:
    if contents.unreadable:
        lines = ", ".join(str(u.line) for u in contents.unreadable)
        return UsageError(
            f"the host journal {path} has damaged lines ({lines}) that may record changes not "
            "restored: run `pgdyno rollback` to restore what it can and name them."
        )
    count = len(contents.pending)
    changes = "change" if count == 1 else "changes"
    return UsageError(
        f"the host journal {path} holds {count} {changes} not restored (left by an interrupted "
        "run or by `pgdyno tune --apply`): run `pgdyno rollback` first."
    )


def read(
    journal_path: Path, *, proc_root: Path, sys_root: Path, check_free: bool
) -> HostJournalContents:
    """The journal as it stands, without taking it; an empty one when there is none."""
    lines = peek(journal_path, what=WHAT, check_free=check_free)
    return parse(lines, journal_path, proc_root, sys_root)


def pending(journal_path: Path, *, proc_root: Path, sys_root: Path) -> list[Change]:
    """Changes not yet restored, in the order they were made; [] when there is no journal."""
    return read(journal_path, proc_root=proc_root, sys_root=sys_root, check_free=False).pending


def ensure_clean(journal_path: Path, *, proc_root: Path, sys_root: Path) -> None:
    """UsageError unless the journal is free and nothing in it is left to restore or confirm."""
    contents = read(journal_path, proc_root=proc_root, sys_root=sys_root, check_free=True)
    if contents.unresolved:
        raise unclean(journal_path, contents)


class HostJournalFile:
    """The host journal, open for appending under an exclusive flock."""

    def __init__(self, file: _File, proc_root: Path, sys_root: Path) -> None:
        self.file = file
        self.path = file.path
        self.proc_root = proc_root
        self.sys_root = sys_root

    @classmethod
    def open(
        cls, path: Path, *, create: bool, proc_root: Path, sys_root: Path
    ) -> HostJournalFile | None:
        file = _File.open(path, what=WHAT, create=create)
        return None if file is None else cls(file, proc_root, sys_root)

    def read(self) -> HostJournalContents:
        return parse(self.file.lines(), self.path, self.proc_root, self.sys_root)

    def append(self, record: dict[str, object]) -> None:
        self.file.append(record)

    def compact(self) -> None:
        """Empty the journal once nothing in it is pending or unreadable."""
        if not self.read().unresolved:
            self.file.empty()

    def set_aside(self) -> Path:
        return self.file.set_aside()

    def close(self) -> None:
        self.file.close()
