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
        lines.append(f"{check_name(name)} = {quote_value(settings[name])}")
    return "\n".join(lines) + "\n"


def check_name(name: str) -> str:
    """
    >>> check_name("shared_buffers")
    'shared_buffers'
    >>> check_name("x; rm -rf /")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: 'x; rm -rf /' is not a PostgreSQL setting name: ...
    """
    if not _NAME.match(name):
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
        settings[check_name(name.strip().lower())] = value.strip()
    return settings
