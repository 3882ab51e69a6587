"""PostgreSQL's reading of setting values: booleans, numbers and units, as guc.c does it.

Pure functions that follow parse_bool, parse_int, parse_real and the unit tables of guc.c, so
that a value accepted here is accepted at startup; and the way a value is written back for a
reader, in the largest unit that shows it.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from fractions import Fraction

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
