"""A running server's sessions and the settings in effect on it: typed functions over `Client`.

Every reader of pg_settings' live values goes through `effective_settings` (by name, frozen
`EffectiveSetting` records); `reloaded` is the one way pgdyno waits for a reload: the server's
clock is read before the request, and the wait ends when pg_conf_load_time() has moved past it
(pg_reload_conf only signals the postmaster, which re-reads its files a moment later; new
connections then see the values). The queries are in queries/*.sql; ALTER SYSTEM, whose name
cannot be a parameter, is composed here with a quoted identifier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from pgdyno.errors import ClusterError
from pgdyno.postgres.client import Client, compose, connect, identifier, literal
from pgdyno.postgres.queries import load

RELOAD_WAIT_S = 30.0


# -- sessions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pid:
    pid: int


@dataclass(frozen=True)
class _Cancelled:
    cancelled: bool


@dataclass(frozen=True)
class _One:
    one: int


def backend_pid(client: Client) -> int:
    """The process id of the session's backend."""
    return client.records(load("backend_pid"), _Pid)[0].pid


def cancel_backends(client: Client, pids: Iterable[int]) -> None:
    """Cancel what the sessions with these backend pids run now."""
    client.records(load("cancel_backends"), _Cancelled, {"pids": list(pids)})


def ping(client: Client) -> None:
    """One round trip: raises ConnectionLost when the session is gone."""
    client.records(load("ping"), _One)


# -- settings in effect -----------------------------------------------------------------------


@dataclass(frozen=True)
class EffectiveSetting:
    """One row of pg_settings as the server has it now (queries/effective_settings.sql)."""

    name: str  # as pg_settings spells it (DateStyle)
    setting: str | None  # in the setting's unit: "16384" for shared_buffers with unit 8kB
    shown: str  # as SHOW prints it: "128MB"
    unit: str | None
    vartype: str
    source: str
    context: str  # postmaster: a change needs a restart
    pending_restart: bool  # a value in the files waits for a restart
    boot_val: str | None


def effective_settings(
    client: Client, names: Iterable[str] | None = None
) -> dict[str, EffectiveSetting]:
    """The settings among `names` the server has (matched case-insensitively), or every one
    the role may see (`names` None), by pg_settings' own name; a name the server lacks is left
    out."""
    lowered = None if names is None else sorted({name.lower() for name in names})
    if lowered == []:
        return {}
    rows = client.records(load("effective_settings"), EffectiveSetting, {"names": lowered})
    return {row.name: row for row in rows}


def non_default_settings(client: Client) -> dict[str, str]:
    """name -> value with unit ("shared_buffers" -> "16384 8kB") of every setting that does
    not come from the built-in default, for the run record."""
    return {
        name: f"{s.setting} {s.unit}" if s.unit else str(s.setting)
        for name, s in effective_settings(client).items()
        if s.source not in ("default", "override")
    }


@dataclass(frozen=True)
class FileError:
    """A line of the configuration files the server refused (queries/file_setting_errors.sql)."""

    name: str  # the setting, or the file for a line without one
    setting: str | None
    error: str


def file_errors(client: Client) -> list[FileError]:
    """Every line of the configuration files the server refused or could not apply, in file
    order (pg_file_settings: InsufficientPrivilege without superuser)."""
    return client.records(load("file_setting_errors"), FileError)


@dataclass(frozen=True)
class _Value:
    value: str | None


def custom_setting(client: Client, name: str) -> str | None:
    """A setting as SHOW prints it, None when unset (a custom setting never set)."""
    return client.records(load("custom_setting"), _Value, {"name": name})[0].value


def alter_system_entry(client: Client, name: str, value: str | None) -> None:
    """ALTER SYSTEM SET `name` = `value` in postgresql.auto.conf; RESET when `value` is None.
    Nothing is reloaded."""
    if value is None:
        client.execute(compose("ALTER SYSTEM RESET {}", identifier(name)))
    else:
        client.execute(compose("ALTER SYSTEM SET {} = {}", identifier(name), literal(value)))


def set_placeholder(client: Client, name: str) -> None:
    """SET a custom setting to '' in this session: PostgreSQL before 17 refuses ALTER SYSTEM for
    a custom setting the session has not seen."""
    client.execute(compose("SET {} = ''", identifier(name)))


# -- reload and wait --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Now:
    now: datetime


@dataclass(frozen=True)
class _Loaded:
    loaded: bool


@dataclass(frozen=True)
class _Asked:
    asked: bool


def server_clock(client: Client) -> datetime:
    """The server's clock now (clock_timestamp())."""
    return client.records(load("server_clock"), _Now)[0].now


def reload_conf(client: Client) -> None:
    """pg_reload_conf(): the postmaster re-reads its files a moment later."""
    client.records(load("reload_conf"), _Asked)


def conf_loaded_since(client: Client, since: datetime) -> bool:
    """Whether the postmaster has read its files again at or after `since` (its clock)."""
    return client.records(load("conf_loaded_since"), _Loaded, {"since": since})[0].loaded


def reloaded(
    dsn: str, password: str | None, label: str, request: Callable[[Client], None] | None = None
) -> None:
    """Ask for a reload (`request`, default pg_reload_conf()) and wait until the postmaster has
    read its files again; ClusterError after RELOAD_WAIT_S."""
    with connect(dsn, password) as client:
        asked = server_clock(client)
        (request or reload_conf)(client)
    deadline = time.monotonic() + RELOAD_WAIT_S
    while time.monotonic() < deadline:
        with connect(dsn, password) as client:
            if conf_loaded_since(client, asked):
                return
        time.sleep(0.05)
    raise ClusterError(
        f"{label} did not reload its configuration within {RELOAD_WAIT_S:.0f} s: check the "
        "server's log."
    )
