"""`pgdyno tune --apply`: a configuration put in effect, journal first, everything read back.

Order, so that each step can be undone and huge pages are sized from what the server says:

1. host and block-device settings through the host journal (old value fsynced first), kept in
   effect when the command ends (`HostChanges(keep=True)`);
2. PostgreSQL settings through the one owner of server changes (pgdyno.changes.changer):
   journalled `ALTER SYSTEM`, checked against what the server refuses at start, then a reload
   or, with consent, a restart that never leaves the server down; without consent a setting
   that needs a restart is not written; huge_pages as `try` for now;
3. huge pages: vm.nr_hugepages from the running server's shared_memory_size_in_huge_pages plus
   the pages other processes hold (theirs stay theirs), then huge_pages = on and another
   restart; if the kernel cannot reserve the pages, huge_pages stays `try` and the report says so;
4. every value read back.

If anything fails, everything changed so far is restored before the error is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgdyno.changes.alter import auto_conf, marker_value, settings_state
from pgdyno.changes.changer import ServerChanger
from pgdyno.changes.hugepages import held_elsewhere, needed_huge_pages
from pgdyno.environment import Environment
from pgdyno.errors import PgdynoError
from pgdyno.host.knobs import Knob
from pgdyno.postgres.client import connect
from pgdyno.postgres.server import EffectiveSetting
from pgdyno.tune.model import ApplyReport, Configuration, Done, Layer, Setting
from pgdyno.tune.recommend import shown
from pgdyno.undo.handles import ServerHandle
from pgdyno.undo.host import HostChanges, ensure_clean
from pgdyno.undo.server import open_journal, wait_for_server


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
    if not config.facts.local and layers != ("postgresql",):
        # The server runs elsewhere: this host's settings are not its host's.
        report.notes.append(
            "host and device settings not applied: the server runs on another host."
        )
        layers = ("postgresql",)
    settings = config.to_apply(layers)
    if any(s.status == "host" for s in config.settings):
        report.notes.append(
            "host and device settings not applied: the server runs in a container, and they are "
            "the host administrator's (see `pgdyno tune --out`'s README.txt)."
        )
    ensure_clean(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root)
    with connect(server.dsn, server.password) as client:
        auto_conf(client)  # a role that cannot read it cannot be restored exactly: say so first
    env.data_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        journal = stack.enter_context(open_journal(env.data_dir, create=True))
        assert journal is not None
        changer = ServerChanger(
            server, journal, log, marker=marker_value(env.data_dir, journal.path),
            proc_root=env.proc_root,
        )  # fmt: skip
        changer.claim(continuing=_pg_advice(settings))
        host = stack.enter_context(
            HostChanges(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root, keep=True)
        )
        try:
            _apply_all(env, settings, changer, host, report, log)
        except BaseException:
            log("restoring what was changed before the failure")
            _undo(changer, host, log)
            raise
    return report


def _apply_all(
    env: Environment,
    settings: list[Setting],
    changer: ServerChanger,
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
    pg = _pg_to_change(settings, report)
    # on, or try over pages still to reserve (tune/huge_pages.py): on once they are reserved
    wants_huge = pg.get("huge_pages") in ("on", "try") and hugepages is not None
    asks_on = pg.get("huge_pages") == "on" or wants_huge
    if pg.get("huge_pages") == "on":
        pg["huge_pages"] = "try"  # until the pages are reserved: `on` without them cannot start
        if hugepages is None:
            report.notes.append(
                "huge_pages is set to try, not on: vm.nr_hugepages (host layer) is not applied."
            )
    _apply_pg(changer, pg, report)
    restartable = changer.handle.restart is not None
    if wants_huge and hugepages is not None and restartable:
        settings = _huge_pages(env, host, changer, hugepages, report, log, settings)
    elif wants_huge:
        report.notes.append(
            "huge_pages is set to try, not on: on needs a restart once the pages are reserved "
            "(give --restart-command or --data-dir for an existing server)."
        )
    if asks_on and "huge_pages" not in report.pg_old:
        # `try` was in effect, but `on` was recommended: not "already as recommended".
        report.unchanged = [name for name in report.unchanged if name != "huge_pages"]
    _read_back(changer.handle, settings, report)


def _pg_advice(settings: list[Setting]) -> dict[str, str]:
    """Every PostgreSQL value of the advice, as an apply writes it (huge_pages `try` until the
    pages are reserved): what an earlier apply of the same advice left pending."""
    pg = {s.name: s.value for s in settings if s.layer == "postgresql"}
    if pg.get("huge_pages") == "on":
        pg["huge_pages"] = "try"
    return pg


def _pg_to_change(settings: list[Setting], report: ApplyReport) -> dict[str, str]:
    """The PostgreSQL values to write: one in effect already as tune writes it (wal_buffers = -1
    at its default, which pg_settings shows as 4MB) is not written and asks for no restart.
    huge_pages always goes on: its pages are sized from the server's count below."""
    pg: dict[str, str] = {}
    for s in settings:
        if s.layer != "postgresql":
            continue
        if s.changes or s.name == "huge_pages":
            pg[s.name] = s.value
        else:
            report.unchanged.append(s.name)
    return pg


def _apply_pg(changer: ServerChanger, values: dict[str, str], report: ApplyReport) -> None:
    applied = changer.apply(values)
    report.unchanged.extend(applied.unchanged)
    for name, row in applied.old_rows.items():
        report.pg_old.setdefault(name, shown(_row(row)))
    report.restarted += int(applied.restarted)
    for name in applied.missing:
        report.notes.append(f"{changer.handle.label} has no setting {name}: left out.")
    if applied.needs_consent:
        report.notes.append(
            f"not applied, since they need a restart: {', '.join(applied.needs_consent)}; run "
            "again with --yes (and --restart-command or --data-dir for an existing server)."
        )


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


def _row(row: EffectiveSetting) -> dict[str, Any]:
    return {"setting": row.setting, "unit": row.unit, "vartype": row.vartype,
            "source": row.source, "boot_val": row.boot_val}  # fmt: skip


def _huge_pages(
    env: Environment,
    host: HostChanges,
    changer: ServerChanger,
    setting: Setting,
    report: ApplyReport,
    log: Callable[[str], None],
    settings: list[Setting],
) -> list[Setting]:
    """vm.nr_hugepages from the running server's count, then huge_pages = on: the settings
    as they were asked for in the end (huge_pages on when the pages were reserved)."""
    handle = changer.handle
    with connect(handle.dsn, handle.password) as client:
        needed = needed_huge_pages(client)
        others = held_elsewhere(client, env.proc_root)
    own = int(setting.value) if needed is None else needed
    pages = own + others
    if needed is not None:
        log(f"the server needs {own} huge pages (shared_memory_size_in_huge_pages)")
    if others:
        log(f"other processes hold {others} huge pages: reserving {pages} leaves them theirs")
    done = _apply_host(env, host, Setting("host", setting.name, str(pages), setting.why))
    report.done.append(done)
    if done.effective is None or int(done.effective) < pages:
        report.notes.append(
            f"the kernel reserved {done.effective} of {pages} huge pages (memory too fragmented): "
            "huge_pages stays try; reserve them at boot (vm.nr_hugepages in sysctl.d) and restart."
        )
        return settings
    _apply_pg(changer, {"huge_pages": "on"}, report)
    return [
        replace(s, value="on") if s.layer == "postgresql" and s.name == "huge_pages" else s
        for s in settings
    ]


def _read_back(server: ServerHandle, settings: list[Setting], report: ApplyReport) -> None:
    pg = [s for s in settings if s.layer == "postgresql"]
    report.unchanged = [name for name in report.unchanged if name not in report.pg_old]
    with connect(server.dsn, server.password) as client:
        state = settings_state(client, [s.name for s in pg])
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
                waiting_for_restart=row.pending_restart,
            )
        )


def _undo(changer: ServerChanger, host: HostChanges, log: Callable[[str], None]) -> None:
    """After a failure: PostgreSQL back, then the host, with the sandbox stopped meanwhile
    when it must restart (huge pages it holds could not be released)."""
    handle = changer.handle
    try:
        restored = changer.undo(restart_ok=False)
    except PgdynoError as exc:
        log(f"could not restore the PostgreSQL settings ({exc}); run `pgdyno rollback`.")
        return
    stopped = bool(restored.waiting_for_restart) and handle.stop is not None
    if stopped and handle.stop is not None:
        handle.stop()
    with suppress(PgdynoError):  # what stays changed is kept in the journal for rollback
        host.restore()
    try:
        if stopped and handle.start is not None:
            handle.start()
            wait_for_server(handle.dsn, handle.password)
            changer.undo(restart_ok=False)  # now in effect: marked restored
        elif restored.waiting_for_restart:
            changer.undo(restart_ok=True)
    except PgdynoError as exc:
        log(f"could not restart {handle.label} ({exc}); run `pgdyno rollback`.")
