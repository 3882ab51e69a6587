"""The check of a plan's setting values against what the target server accepts.

The metadata comes from the server's pg_settings (`settings_meta`), the reading of values
from PostgreSQL's own rules (`setting_values`), so an invalid plan fails in seconds with one
sentence instead of a server that does not start.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping

from pgdyno.errors import UsageError
from pgdyno.postgres.setting_values import (
    UNIT_KINDS,
    convert_to_setting_unit,
    format_amount,
    parse_bool,
    read_number,
    unit_kind,
)
from pgdyno.postgres.settings_meta import SettingMeta

# Spellings PostgreSQL accepts for some enums although pg_settings.enumvals leaves them out
# ("hidden" entries of guc_tables.c), keyed by a listed value that marks the option table.
HIDDEN_ENUM_VALUES: Mapping[str, Mapping[str, str]] = {
    # every enum with on/off (huge_pages, synchronous_commit, wal_compression, ...)
    "off": {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"},
    # message levels (client_min_messages, log_min_messages, icu_validation_level)
    "debug2": {"debug": "debug2", "info": "info"},
    # wal_level's names from before 9.6
    "minimal": {"archive": "replica", "hot_standby": "replica"},
}

# A max_val this large (random_page_cost: DBL_MAX) is no limit worth naming.
UNBOUNDED = 1e300


def check_settings(
    meta: Mapping[str, SettingMeta], settings: Mapping[str, object], version: str
) -> dict[str, str]:
    """`check_setting` for every entry of a plan's settings table."""
    return {name: check_setting(meta, name, value, version) for name, value in settings.items()}


def check_setting(
    meta: Mapping[str, SettingMeta], name: str, value: object, version: str,
    *, source: str = "the plan",
) -> str:  # fmt: skip
    """The value as postgresql.conf text, or a UsageError saying what is wrong and what to do.

    `value` is what a TOML plan holds: str, int, float or bool. `version` names the server in
    messages ("16" or "16.4"). Booleans come back as on/off and enums in their listed spelling;
    numbers as written ("6GB" stays "6GB"), because PostgreSQL reads them the same way.

    >>> from pgdyno.postgres.settings_meta import settings_meta_from_rows
    >>> meta = settings_meta_from_rows(
    ...     [("jit", "bool", None, None, None, None, "user", "on"),
    ...      ("max_connections", "integer", None, "1", "262143", None, "postmaster", "100")])
    >>> check_setting(meta, "jit", False, "18"), check_setting(meta, "max_connections", 200, "18")
    ('off', '200')
    >>> try:
    ...     check_setting(meta, "max_connection", 200, "18")
    ... except UsageError as exc:
    ...     print(exc)
    PostgreSQL 18 has no setting 'max_connection': did you mean max_connections?
    """
    entry = _lookup(meta, name)
    if entry is None:
        if "." in name:  # an extension's setting (pg_stat_statements.max): not known until loaded
            return _as_text(name, value, "a string, number or boolean")
        raise UsageError(_unknown(meta, name, version, source))
    text = _as_text(name, value, _describe(entry))
    if entry.context == "internal":
        raise UsageError(
            f"{name} is fixed when PostgreSQL {version} is built or initialized and cannot be set: "
            f"remove it from {source}."
        )
    if entry.vartype == "bool":
        return _check_bool(entry, text, value, version)
    if entry.vartype in ("integer", "real"):
        return _check_number(entry, text, value, version)
    if entry.vartype == "enum":
        return _check_enum(entry, text, value, version)
    return text  # a string: PostgreSQL takes it as it is


def _lookup(meta: Mapping[str, SettingMeta], name: str) -> SettingMeta | None:
    # Setting names are case-insensitive (pg_settings itself has DateStyle and TimeZone).
    entry = meta.get(name)
    if entry is None:
        wanted = name.lower()
        entry = next((m for key, m in meta.items() if key.lower() == wanted), None)
    return entry


def _unknown(meta: Mapping[str, SettingMeta], name: str, version: str, source: str) -> str:
    names = {key.lower(): key for key in meta}
    close = difflib.get_close_matches(name.lower(), names, n=1)
    if close:
        return f"PostgreSQL {version} has no setting {name!r}: did you mean {names[close[0]]}?"
    return (
        f"PostgreSQL {version} has no setting {name!r}: check the name in the documentation of "
        f"that version or remove it from {source}."
    )


def _as_text(name: str, value: object, expected: str) -> str:
    """A plan value as the text PostgreSQL would read from postgresql.conf."""
    if isinstance(value, bool):  # before int: bool is an int
        return "on" if value else "off"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same number
    if isinstance(value, str):
        return value
    raise UsageError(
        f"{name} is given a {type(value).__name__} ({value!r}): write one value, {expected}."
    )


def _shown(value: object) -> str:
    """A value in a message as the plan wrote it.

    >>> _shown("6GB"), _shown(True), _shown(1.1), _shown("")
    ('6GB', 'true', '1.1', "''")
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and value.strip() == value else repr(value)
    return repr(value)


def _describe(entry: SettingMeta) -> str:
    """What the setting takes, for messages."""
    if entry.vartype == "bool":
        return "on or off"
    if entry.vartype == "enum":
        return f"one of {_or_list(entry.enumvals)}" if entry.enumvals else "one of its values"
    if entry.vartype == "string":
        return "a string"
    number = "a whole number" if entry.vartype == "integer" else "a number"
    kind = unit_kind(entry.unit)
    if kind is None:
        return number
    return (
        f"{number} with a {kind} unit ({_units(kind)}; a bare number counts in units of "
        f"{entry.unit})"
    )


def _units(kind: str) -> str:
    """
    >>> _units("memory")
    'B, kB, MB, GB or TB'
    """
    return _or_list(reversed(list(UNIT_KINDS[kind])))


def _or_list(items: Iterable[str]) -> str:
    """
    >>> _or_list(["a"]), _or_list(["a", "b", "c"])
    ('a', 'a, b or c')
    """
    shown = [item if item else "''" for item in items]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _check_bool(entry: SettingMeta, text: str, value: object, version: str) -> str:
    result = parse_bool(text)
    if result is None:
        raise UsageError(
            f"{entry.name} = {_shown(value)} is not valid in PostgreSQL {version}, where "
            f"{entry.name} is on or off: write true or false (on/off, yes/no and 1/0 also work)."
        )
    return "on" if result else "off"


def _check_enum(entry: SettingMeta, text: str, value: object, version: str) -> str:
    if not entry.complete:
        return text.strip()
    lowered = text.lower()
    for listed in entry.enumvals:
        if listed.lower() == lowered:
            return listed
    for marker, aliases in HIDDEN_ENUM_VALUES.items():
        if marker in entry.enumvals and lowered in aliases:
            return aliases[lowered]
    raise UsageError(
        f"{entry.name} = {_shown(value)} is not valid in PostgreSQL {version}: use "
        f"{_describe(entry)}."
    )


def _check_number(entry: SettingMeta, text: str, value: object, version: str) -> str:
    name, integer = entry.name, entry.vartype == "integer"
    read = read_number(text, integer=integer)
    if read is None:
        raise UsageError(f"{name} = {_shown(value)} is not a number: write {_describe(entry)}.")
    number, unit = read
    if unit:
        kind = unit_kind(entry.unit)
        if not entry.complete:
            return text.strip()  # its unit is not known here: PostgreSQL will judge
        if entry.unit is None:
            raise UsageError(
                f"{name} = {_shown(value)} has a unit, but {name} takes "
                f"{_describe(entry)}: drop {unit!r}."
            )
        if kind is None:
            return text.strip()  # a unit this module does not know: PostgreSQL will judge
        number = _convert_or_raise(entry, kind, number, unit, value)
    if integer and math.isfinite(number):
        number = float(round(number))  # as rint(): to the nearest, ties to even
    low, high = entry.min_val, entry.max_val
    if low is not None and high is not None and not low <= number <= high:
        allowed = f"at least {format_amount(low, entry.unit)}"
        if high < UNBOUNDED:
            allowed = (
                f"between {format_amount(low, entry.unit)} and {format_amount(high, entry.unit)}"
            )
        raise UsageError(
            f"{name} = {_shown(value)} is out of range for PostgreSQL {version}: use a value "
            f"{allowed}."
        )
    return text.strip()


def _convert_or_raise(
    entry: SettingMeta, kind: str, number: float, unit: str, value: object
) -> float:
    assert entry.unit is not None
    converted = convert_to_setting_unit(number, unit, entry.unit)
    if converted is not None:
        return converted
    valid = _units(kind)
    other = next((k for k, table in UNIT_KINDS.items() if unit in table and k != kind), None)
    if other is not None:
        raise UsageError(
            f"{entry.name} = {_shown(value)} has the {other} unit {unit!r}, but {entry.name} is "
            f"a {kind} setting: use one of {valid}."
        )
    raise UsageError(
        f"{entry.name} = {_shown(value)} has an unknown unit {unit!r}: use one of {valid} "
        f"(case matters), or a bare number for units of {entry.unit}."
    )
