"""`pgdyno tune --apply`: a configuration put in effect, journal first, everything read back.

Order, so that each step can be undone and huge pages are sized from what the server says:

1. host and block-device settings through the host journal (old value fsynced first), kept in
   effect when the command ends (`HostChanges(keep=True)`);
2. PostgreSQL settings through `ALTER SYSTEM`, each journalled first with what
   postgresql.auto.conf held for it (pgdyno.tune.pg_journal); huge_pages as `try` for now;
3. a reload, or a restart when a changed setting needs one and the user consented;
4. huge pages: vm.nr_hugepages from the running server's shared_memory_size_in_huge_pages, then
   huge_pages = on and another restart; if the kernel cannot reserve the pages, huge_pages
   stays `try` and the report says so;
5. every value read back.

If anything fails, everything changed so far is restored before the error is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.environment import Environment
from pgdyno.errors import InsufficientPrivilege, PgdynoError, UsageError
from pgdyno.host.journal import HostChanges, ensure_clean
from pgdyno.host.journal_format import now
from pgdyno.host.knobs import Knob
from pgdyno.postgres.client import Client, compose, connect, identifier, literal
from pgdyno.postgres.footprint import auto_conf_settings
from pgdyno.postgres.queries import load
from pgdyno.tune.model import ApplyReport, Configuration, Done, Layer, Setting
from pgdyno.tune.pg_journal import PgChange, PgJournal, open_journal
from pgdyno.tune.recommend import shown

Restart = Callable[[], None]


@dataclass
class ServerHandle:
    """How to reach (and, with consent, restart) the server being tuned."""

    label: str
    dsn: str
    password: str | None
    identity: dict[str, str]  # the journal's `server` field
    restart: Restart | None  # None: no consent to restart
    # pgdyno's sandbox only: a restart in two halves, so that host settings (huge pages the
    # server holds) can be restored while it is down.
    stop: Restart | None = None
    start: Restart | None = None


def apply_configuration(
    env: Environment,
    config: Configuration,
    server: ServerHandle,
    *,
    layers: tuple[Layer, ...],
    log: Callable[[str], None],
) -> ApplyReport:
    """Apply `config`'s settings of `layers` (status "apply" only) to the server and host."""
    report = ApplyReport()
    if not config.facts.get("local") and layers != ("postgresql",):
        # The server runs elsewhere: this host's settings are not its host's.
        report.notes.append(
            "host and device settings not applied: the server runs on another host."
        )
        layers = ("postgresql",)
    settings = config.to_apply(layers)
    ensure_clean(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root)
    with connect(server.dsn, server.password) as client:
        auto_conf(client)  # a role that cannot read it cannot be restored exactly: say so first
    env.data_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        journal = stack.enter_context(open_journal(env.data_dir, create=True))
        assert journal is not None
        if journal.pending(server.identity):
            raise UsageError(
                f"{server.label} still has settings from an earlier `pgdyno tune --apply`: run "
                "`pgdyno rollback` first."
            )
        host = stack.enter_context(
            HostChanges(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root, keep=True)
        )
        try:
            _apply_all(env, settings, server, journal, host, report, log)
        except BaseException:
            log("restoring what was changed before the failure")
            _undo_pg(journal, server, log)
            raise
    return report


def _apply_all(
    env: Environment,
    settings: list[Setting],
    server: ServerHandle,
    journal: PgJournal,
    host: HostChanges,
    report: ApplyReport,
    log: Callable[[str], None],
) -> None:
    hugepages = next((s for s in settings if s.name == "vm.nr_hugepages"), None)
    for setting in settings:
        if setting.layer != "postgresql" and setting is not hugepages:
            done = _apply_host(env, host, setting)
            if done.old == done.requested:
                report.unchanged.append(f"{setting.name} ({setting.device})" if setting.device
                                        else setting.name)  # fmt: skip
            else:
                report.done.append(done)
    pg = {s.name: s.value for s in settings if s.layer == "postgresql"}
    wants_huge = pg.get("huge_pages") == "on" and hugepages is not None
    if pg.get("huge_pages") == "on":
        pg["huge_pages"] = "try"  # until the pages are reserved: `on` without them cannot start
        if hugepages is None:
            report.notes.append(
                "huge_pages is set to try, not on: vm.nr_hugepages (host layer) is not applied."
            )
    with connect(server.dsn, server.password) as client:
        changed = alter_system(client, journal, server, pg, report)
        needs_restart = any(c.restart for c in changed)
        client.execute(compose("SELECT pg_reload_conf()"))
    if needs_restart:
        _restart(server, log, report)
    if wants_huge and hugepages is not None:
        _huge_pages(env, host, server, journal, hugepages, report, log)
    _read_back(server, settings, report)


def _apply_host(env: Environment, host: HostChanges, setting: Setting) -> Done:
    knob = knob_for(setting, env.proc_root, env.sys_root)
    applied = host.apply(knob, setting.value)
    return Done(setting.layer, setting.name, applied.old, applied.requested, applied.effective,
                device=setting.device)  # fmt: skip


def knob_for(setting: Setting, proc_root: Path, sys_root: Path) -> Knob:
    """The host knob a host or device setting names."""
    roots = {"proc_root": proc_root, "sys_root": sys_root}
    if setting.layer == "device":
        assert setting.device is not None
        return Knob.block(setting.device, setting.name, **roots)
    if setting.name.startswith("transparent_hugepage/"):
        return Knob.thp(setting.name.partition("/")[2], **roots)
    return Knob.sysctl(setting.name, **roots)


def _state(client: Client, names: list[str]) -> dict[str, tuple[Any, ...]]:
    return {row[0]: row for row in client.rows(load("tune_settings_state"), {"names": names})}


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


def alter_system(
    client: Client,
    journal: PgJournal,
    server: ServerHandle,
    values: Mapping[str, str],
    report: ApplyReport,
) -> list[PgChange]:
    """`ALTER SYSTEM SET` for each value that differs from the server's, each journalled first
    with what postgresql.auto.conf held for it; the changes made (nothing is reloaded here).
    Also used by `compare --dsn` (pgdyno.experiment.server_sets)."""
    before = auto_conf(client)
    state = _state(client, list(values))
    changed: list[PgChange] = []
    for name, value in values.items():
        row = state.get(name)
        if row is None:
            report.notes.append(f"{server.label} has no setting {name}: left out.")
            continue
        old = shown(_row(row))
        if old == value:
            report.unchanged.append(name)
            continue
        change = PgChange(
            id=journal.next_id(), server=server.identity, name=name, old_auto=before.get(name),
            old_setting=old, old_source=str(row[4]), new=value,
            restart=row[5] == "postmaster", at=now(),
        )  # fmt: skip
        journal.append(change.record())
        client.execute(compose("ALTER SYSTEM SET {} = {}", identifier(name), literal(value)))
        changed.append(change)
        report.pg_old.setdefault(name, old)
    return changed


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"setting": row[1], "unit": row[2], "vartype": row[3], "source": row[4],
            "boot_val": row[7]}  # fmt: skip


def _restart(server: ServerHandle, log: Callable[[str], None], report: ApplyReport) -> None:
    if server.restart is None:
        report.notes.append(
            "settings that need a restart wait for one: restart the server (or run again with "
            "--yes, and --restart-command for an existing server)."
        )
        return
    log(f"restarting {server.label}")
    server.restart()
    report.restarted += 1
    wait_for_server(server)


def wait_for_server(server: ServerHandle, timeout: float = 120) -> None:
    """Until the server accepts a connection again (after a restart)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with connect(server.dsn, server.password):
                return
        except PgdynoError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _huge_pages(
    env: Environment,
    host: HostChanges,
    server: ServerHandle,
    journal: PgJournal,
    setting: Setting,
    report: ApplyReport,
    log: Callable[[str], None],
) -> None:
    pages = int(setting.value)
    with connect(server.dsn, server.password) as client:
        rows = client.rows("SELECT setting FROM pg_settings WHERE name = "
                           "'shared_memory_size_in_huge_pages'")  # fmt: skip
    if rows and rows[0][0] not in (None, "-1"):
        pages = int(rows[0][0])
        log(f"the server needs {pages} huge pages (shared_memory_size_in_huge_pages)")
    wanted = Setting("host", setting.name, str(pages), setting.why)
    done = _apply_host(env, host, wanted)
    report.done.append(done)
    if done.effective is None or int(done.effective) < pages:
        report.notes.append(
            f"the kernel reserved {done.effective} of {pages} huge pages (memory too fragmented): "
            "huge_pages stays try; reserve them at boot (vm.nr_hugepages in sysctl.d) and restart."
        )
        return
    if server.restart is None:
        report.notes.append("huge_pages stays try until the server is restarted with --yes.")
        return
    with connect(server.dsn, server.password) as client:
        # Journalled here unless the first pass already changed it (try was then new).
        known = {c.name for c in journal.pending(server.identity)}
        values = {} if "huge_pages" in known else {"huge_pages": "on"}
        alter_system(client, journal, server, values, report)
        client.execute(compose("ALTER SYSTEM SET huge_pages = 'on'"))
        client.execute(compose("SELECT pg_reload_conf()"))
    _restart(server, log, report)


def _read_back(server: ServerHandle, settings: list[Setting], report: ApplyReport) -> None:
    pg = [s for s in settings if s.layer == "postgresql"]
    report.unchanged = [name for name in report.unchanged if name not in report.pg_old]
    with connect(server.dsn, server.password) as client:
        state = _state(client, [s.name for s in pg])
    for setting in pg:
        row = state.get(setting.name)
        if row is None or setting.name not in report.pg_old:
            continue
        effective = shown(_row(row))
        report.done.append(
            Done(
                "postgresql",
                setting.name,
                report.pg_old[setting.name],
                setting.value,
                effective,
                waiting_for_restart=bool(row[6]),
            )
        )


def _undo_pg(journal: PgJournal, server: ServerHandle, log: Callable[[str], None]) -> None:
    from pgdyno.tune.rollback import restore_server

    try:
        restore_server(journal, server, log)
    except PgdynoError as exc:
        log(f"could not restore the PostgreSQL settings ({exc}); run `pgdyno rollback`.")
