"""Pure helpers for postgresql.conf text and setting maps."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pgdyno.errors import UsageError

_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z0-9_]+)?$")


def quote_value(value: str) -> str:
    """Quote a value for postgresql.conf.

    >>> quote_value("128MB")
    "'128MB'"
    >>> quote_value("it's")
    "'it''s'"
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def render_settings(settings: Mapping[str, str], header: str) -> str:
    """A complete config file holding `settings`, one per line, in a stable order.

    >>> print(render_settings({"work_mem": "4MB", "port": "5432"}, "# x"), end="")
    # x
    port = '5432'
    work_mem = '4MB'
    """
    lines = [header]
    for name in sorted(settings):
        lines.append(f"{check_name(name)} = {quote_value(check_value(name, settings[name]))}")
    return "\n".join(lines) + "\n"


def check_value(name: str, value: str) -> str:
    """A value postgresql.conf can hold: a line break would end the quoted string early.

    >>> check_value("application_name", "a\\tb")
    'a\\tb'
    >>> check_value("application_name", "a\\nb")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: the value of application_name holds a control character ...
    """
    if any((ord(c) < 32 and c != "\t") or c == "\x7f" for c in value):
        raise UsageError(
            f"the value of {name} holds a control character (such as a line break), which "
            "postgresql.conf cannot hold: remove it."
        )
    return value


def check_name(name: str) -> str:
    """
    >>> check_name("shared_buffers")
    'shared_buffers'
    >>> check_name("x; rm -rf /")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: 'x; rm -rf /' is not a PostgreSQL setting name: ...
    """
    if not _NAME.fullmatch(name):  # not match(): "$" would let a trailing newline through
        raise UsageError(
            f"{name!r} is not a PostgreSQL setting name: use names like shared_buffers."
        )
    return name


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """`--set name=value` options into a map.

    >>> parse_assignments(["shared_buffers=1GB", "work_mem = 8MB"])
    {'shared_buffers': '1GB', 'work_mem': '8MB'}
    """
    settings: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip():
            raise UsageError(f"--set {item!r} is not NAME=VALUE: write e.g. --set work_mem=8MB.")
        name = check_name(name.strip().lower())
        settings[name] = check_value(name, value.strip())
    return settings


# A server log line: "2026-11-23 01:31:18.123 UTC [6479] LOG:  message".
_LOG_LINE = re.compile(r"\[\d+\] (?P<level>[A-Z]+\d?):\s+(?P<message>.*?)\s*$")
_PARAMETER = re.compile(r'parameter "(?P<name>[^"]+)"')


def refused_settings(log_lines: Iterable[str]) -> list[tuple[str | None, str]]:
    """Why PostgreSQL refused its configuration, from the log lines of a failed start.

    Each item is (setting name or None, PostgreSQL's own words with its hint); empty when the
    start failed for another reason.

    >>> refused_settings([
    ...     '2026-11-23 01:31:18.123 UTC [6479] LOG:  1 kB is outside the valid range for '
    ...     'parameter "work_mem" (64 .. 2147483647)',
    ...     '2026-11-23 01:31:18.123 UTC [6479] FATAL:  configuration file "/d/x.conf" contains '
    ...     'errors'])
    [('work_mem', '1 kB is outside the valid range for parameter "work_mem" (64 .. 2147483647)')]
    """
    found: list[tuple[str | None, str]] = []
    previous_found = False  # a HINT or DETAIL belongs to the line just before it
    for line in log_lines:
        match = _LOG_LINE.search(line)
        if match is None:
            continue
        level, message = match["level"], match["message"]
        if level in ("HINT", "DETAIL"):
            if previous_found:
                name, words = found[-1]
                found[-1] = (name, f"{words} ({message.rstrip('.')})")
            continue
        previous_found = _about_settings(message)
        if previous_found:
            param = _PARAMETER.search(message)
            found.append((param["name"] if param else None, message))
    return found


def _about_settings(message: str) -> bool:
    return (
        "parameter" in message
        and any(w in message for w in ("invalid", "outside", "unrecognized", "requires", "cannot"))
    ) or message.startswith("syntax error in file")
