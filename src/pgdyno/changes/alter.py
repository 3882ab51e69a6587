"""`ALTER SYSTEM`, journal first, and the marker that says a server is pgdyno's until rolled back.

Every change is appended to the PostgreSQL journal (fsynced) with what postgresql.auto.conf held
for the setting before the statement runs, so a rollback puts the file back exactly.

**One owner at a time.** The first change pgdyno makes to a server is a placeholder setting,
`pgdyno.changed_by`, naming the host and the journal; it is journalled like any other change
(old entry: none), so the rollback that undoes the rest removes it too. Any pgdyno, from any
work directory or host, reads it before changing or comparing that server and refuses while it
names another journal. The statement itself, its record and its undo are pgdyno.undo.server's.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import InsufficientPrivilege, QueryRefused, UsageError
from pgdyno.postgres.client import Client
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import auto_conf_settings
from pgdyno.postgres.server import EffectiveSetting, custom_setting, effective_settings
from pgdyno.postgres.server import file_errors as config_file_errors
from pgdyno.postgres.settings import SettingMeta, check_setting
from pgdyno.undo.handles import ServerHandle
from pgdyno.undo.journal import now
from pgdyno.undo.server import MARKER, PgChange, PgJournal, alter_setting


def auto_conf(client: Client) -> dict[str, str]:
    """postgresql.auto.conf's entries, the last one of each name; UsageError when they cannot be
    read (a rollback could then not be exact, so nothing is changed)."""
    try:
        rows = auto_conf_settings(client)
    except InsufficientPrivilege:
        raise UsageError(
            "cannot read pg_file_settings (it needs a superuser): connect as a superuser to let "
            "pgdyno apply settings with ALTER SYSTEM and restore them exactly."
        ) from None
    return {row.name: row.setting for row in rows if row.setting is not None}


def marker_value(workdir: Path, journal: Path) -> str:
    """What the marker says: enough for another pgdyno, or a person, to find the journal."""
    return f"host {socket.gethostname()}, work directory {workdir}, journal {journal}"


def read_marker(client: Client) -> str | None:
    """The marker in postgresql.auto.conf (even before a reload), else as the server shows it
    (a role that may not read pg_file_settings)."""
    try:
        entries = auto_conf_settings(client)
    except InsufficientPrivilege:
        return custom_setting(client, MARKER) or None
    found = [e.setting for e in entries if e.name == MARKER and e.setting]
    return found[-1] if found else None


def check_owner(client: Client, label: str, mine: str) -> None:
    """UsageError when another pgdyno's changes are on this server (its marker names another
    journal): both would be measured on, or restore, the other's settings."""
    found = read_marker(client)
    if found is not None and found != mine:
        raise UsageError(
            f"{label} has settings another pgdyno changed ({found}): run `pgdyno rollback` "
            "with that work directory on that host first."
        )


def refuse_changed_sandbox(box: Sandbox) -> None:
    """UsageError when `pgdyno tune --apply` (or another pgdyno) left settings in the sandbox's
    postgresql.auto.conf: they win over the settings a comparison gives each set."""
    try:
        text = (box.data_dir / "postgresql.auto.conf").read_text()
    except OSError:
        return
    if any(line.strip().startswith(MARKER) for line in text.splitlines()):
        raise UsageError(
            f"sandbox {box.root.name} still has settings `pgdyno tune --apply` changed, which "
            "would override every set's: run `pgdyno rollback` first."
        )


@dataclass
class Altered:
    """What `alter_system` did."""

    changed: list[PgChange] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # already at the value
    missing: list[str] = field(default_factory=list)  # the server has no such setting
    old_rows: dict[str, EffectiveSetting] = field(default_factory=dict)  # pg_settings before


def settings_state(client: Client, names: list[str]) -> dict[str, EffectiveSetting]:
    """The settings among `names` as the server has them, by exact name."""
    return {n: s for n, s in effective_settings(client, names).items() if n in names}


def alter_system(
    client: Client,
    journal: PgJournal,
    handle: ServerHandle,
    values: Mapping[str, str],
    *,
    same: Mapping[str, bool],
    marker: str,
) -> Altered:
    """`ALTER SYSTEM SET` for each value not already in effect (`same[name]` says so), each
    journalled first with what postgresql.auto.conf held for it; the marker goes first when the
    server has no pending change in this journal. Nothing is reloaded here."""
    before = auto_conf(client)
    state = settings_state(client, list(values))
    altered = Altered()
    marked = bool(journal.pending(handle.identity))
    for name, value in values.items():
        row = state.get(name)
        if row is None:
            altered.missing.append(name)
        elif same.get(name, False):
            altered.unchanged.append(name)
        else:
            if not marked:
                _journalled(client, journal, handle, MARKER, marker, before, None)
                marked = True
            altered.old_rows[name] = row
            altered.changed.append(_journalled(client, journal, handle, name, value, before, row))
    return altered


def _journalled(
    client: Client,
    journal: PgJournal,
    handle: ServerHandle,
    name: str,
    value: str,
    before: Mapping[str, str],
    row: EffectiveSetting | None,
) -> PgChange:
    # The marker's old entry is none: `check_owner` let only our own (stale) one through.
    old_auto = None if name == MARKER else before.get(name)
    change = PgChange(
        id=journal.next_id(), server=handle.identity, name=name, old_auto=old_auto,
        old_setting=None if row is None else str(row.setting),
        old_source=None if row is None else row.source, new=value,
        restart=row is not None and row.context == "postmaster", at=now(),
    )  # fmt: skip
    journal.append(change)
    try:
        alter_setting(client, name, value)
    except QueryRefused as exc:
        raise UsageError(f"{handle.label} refused {name} = {value!r}: {exc}") from None
    return change


NOT_APPLIED = "setting could not be applied"


def file_errors(client: Client, meta: Mapping[str, SettingMeta]) -> list[tuple[str, str]]:
    """(name, error) of every line of the configuration files PostgreSQL would refuse at the
    next start. pg_file_settings says "setting could not be applied" both for a value the
    server refuses and for a postmaster setting waiting for a restart: a value the running
    server could have taken is refused; a postmaster one is refused when its value is not valid
    for the setting (type, range, enum)."""
    try:
        rows = config_file_errors(client)
    except InsufficientPrivilege:
        return []
    errors = []
    for row in rows:
        found = _refused(meta, row.name, row.setting, row.error)
        if found is not None:
            errors.append((row.name, found))
    return errors


def _refused(
    meta: Mapping[str, SettingMeta], name: str, value: str | None, error: str
) -> str | None:
    if error != NOT_APPLIED:
        return error
    setting = meta.get(name) or {m.lower(): v for m, v in meta.items()}.get(name.lower())
    if setting is None or value is None:
        return error
    if not setting.needs_restart:
        return f"{value!r} is not a value it takes"
    try:
        check_setting(meta, setting.name, value, "this server", source="the file")
    except UsageError as refused:
        return str(refused).rstrip(".")
    return None  # waits for a restart
