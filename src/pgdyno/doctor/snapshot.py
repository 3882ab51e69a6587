"""A doctor snapshot: the facts of one host and server as a JSON object (docs/doctor-snapshot.md).

Reading a snapshot checks only its outer shape; a missing fact is not an error but an unknown
that the rules needing it report as not checked. `scope` turns a snapshot into the names the
rule expressions see, with PostgreSQL settings in base units.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.knowledge.expr import Facts
from pgdyno.postgres.settings import parse_bool, read_number, unit_kind, unit_size
from pgdyno.textsafe import strict_json, strict_loads

FORMAT = "pgdyno-doctor/1"
SECTIONS = ("host", "devices", "server", "unread")
NAMESPACES = frozenset({"host", "data", "wal", "devices", "server", "pg", "pg_source"})


def load_snapshot(path: Path) -> dict[str, Any]:
    """Read and check a snapshot file; UsageError with one sentence when it is not one."""
    try:
        data = strict_loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read snapshot {path} ({exc.strerror}).") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, NaN or Infinity
        raise UsageError(f"{path} is not a JSON file ({exc}); give a file written by "
                         "`pgdyno doctor --snapshot`.") from None  # fmt: skip
    return check_snapshot(data, str(path))


def check_snapshot(data: Any, name: str) -> dict[str, Any]:
    """The outer shape: a JSON object of this format whose sections are objects or null.

    >>> check_snapshot({"format": "pgdyno-doctor/1", "host": None}, "x")["host"] is None
    True
    >>> check_snapshot({"format": "other"}, "x.json")
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: x.json is not a pgdyno doctor snapshot (format 'other', expected \
'pgdyno-doctor/1'); see docs/doctor-snapshot.md.
    """
    if not isinstance(data, dict):
        raise UsageError(f"{name} is not a pgdyno doctor snapshot (not a JSON object); see "
                         "docs/doctor-snapshot.md.")  # fmt: skip
    if data.get("format") != FORMAT:
        raise UsageError(
            f"{name} is not a pgdyno doctor snapshot (format {data.get('format')!r}, expected "
            f"{FORMAT!r}); see docs/doctor-snapshot.md."
        )
    for section in SECTIONS:
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise UsageError(f"{name}: {section!r} must be a JSON object or null; see "
                             "docs/doctor-snapshot.md.")  # fmt: skip
    return data


def save_snapshot(path: Path, snapshot: Mapping[str, Any]) -> None:
    path.write_text(strict_json(snapshot) + "\n")


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


def kernel_version(release: str) -> tuple[int, ...]:
    """
    >>> kernel_version("3.2.0-70-generic"), kernel_version("6.18.44-fc-v669")
    ((3, 2, 0), (6, 18, 44))
    """
    return tuple(int(part) for part in re.findall(r"\d+", release.split("-")[0])[:3])


def scope(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The names rule expressions see: host, data, wal, devices, server, pg, pg_source."""
    host = dict(snapshot.get("host") or {})
    if host.get("kernel_release"):
        host["kernel_version"] = kernel_version(str(host["kernel_release"]))
    devices = snapshot.get("devices") or {}
    server = dict(snapshot.get("server") or {})
    settings: Mapping[str, Mapping[str, Any]] = server.pop("settings", None) or {}
    if settings:  # changed in the configuration, still waiting for a restart
        server["pending_restart"] = ", ".join(
            sorted(name for name, row in settings.items() if row.get("pending_restart"))
        )
    return {
        "host": Facts("host", host),
        "devices": Facts("devices", devices),
        "data": Facts("data", devices.get("data") or {}),
        "wal": Facts("wal", devices.get("wal") or {}),
        "server": Facts("server", server),
        "pg": Facts("pg", {name: setting_value(row) for name, row in settings.items()}),
        "pg_source": Facts(
            "pg_source", {name: row.get("source") for name, row in settings.items()}
        ),
    }
