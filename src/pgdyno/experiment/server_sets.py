"""`pgdyno compare --dsn`: a plan's sets applied to an existing server, and undone after each.

An existing server is not pgdyno's, so a set's PostgreSQL settings go in exactly as
`pgdyno tune --apply` puts them, through the one owner of server changes
(pgdyno.changes.changer): each `ALTER SYSTEM` is journalled first with what postgresql.auto.conf
held for the setting, then the server reloads, or restarts when a changed setting needs it and
the user consented (`--yes` with `--restart-command`, or pg_ctl on a local `--data-dir`:
pgdyno.changes.handles). Every value is read back. Before the next set, and on every way out,
the previous set is undone, so each set starts from the server as it was found; after a crash
`pgdyno rollback` does the same from the journal. A server another pgdyno changed (its marker
names another journal) is refused.

What would need something the user did not give is refused before anything runs, in one
sentence: a setting that needs a restart without consent, a set pinned to a PostgreSQL version
other than the server's (compare cannot switch a server's version), and host settings when the
server does not run on this host (they would change the wrong machine).

Every set's runs use one pgbench: the set's pg_bin when the plan names one (its version is the
server's), else the default binaries, as `bench --dsn` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from pgdyno.changes.alter import auto_conf, marker_value
from pgdyno.changes.changer import ServerChanger
from pgdyno.changes.handles import ServerHandle, over_ssh, server_handle
from pgdyno.changes.live import by_lower_name, restart_settings, same_value
from pgdyno.changes.pg_journal import open_journal
from pgdyno.environment import Environment
from pgdyno.errors import ClusterError, PgdynoError, UsageError
from pgdyno.experiment.target import Target, server_address
from pgdyno.host.disks import device_for_path
from pgdyno.host.held_signals import signals_held
from pgdyno.plan.check import (
    DEFAULT_PG_VERSION,
    BinariesFinder,
    CheckedSet,
    HostTarget,
    check_plan,
    set_binaries,
)
from pgdyno.plan.load import Plan
from pgdyno.plan.model import SetSpec, applied_sets
from pgdyno.plan.policy import Allowed
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.client import ServerInfo, connect
from pgdyno.postgres.inventory import is_local
from pgdyno.postgres.settings_meta import SettingMeta, load_settings_meta

CONSENT = "add --yes with --restart-command CMD (or --data-dir DIR)"


@dataclass(frozen=True)
class ServerOptions:
    """What `compare --dsn` was told about the server."""

    dsn: str
    consent: bool  # --yes
    restart_command: str | None
    data_dir: Path | None  # --data-dir: on this host, restarted with pg_ctl
    # The server is on another host, reached over SSH (`dsn` is then the forwarded port):
    # never taken as local, whatever path it reports.
    remote: RemoteServer | None = None


@dataclass(frozen=True)
class RemoteServer:
    ssh: str  # the host, as --ssh gave it
    dsn: str  # the server as that host reaches it (no password)
    label: str


@dataclass(frozen=True)
class ExistingServer:
    """The server as found: how to reach and restart it, and its settings before any change."""

    handle: ServerHandle  # restart is None without consent
    info: ServerInfo
    meta: Mapping[str, SettingMeta]  # pg_settings as found, values included
    data_dir: Path | None  # on this host (--data-dir, or reported and found here), else None

    @property
    def major(self) -> int:
        return self.info.version_num // 10000

    def meta_for(self, _binaries: Binaries) -> Mapping[str, SettingMeta]:
        """The plan is checked against this server, whatever binaries run pgbench."""
        return self.meta


def open_server(options: ServerOptions, env: Environment) -> ExistingServer:
    """Connect once: version, data directory and every setting, before anything is checked."""
    address = server_address(options.dsn)
    with connect(address.dsn, address.password) as client:
        info = client.server_info()
        meta = load_settings_meta(client)
    remote = options.remote
    label = address.label if remote is None else remote.label
    local = None
    if remote is None:  # a forwarded port is 127.0.0.1, and not this host
        local = _local_data_dir(options, address.dsn, label, info.data_directory)
    handle = server_handle(
        address.dsn, address.password, label,
        restart_command=options.restart_command, consent=options.consent,
        data_dir=options.data_dir, env=env,
    )  # fmt: skip
    if remote is not None:
        handle = over_ssh(handle, remote.ssh, remote.dsn)
    return ExistingServer(handle, info, meta, local)


def _local_data_dir(
    options: ServerOptions, dsn: str, label: str, reported: str | None
) -> Path | None:
    """--data-dir (checked against what the server reports: pg_ctl must not restart another
    cluster), else the reported data directory when the server runs here."""
    given = options.data_dir
    if given is None:
        return Path(reported) if reported and is_local(dsn, reported) else None
    if not (given / "PG_VERSION").is_file():
        raise UsageError(
            f"--data-dir {given} is not a PostgreSQL data directory (no PG_VERSION in it): give "
            "the server's data directory, or leave it out."
        )
    if reported and Path(reported).resolve() != given.resolve():
        raise UsageError(
            f"--data-dir {given} is not the data directory of {label} (it reports {reported}): "
            "give that one, or --restart-command."
        )
    return given


def check_server_plan(
    plan: Plan, server: ExistingServer, env: Environment, allowed: Allowed
) -> list[CheckedSet]:
    """The plan's sets checked against the live server; UsageError, before anything runs, for
    what this server or the consent given cannot take."""
    pgbench = _check_versions(plan, server, env.cache_dir)
    _check_host_here(plan, server)
    device = (
        device_for_path(server.data_dir, env.proc_root, env.sys_root) if server.data_dir else None
    )
    checked = check_plan(
        plan, cache_dir=env.cache_dir, meta_for=server.meta_for,
        host=HostTarget(device.disk if device else None, env.is_root, env.proc_root,
                        env.sys_root, allowed),
        find=_one_pgbench(pgbench),
    )  # fmt: skip
    checked = [replace(c, server_version=server.info.version) for c in checked]
    _check_consent(checked, server)
    if any(c.pg for c in checked):
        with connect(server.handle.dsn, server.handle.password) as client:
            auto_conf(client)  # a rollback must be exact: refused unless it can be read
    return checked


def _check_versions(plan: Plan, server: ExistingServer, cache_dir: Path) -> Binaries | None:
    """Every version a set pins must be the server's; the binaries of a pinned pg_bin."""
    pgbench: Binaries | None = None
    for index, spec in enumerate(applied_sets(plan.spec)):
        if spec.pg_bin:
            pgbench = set_binaries(plan, index, spec, cache_dir)  # inspects, installs nothing
            wanted = pgbench.major
        elif spec.pg_version:
            wanted = spec.pg_version
        else:
            continue
        if wanted != server.major:
            raise UsageError(
                f"{plan.where(_version_key(plan, index, spec))}: set {spec.name!r} asks for "
                f"PostgreSQL {wanted}, but {server.handle.label} runs {server.info.version} and "
                "compare --dsn cannot change a server's version: remove it from the plan, or "
                "compare versions on the sandbox."
            )
    return pgbench


def _version_key(plan: Plan, index: int, spec: SetSpec) -> tuple[str | int, ...]:
    key = "pg_bin" if spec.pg_bin else "pg_version"
    own = key in plan.spec.sets[index].model_fields_set
    return ("set", index, key) if own else (key,)


def _check_host_here(plan: Plan, server: ExistingServer) -> None:
    for index, spec in enumerate(plan.spec.sets):
        if spec.storage is not None:
            raise UsageError(
                f"{plan.where(('set', index, 'storage'))}: set {spec.name!r} builds a filesystem "
                f"for the data directory, which pgdyno does for its own sandbox only, never under "
                f"{server.handle.label}: run the plan without --dsn."
            )
    if server.data_dir is not None:
        return
    for index, spec in enumerate(plan.spec.sets):
        names = [*spec.sysctl, *spec.block_settings, *spec.thp_settings]
        if names:
            raise UsageError(
                f"{plan.where(('set', index))}: set {spec.name!r} changes host settings "
                f"({', '.join(names)}), but {server.handle.label} does not run on this host as "
                "far as pgdyno can tell, so they would change the wrong machine: remove them, "
                "or give --data-dir DIR if the server's data directory is here."
            )


def _one_pgbench(pinned: Binaries | None) -> BinariesFinder:
    """A finder giving every set the same pgbench, whatever version the set names (checked
    against the server's before)."""

    @cache
    def default(cache_dir: Path) -> Binaries:
        return resolve(None, DEFAULT_PG_VERSION, cache_dir)

    def find(_pg_bin: Path | None, _pg_version: int | None, cache_dir: Path) -> Binaries:
        return pinned or default(cache_dir)

    return find


def _check_consent(checked: list[CheckedSet], server: ExistingServer) -> None:
    if server.handle.restart is not None:
        return
    for c in checked:
        for name in restart_settings(c.pg, server.meta):
            raise UsageError(
                f"{name} (set {c.name!r}) needs a restart of {server.handle.label}: {CONSENT}, "
                "or drop it from the plan."
            )


class ServerSwitcher:
    """Makes each set's PostgreSQL settings current on an existing server (a `SetSwitcher` of
    pgdyno.experiment.sets_runner): the previous set undone first, the set's values that differ
    from the server as found applied through the changer, read back; `close` undoes the last."""

    def __init__(
        self, server: ExistingServer, changer: ServerChanger, log: Callable[[str], None]
    ) -> None:
        self.server = server
        self.changer = changer
        self.log = log
        self.applied: dict[str, str] = {}  # what this switcher set; {} = the server as found
        self._meta = by_lower_name(server.meta)

    def use(self, checked: CheckedSet) -> Target:
        wanted = {
            name: value
            for name, value in checked.pg.items()
            if (m := self._meta.get(name)) is None or not same_value(m, value)
        }
        if wanted != self.applied:
            self._undo()
            if wanted:
                self._apply(wanted)
        return self._target(checked)

    def _target(self, checked: CheckedSet) -> Target:
        handle = self.server.handle
        return Target(
            handle.label, handle.dsn, handle.password, checked.binaries, self.server.data_dir
        )

    def close(self) -> None:
        """Undo what is still applied, restarting the server when a restored setting needs it."""
        try:
            self._undo()
        except PgdynoError as exc:
            raise ClusterError(
                f"could not restore the settings pgdyno changed on {self.server.handle.label} "
                f"({exc}): run `pgdyno rollback` once the server is reachable."
            ) from exc

    def _undo(self) -> None:
        """Restore the previous set: the server must be as found before anything is compared
        with it (a restart only if pending_restart says a restored setting needs one)."""
        with signals_held():  # a second Ctrl-C must not cut a restore short
            self.changer.undo(restart_ok=True)
            self.applied = {}

    def _apply(self, wanted: dict[str, str]) -> None:
        applied = self.changer.apply(wanted)
        self.applied = dict(wanted)
        for name in applied.missing:
            self.log(f"{self.server.handle.label} has no setting {name}: left out.")
        self._confirm(wanted)

    def _confirm(self, wanted: Mapping[str, str]) -> None:
        """Each value is in effect now, or the set is not what it says it is."""
        with connect(self.server.handle.dsn, self.server.handle.password) as client:
            now = by_lower_name(load_settings_meta(client))
        for name, value in wanted.items():
            meta = now.get(name)
            if meta is None or meta.vartype == "string":
                continue  # PostgreSQL may rewrite a string (search_path): nothing to compare
            if not same_value(meta, value):
                shown = f"{meta.setting} {meta.unit}" if meta.unit else meta.setting
                raise ClusterError(
                    f"{name} = {value} did not take effect on {self.server.handle.label} (it "
                    f"shows {shown}): check the server's log."
                )


@contextmanager
def server_sets(
    plan: Plan, options: ServerOptions, env: Environment, allowed: Allowed,
    log: Callable[[str], None],
) -> Iterator[tuple[list[CheckedSet], ServerSwitcher]]:  # fmt: skip
    """The plan checked against the server, and its switcher, with the PostgreSQL journal of
    the work directory open (and locked) for the block; whatever is still applied is undone on
    the way out. Refused while changes to this server are pending in this journal, or another
    pgdyno's marker is on it: the server would not be as found."""
    env.data_dir.mkdir(parents=True, exist_ok=True)
    with open_journal(env.data_dir, create=True) as journal:
        assert journal is not None
        server = open_server(options, env)
        changer = ServerChanger(
            server.handle, journal, log, marker=marker_value(env.data_dir, journal.path),
            proc_root=env.proc_root,
        )  # fmt: skip
        changer.claim()
        checked = check_server_plan(plan, server, env, allowed)
        switcher = ServerSwitcher(server, changer, log)
        try:
            yield checked, switcher
        finally:
            switcher.close()
