"""PostgreSQL settings as pgdyno reads and checks them: what each setting accepts on a server
(`SettingMeta`, read from the target version's own pg_settings), PostgreSQL's reading of values
and units (guc.c), and the check of a plan's values against both.

A plan is judged by the server it will run on: `wal_compression = "lz4"` is fine on 15 and a
mistake on 14. The reading of values follows parse_bool, parse_int, parse_real and the unit
tables of guc.c, so that a value accepted here is accepted at startup, and an invalid plan fails
in seconds with one sentence instead of a server that does not start. The values in effect on a
running server are read by `postgres.server.effective_settings`; the recorded catalog of every
supported version is `settings_catalog`.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgdyno.errors import UsageError
from pgdyno.postgres.queries import load
from pgdyno.textsafe import strict_json

if TYPE_CHECKING:
    from pgdyno.postgres.client import Client


# -- reading values: booleans, numbers and units, as guc.c does -------------------------------

# Units PostgreSQL accepts in values, largest first (convert_to_base_unit relies on the order),
# with their size in bytes or microseconds. Case matters: "mb" is not a unit.
MEMORY_UNITS: Mapping[str, int] = {
    "TB": 1024**4, "GB": 1024**3, "MB": 1024**2, "kB": 1024, "B": 1,
}  # fmt: skip
TIME_UNITS: Mapping[str, int] = {
    "d": 86_400_000_000, "h": 3_600_000_000, "min": 60_000_000, "s": 1_000_000, "ms": 1000,
    "us": 1,
}  # fmt: skip
UNIT_KINDS: Mapping[str, Mapping[str, int]] = {"memory": MEMORY_UNITS, "time": TIME_UNITS}

# parse_bool: these words and any prefix of them, case-insensitively; "on" and "off" need at
# least two letters ("o" is ambiguous); "1" and "0" only as a whole.
BOOL_WORDS: Mapping[str, bool] = {"true": True, "false": False, "yes": True, "no": False}

# What C's strtol(s, &end, 0) reads (hex, octal or decimal), and what strtod reads (decimal or
# hex, with fraction and exponent, inf, nan). parse_int tries strtol and falls back to strtod
# where strtol stopped at '.', 'e' or 'E'.
_STRTOL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_STRTOD = re.compile(
    r"""\s*[+-]?(?:
        0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?
        | (?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?
        | inf(?:inity)? | nan
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_UNIT = re.compile(r"([0-9]*)([A-Za-z]+)")


def parse_bool(text: str) -> bool | None:
    """PostgreSQL's reading of a boolean, or None.

    >>> parse_bool("Yes"), parse_bool("of"), parse_bool("t"), parse_bool("o"), parse_bool("2")
    (True, False, True, None, None)
    """
    lowered = text.lower()
    if lowered in ("1", "0"):
        return lowered == "1"
    if len(lowered) >= 2 and "on".startswith(lowered):
        return True
    if len(lowered) >= 2 and "off".startswith(lowered):
        return False
    for word, result in BOOL_WORDS.items():
        if lowered and word.startswith(lowered):
            return result
    return None


def read_number(text: str, *, integer: bool) -> tuple[float, str] | None:
    """The number at the start of `text` as PostgreSQL reads it and what follows it, a unit
    ("" for none; blanks around it do not count), or None when there is no number.

    >>> read_number("64 MB", integer=True), read_number("010", integer=True)  # strtol: octal
    ((64.0, 'MB'), (8.0, ''))
    >>> read_number("1.5e3ms", integer=False), read_number("lots", integer=True)
    ((1500.0, 'ms'), None)
    """
    number: float | None = None
    end = 0
    if integer:
        match = _STRTOL.match(text)
        end = match.end() if match else 0  # strtol reads nothing: its end is the start
        if match and text[end : end + 1] not in (".", "e", "E"):
            sign, digits = match.groups()
            base = 16 if digits[:2] in ("0x", "0X") else 8 if digits[:1] == "0" else 10
            magnitude = int(digits, base)
            number = float(-magnitude if sign == "-" else magnitude)
        elif text[end : end + 1] not in (".", "e", "E"):
            return None
    if number is None:
        match = _STRTOD.match(text)
        if match is None:
            return None
        token = match.group().strip().lower()
        number = float.fromhex(token) if "x" in token else float(token)
        if math.isnan(number) or _underflows(token, number):
            return None
        end = match.end()
    return number, " ".join(text[end:].split())


def _underflows(token: str, number: float) -> bool:
    """Whether strtod reports ERANGE for a nonzero number too small for a normal double, which
    PostgreSQL treats as invalid.

    >>> _underflows("1e-400", 0.0), _underflows("0e-400", 0.0), _underflows("0x1p-1", 0.5)
    (True, False, False)
    """
    if number != 0 and abs(number) >= sys.float_info.min:
        return False
    hexadecimal = "x" in token
    mantissa = token.partition("p" if hexadecimal else "e")[0]
    if hexadecimal:
        mantissa = mantissa.partition("x")[2]
    return any(digit not in "0." for digit in mantissa.lstrip("+-"))


def convert_to_setting_unit(number: float, unit: str, setting_unit: str) -> float | None:
    """`number` of `unit` counted in `setting_unit`, or None if the unit does not apply.

    As PostgreSQL does, a fractional value is first rounded to whole units of the next smaller
    unit: "1.0004GB" is 1GB + 0MB, not 1GB + 0.41MB.

    >>> convert_to_setting_unit(6, "GB", "8kB"), convert_to_setting_unit(5, "min", "s")
    (786432.0, 300.0)
    >>> convert_to_setting_unit(1.0004, "GB", "kB"), convert_to_setting_unit(1, "s", "kB")
    (1048576.0, None)
    """
    kind = unit_kind(setting_unit)
    if kind is None or unit not in UNIT_KINDS[kind]:
        return None
    table = UNIT_KINDS[kind]
    base = unit_size(setting_unit)
    names = list(table)
    position = names.index(unit)
    converted = number * (table[unit] / base)
    if position + 1 < len(names) and math.isfinite(converted):
        step = table[names[position + 1]] / base
        converted = round(converted / step) * step
    return converted


def unit_kind(unit: str | None) -> str | None:
    """ "memory", "time" or None for a setting's unit such as "8kB" or "min"."""
    if unit is None:
        return None
    match = _UNIT.fullmatch(unit)
    if match and match[2] in MEMORY_UNITS:
        return "memory"
    if unit in TIME_UNITS:
        return "time"
    return None


def unit_size(unit: str) -> int:
    """A setting's unit in bytes or microseconds ("8kB" -> 8192); its kind must be known."""
    if unit in TIME_UNITS:
        return TIME_UNITS[unit]
    match = _UNIT.fullmatch(unit)
    assert match is not None
    return int(match[1] or 1) * MEMORY_UNITS[match[2]]


def show_text(setting: str, unit: str | None) -> str:
    """A pg_settings `setting` in its `unit` as SHOW prints it (guc.c's _ShowOption): a positive
    amount in the largest unit that holds it whole (a real: the largest within 1e-8 of whole,
    else the smallest, printed as %g), 0 and negative values bare, anything else as it is.

    >>> show_text("16384", "8kB"), show_text("16385", "8kB"), show_text("300", "s")
    ('128MB', '131080kB', '5min')
    >>> show_text("-1", "kB"), show_text("0", "ms"), show_text("2", "ms"), show_text("on", None)
    ('-1', '0', '2ms', 'on')
    >>> show_text("0.5", "ms"), show_text("1.5", "min")
    ('500us', '90s')
    """
    kind = unit_kind(unit)
    number = _number(setting)
    if unit is None or kind is None or number is None or number <= 0:
        return setting
    amount = Fraction(setting) * unit_size(unit)  # exact, in bytes or microseconds
    table, base, real = UNIT_KINDS[kind], unit_size(unit), "." in setting
    for name, size in table.items():  # largest first, as guc.c's conversion tables
        value = amount / size
        if real and _nearly_whole(float(value)):
            return f"{_g(float(value))}{name}"
        if not real and (size <= base or value.denominator == 1):
            return f"{round(value)}{name}"
    smallest = list(table)[-1]
    return f"{_g(float(amount / table[smallest]))}{smallest}"


def shown_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """A run's recorded settings ("16384 8kB": pg_settings' setting and unit) as SHOW prints
    them ("128MB"); a value without a unit stays as it is.

    >>> shown_settings({"shared_buffers": "16384 8kB", "jit": "off", "port": "54330"})
    {'shared_buffers': '128MB', 'jit': 'off', 'port': '54330'}
    """
    shown = {}
    for name, text in settings.items():
        setting, _, unit = text.rpartition(" ")
        shown[name] = show_text(setting, unit) if setting and unit_kind(unit) else text
    return shown


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _nearly_whole(value: float) -> bool:
    return value > 0 and abs(round(value) / value - 1.0) <= 1e-8


def _g(value: float) -> str:
    """C's %g: six significant digits, no trailing zeros."""
    return f"{value:g}"


def format_amount(value: float, unit: str | None) -> str:
    """`value` counted in a setting's `unit`, in the largest unit that shows it readably; exact
    where that is short, else to three digits with "just under" or "just over".

    >>> format_amount(16, "8kB"), format_amount(16384, "8kB"), format_amount(86400, "s")
    ('128kB', '128MB', '1d')
    >>> format_amount(1073741823, "8kB"), format_amount(2147483647, "ms")
    ('just under 8TB', 'just under 24.9d')
    >>> format_amount(-1, "ms"), format_amount(2.5, "ms"), format_amount(1.1, None)
    ('-1', '2.5ms', '1.1')
    """
    kind = unit_kind(unit)
    if unit is None or kind is None or value <= 0:
        return _plain(value)  # 0 and -1 mean the same in any unit: write them bare
    table = UNIT_KINDS[kind]
    amount = Fraction(value) * unit_size(unit)  # exact, in bytes or microseconds
    fitting = [name for name, size in table.items() if amount >= size]
    if not fitting:
        return f"{_plain(value)}{unit}"
    for name in fitting:
        exact = _short_decimal(amount / table[name])
        if exact is not None:
            return f"{exact}{name}"
    largest = fitting[0]
    approx = float(amount / table[largest])
    places = max(0, 3 - (math.floor(math.log10(approx)) + 1))
    rounded = round(approx, places)
    text = f"{rounded:.{places}f}".rstrip("0").rstrip(".") if places else f"{rounded:.0f}"
    return f"{'just under' if rounded > approx else 'just over'} {text}{largest}"


def _short_decimal(quantity: Fraction) -> str | None:
    """A positive quantity as a decimal of at most six digits before and three after the point,
    if that is exact.

    >>> _short_decimal(Fraction(5, 2)), _short_decimal(Fraction(1, 3)), _short_decimal(Fraction(8))
    ('2.5', None, '8')
    """
    scaled = quantity * 1000
    if scaled.denominator != 1 or quantity >= 1_000_000:
        return None
    whole, fraction = divmod(int(scaled), 1000)
    return str(whole) if fraction == 0 else f"{whole}.{fraction:03d}".rstrip("0")


def _plain(value: float) -> str:
    """
    >>> _plain(16.0), _plain(1.1), _plain(1.79769e308)
    ('16', '1.1', '1.79769e+308')
    """
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


# -- what each setting accepts on one server --------------------------------------------------

# The columns of queries/settings_meta.sql, in order; also the keys of the recorded JSON rows.
COLUMNS = ("name", "vartype", "unit", "min_val", "max_val", "enumvals", "context", "setting")


@dataclass(frozen=True, slots=True)
class SettingMeta:
    """One row of pg_settings: what the setting accepts on one server."""

    name: str
    vartype: str  # "bool", "integer", "real", "string" or "enum"
    unit: str | None  # "8kB", "kB", "MB", "B", "ms", "s", "min" or None
    min_val: float | None  # in `unit`; None for bool, enum and string
    max_val: float | None
    enumvals: tuple[str, ...]  # empty unless an enum
    context: str  # "postmaster", "sighup", "user", "internal", ...
    setting: str | None = None  # its value on the server the metadata was read from
    # False when only `postgres --describe-config` knew the setting: it gives no unit and no
    # enum values, so values with a unit, and enum values, are left to PostgreSQL to judge.
    complete: bool = True

    @property
    def needs_restart(self) -> bool:
        return self.context == "postmaster"


def load_settings_meta(client: Client) -> dict[str, SettingMeta]:
    """The metadata of every setting of the server `client` is connected to."""
    return settings_meta_from_rows(client.rows(load("settings_meta")))


def settings_meta_from_rows(rows: Iterable[Sequence[Any]]) -> dict[str, SettingMeta]:
    """Rows of queries/settings_meta.sql (columns as in `COLUMNS`) -> name -> metadata.

    >>> meta = settings_meta_from_rows(
    ...     [("work_mem", "integer", "kB", "64", "2147483647", None, "user", "4096")])
    >>> meta["work_mem"].max_val, meta["work_mem"].needs_restart
    (2147483647.0, False)
    """
    meta: dict[str, SettingMeta] = {}
    for name, vartype, unit, min_val, max_val, enumvals, context, setting in rows:
        meta[str(name)] = SettingMeta(
            name=str(name),
            vartype=str(vartype),
            unit=str(unit) if unit else None,
            min_val=None if min_val is None else float(min_val),
            max_val=None if max_val is None else float(max_val),
            enumvals=tuple(str(v) for v in enumvals or ()),
            context=str(context),
            setting=None if setting is None else str(setting),
        )
    return meta


def settings_meta_from_json(path: Path | str) -> dict[str, SettingMeta]:
    """Metadata recorded as a JSON list of row objects (see tests/data/pg_settings)."""
    docs = json.loads(Path(path).read_text())
    return settings_meta_from_rows(tuple(doc[column] for column in COLUMNS) for doc in docs)


def settings_meta_to_json(meta: Mapping[str, SettingMeta]) -> str:
    """The JSON that `settings_meta_from_json` reads: rows by name, values as pg_settings has
    them (min_val and max_val as text)."""
    docs = [
        {
            "name": m.name,
            "vartype": m.vartype,
            "unit": m.unit,
            "min_val": _bound_text(m.min_val, m.vartype),
            "max_val": _bound_text(m.max_val, m.vartype),
            "enumvals": list(m.enumvals) if m.enumvals else None,
            "context": m.context,
            "setting": m.setting,
        }
        for m in sorted(meta.values(), key=lambda m: m.name)
    ]
    return strict_json(docs, indent=1) + "\n"


def _bound_text(value: float | None, vartype: str) -> str | None:
    """min_val/max_val as pg_settings writes them: %d for integers, %g for reals.

    >>> _bound_text(2147483647.0, "integer"), _bound_text(1.79769e308, "real")
    ('2147483647', '1.79769e+308')
    """
    if value is None:
        return None
    if vartype == "integer" and value.is_integer():
        return str(int(value))
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


# -- checking a plan's values -----------------------------------------------------------------

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

    >>> from pgdyno.postgres.settings import settings_meta_from_rows
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


# -- a setting's value in base units (the doctor's facts, tune's current values) --------------


def setting_value(row: Mapping[str, Any]) -> Any:
    """A pg_settings row as a value in base units: memory in bytes, time in seconds, booleans
    as True/False. Negative numbers are kept as they are: they mean "automatic" or "unset".

    >>> setting_value({"setting": "16384", "unit": "8kB", "vartype": "integer"})
    134217728
    >>> setting_value({"setting": "300", "unit": "s", "vartype": "integer"})
    300.0
    >>> setting_value({"setting": "-1", "unit": "kB", "vartype": "integer"})
    -1
    >>> setting_value({"setting": "on", "vartype": "bool"}), setting_value({"setting": "0.9"})
    (True, 0.9)
    """
    text, vartype, unit = row.get("setting"), row.get("vartype"), row.get("unit")
    if text is None:
        return None
    if vartype is None:  # written by hand: a postgresql.conf value such as '16GB' or 'on'
        return conf_value(str(text))
    if vartype == "bool":
        return text == "on"
    if vartype not in ("integer", "real"):
        return text
    number: float = int(text) if vartype == "integer" else float(text)
    return number if number < 0 else in_base_units(number, unit)


def in_base_units(number: float, unit: str | None) -> float:
    """An amount of a setting's unit in bytes (int) or seconds; other amounts as they are.

    >>> in_base_units(2, "8kB"), in_base_units(1.5, "min"), in_base_units(0.9, None)
    (16384, 90.0, 0.9)
    """
    kind = unit_kind(unit)
    if kind is None or unit is None:
        return number
    if kind == "memory":
        return int(number * unit_size(unit))
    return number * unit_size(unit) / 1_000_000


class Switch(str):
    """'on' or 'off' written by hand, without saying whether the setting is a boolean (fsync)
    or an enum with on/off among its values (synchronous_commit, huge_pages): it compares as
    the word and is true or false as PostgreSQL reads the boolean.

    >>> off = Switch("off")
    >>> off == "off", not off, Switch("on") == "on", bool(Switch("yes"))
    (True, True, True, True)
    """

    def __bool__(self) -> bool:
        return bool(parse_bool(self))


def conf_value(text: str) -> Any:
    """A value as written in postgresql.conf, in the same base units as `setting_value`.

    >>> conf_value("16GB"), conf_value("30s"), conf_value("0.9"), bool(conf_value("off"))
    (17179869184, 30.0, 0.9, False)
    >>> conf_value("lz4"), conf_value("-1"), conf_value("8 kB")
    ('lz4', -1, 8192)
    """
    read = read_number(text.strip(), integer=False)
    if read is not None:
        number, unit = read
        whole = number.is_integer() and not any(c in text for c in ".eE")
        amount: float = int(number) if whole else number
        if not unit:
            return amount
        if unit_kind(unit) is not None:
            return in_base_units(amount, unit)
        return text
    if parse_bool(text.strip()) is not None:
        return Switch(text.strip().lower())
    return text
