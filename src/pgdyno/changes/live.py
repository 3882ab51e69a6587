"""Telling whether a change is in effect: `same_value` tells whether a value means what
pg_settings shows, as PostgreSQL reads both; `restart_settings` which settings wait for a
restart. (Waiting for a reload or a restart is pgdyno.undo.server's.)
"""

from __future__ import annotations

from collections.abc import Mapping

from pgdyno.postgres.settings import SettingMeta, convert_to_setting_unit, parse_bool, read_number


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
