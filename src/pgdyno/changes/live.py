"""Waiting until a change is in effect, and telling whether it is.

`wait_for_server` waits for a restarted server to accept connections (the wait for a reload is
`postgres.server.reloaded`). `same_value` tells whether a value means what pg_settings shows,
as PostgreSQL reads both.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pgdyno.errors import PgdynoError
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.server import effective_settings
from pgdyno.postgres.settings import SettingMeta, convert_to_setting_unit, parse_bool, read_number

START_WAIT_S = 120.0


def wait_for_server(dsn: str, password: str | None, timeout: float = START_WAIT_S) -> None:
    """Until the server accepts a connection again (after a restart)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with connect(dsn, password):
                return
        except PgdynoError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def waiting_for_restart(client: Client, names: list[str]) -> list[str]:
    """The settings among `names` whose file value the running server has not taken because it
    needs a restart (pg_settings.pending_restart), in order."""
    found = effective_settings(client, names)
    return [name for name, setting in found.items() if setting.pending_restart]


def by_lower_name(meta: Mapping[str, SettingMeta]) -> dict[str, SettingMeta]:
    return {name.lower(): m for name, m in meta.items()}  # plan names are lower case


def restart_settings(pg: Mapping[str, str], meta: Mapping[str, SettingMeta]) -> list[str]:
    """The settings of `pg` that need a restart and differ from the server's (as found).

    >>> from pgdyno.postgres.settings import settings_meta_from_rows
    >>> meta = settings_meta_from_rows(
    ...     [("shared_buffers", "integer", "8kB", "16", "1073741823", None, "postmaster", "16384"),
    ...      ("work_mem", "integer", "kB", "64", "2147483647", None, "user", "4096")])
    >>> restart_settings({"shared_buffers": "128MB", "work_mem": "8MB"}, meta)
    []
    >>> restart_settings({"shared_buffers": "256MB"}, meta)
    ['shared_buffers']
    """
    by_name = by_lower_name(meta)
    return [
        name
        for name, value in pg.items()
        if (m := by_name.get(name.lower())) and m.needs_restart and not same_value(m, value)
    ]


def same_value(meta: SettingMeta, text: str) -> bool:
    """Whether `text` (a checked value) means the value `meta` shows (pg_settings.setting, in
    the setting's own unit), as PostgreSQL reads both.

    >>> from pgdyno.postgres.settings import SettingMeta as M
    >>> sb = M("shared_buffers", "integer", "8kB", 16, 1e9, (), "postmaster", "16384")
    >>> same_value(sb, "128MB"), same_value(sb, "131072kB"), same_value(sb, "1GB")
    (True, True, False)
    >>> jit = M("jit", "bool", None, None, None, (), "user", "on")
    >>> same_value(jit, "on"), same_value(jit, "off"), same_value(jit, "true")
    (True, False, True)
    """
    current = meta.setting
    if current is None:
        return False
    if meta.vartype == "bool":
        wanted = parse_bool(text)
        return wanted is not None and wanted == parse_bool(current)
    if meta.vartype in ("integer", "real"):
        number = _number(meta, text)
        return number is not None and number == _number(meta, current)
    if meta.vartype == "enum":
        return text.lower() == current.lower()
    return text == current


def _number(meta: SettingMeta, text: str) -> float | None:
    integer = meta.vartype == "integer"
    read = read_number(text, integer=integer)
    if read is None:
        return None
    number, unit = read
    if unit:
        if meta.unit is None:
            return None
        converted = convert_to_setting_unit(number, unit, meta.unit)
        if converted is None:
            return None
        number = converted
    return float(round(number)) if integer else number
