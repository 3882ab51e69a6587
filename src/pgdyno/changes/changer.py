"""Changing one server's settings: the one owner of `ALTER SYSTEM` for tune and compare.

`ServerChanger.apply(values)`, in order, so that nothing is left half done:

1. the server is ours to change: no change of this journal pending on it (an interrupted
   command's), no marker of another pgdyno (pgdyno.changes.alter);
2. values already in effect are left alone; without consent to restart, a value that needs a
   restart is not written at all (it is reported as skipped);
3. before anything that needs a restart, what the server would refuse at start is checked
   (pgdyno.changes.preflight), huge pages included for a server on this host;
4. each `ALTER SYSTEM` is journalled first; then pg_file_settings is asked whether the files
   hold anything the server would refuse: if so, every change goes back before the error;
5. a reload (waited for until the server has read its files), or a restart that never leaves
   the server down (pgdyno.undo.server).

`undo()` takes back every pending change of this server (pgdyno.undo.server).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.changes import alter, preflight
from pgdyno.changes.hugepages import start_facts
from pgdyno.changes.live import by_lower_name, same_value
from pgdyno.errors import UsageError
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.server import reloaded
from pgdyno.postgres.settings import SettingMeta, load_settings_meta
from pgdyno.undo.handles import ServerHandle
from pgdyno.undo.server import (
    MARKER,
    PgChange,
    PgJournal,
    ServerRestored,
    put_back,
    restart,
    restore_server,
)


@dataclass
class ServerApplied(alter.Altered):
    """What `ServerChanger.apply` did: what `alter_system` did, and more."""

    needs_consent: list[str] = field(default_factory=list)  # need a restart: not written
    restarted: bool = False


class ServerChanger:
    """Changes the settings of the server `handle` reaches, through `journal`."""

    def __init__(
        self,
        handle: ServerHandle,
        journal: PgJournal,
        log: Callable[[str], None],
        *,
        marker: str,
        proc_root: Path,
    ) -> None:
        self.handle = handle
        self.journal = journal
        self.log = log
        self.marker = marker
        self.proc_root = proc_root

    def claim(self, continuing: Mapping[str, str] | None = None) -> None:
        """UsageError unless the server is free for this command's changes.

        `continuing`: the values this command writes. Pending changes that are all part of
        them (the same value for each, still in postgresql.auto.conf as written) are an earlier
        apply of the same advice, such as `tune --apply` without the consent to restart that
        its "run again with --yes" asks for: this command continues it, and `rollback` takes
        back both."""
        pending = self.journal.pending(self.handle.identity)
        unreadable = self.journal.read().unreadable
        if unreadable:
            raise UsageError(
                f"{self.journal.path} has damaged lines that may record changes not restored: "
                "run `pgdyno rollback` first."
            )
        with connect(self.handle.dsn, self.handle.password) as client:
            if pending and not self._continues(client, pending, continuing):
                raise UsageError(
                    f"{self.handle.label} still has settings an interrupted or earlier pgdyno "
                    "command changed (`pgdyno tune --apply` or `compare`): run `pgdyno "
                    "rollback` first."
                )
            alter.check_owner(client, self.handle.label, self.marker)
        if pending:
            kept = ", ".join(c.name for c in pending if c.name != MARKER)
            self.log(f"continuing the earlier apply on {self.handle.label}: {kept} stay as it "
                     "set them")  # fmt: skip

    def _continues(
        self, client: Client, pending: list[PgChange], continuing: Mapping[str, str] | None
    ) -> bool:
        """Whether the pending changes are an earlier apply of `continuing`, still in effect
        in postgresql.auto.conf (not half taken back by a rollback that waits for a restart)."""
        if continuing is None or not _part_of(pending, continuing, self.marker):
            return False
        written = alter.auto_conf(client)
        return all(written.get(c.name) == c.new for c in pending)

    def apply(self, values: Mapping[str, str]) -> ServerApplied:
        handle = self.handle
        with connect(handle.dsn, handle.password) as client:
            meta = load_settings_meta(client)
            named = _named(values, meta)
            same = {n: n in meta and same_value(meta[n], v) for n, v in named.items()}
            restart_names = [n for n in named if n in meta and meta[n].needs_restart]
            restart_names = [n for n in restart_names if not same[n]]
            skipped: list[str] = []
            if restart_names and handle.restart is None:
                skipped = restart_names
                named = {n: v for n, v in named.items() if n not in restart_names}
            elif restart_names:
                self._preflight(client, meta, named)
            before = alter.file_errors(client, meta)
            if before and restart_names:
                self._refuse_broken_files(before)
            altered = alter.alter_system(
                client, self.journal, handle, named, same=same, marker=self.marker
            )
            self._refuse_file_errors(client, meta, altered.changed, before)
        result = ServerApplied(**vars(altered), needs_consent=skipped)
        needs_restart = sorted(c.name for c in altered.changed if c.restart)
        if needs_restart:
            restart(handle, self.journal, needs_restart, self.log)
            result.restarted = True
        elif altered.changed:
            reloaded(handle.dsn, handle.password, handle.label)
        return result

    def _preflight(
        self, client: Client, meta: Mapping[str, SettingMeta], values: Mapping[str, str]
    ) -> None:
        host: dict[str, Any] = {}
        if self.handle.data_dir is not None:  # on this host: its huge pages are ours to count
            now = preflight.future_settings(meta, {})
            then = preflight.future_settings(meta, values)
            host = start_facts(client, self.proc_root, now, then)
        preflight.check_start(self.handle.label, meta, values, host)

    def _refuse_broken_files(self, errors: list[tuple[str, str]]) -> None:
        name, error = errors[0]
        raise UsageError(
            f"the configuration files of {self.handle.label} already hold a line PostgreSQL "
            f"would refuse at the restart ({name}: {error}): fix it first; nothing was changed."
        )

    def _refuse_file_errors(
        self,
        client: Client,
        meta: Mapping[str, SettingMeta],
        changed: list[PgChange],
        before: list[tuple[str, str]],
    ) -> None:
        errors = [e for e in alter.file_errors(client, meta) if e not in before]
        if not errors or not changed:
            return
        name, error = errors[0]
        pending = self.journal.pending(self.handle.identity)
        put_back(client, pending)
        for change in pending:
            self.journal.mark_restored(change)
        self.journal.compact()
        raise UsageError(
            f"{self.handle.label} would refuse its configuration files after pgdyno's changes "
            f"({name}: {error}): pgdyno took its changes back; fix the value or the file."
        )

    def undo(self, *, restart_ok: bool) -> ServerRestored:
        """Take back every pending change of this server; a restart only with `restart_ok`
        (and consent) when pending_restart says a restored setting waits for one."""
        handle = self.handle if restart_ok else self.handle.without_restart()
        return restore_server(self.journal, handle, self.log)


def _named(values: Mapping[str, str], meta: Mapping[str, SettingMeta]) -> dict[str, str]:
    """Plan and tune names are lower case; pg_settings spells a few in mixed case (DateStyle)."""
    lower = by_lower_name(meta)
    return {lower[n.lower()].name if n.lower() in lower else n: v for n, v in values.items()}


def _part_of(pending: list[PgChange], values: Mapping[str, str], marker: str) -> bool:
    """True when every pending change set a value `values` sets too (names in any case),
    under this work directory's owner marker."""
    wanted = {name.lower(): value for name, value in values.items()}
    wanted[MARKER] = marker
    return all(wanted.get(c.name.lower()) == c.new and not c.salvaged for c in pending)
