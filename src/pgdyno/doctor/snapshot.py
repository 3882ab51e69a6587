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
from pgdyno.expressions.expr import Facts
from pgdyno.postgres.settings import setting_value
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
