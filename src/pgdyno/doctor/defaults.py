"""Settings a snapshot leaves out, taken as the defaults of the server's version.

A snapshot written by hand usually lists only the settings someone changed. When the server's
major version is known (`server.version_num`, or `server.version` such as "16.4"), a setting
it leaves out is taken as that version's default: its boot value as recorded in pgdyno's
catalog (postgres.settings_catalog.recorded_defaults), with `source` "default". Every value
taken this way is named, so the audit can say which of its conclusions rest on one.

A snapshot gathered from a live server (or copied whole from pg_settings) lists every setting
the auditing role could see: one missing there was hidden from it, not left at its default, so
nothing is filled in when the settings hold `server_version_num`, which every role sees. Nor is
a setting that `unread` names. Without a known version nothing is filled in, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pgdyno.postgres.settings import format_amount
from pgdyno.postgres.settings_catalog import recorded_defaults, recorded_settings


@dataclass(frozen=True)
class AssumedDefault:
    """A setting the snapshot left out, taken as its version's default."""

    name: str
    value: str  # as pg_settings.boot_val shows it: "16384" for shared_buffers
    unit: str | None  # the unit of `value` ("8kB"), None without one
    major: int  # the PostgreSQL major version whose default it is

    @property
    def shown(self) -> str:
        """The value as a DBA writes it.

        >>> AssumedDefault("shared_buffers", "16384", "8kB", 18).shown
        '128MB'
        >>> AssumedDefault("autovacuum_work_mem", "-1", "kB", 18).shown
        '-1'
        """
        try:
            number = float(self.value)
        except ValueError:
            return self.value
        if self.unit is None or number < 0:
            return self.value
        return format_amount(number, self.unit)


def note(assumed: Sequence[AssumedDefault]) -> str:
    """What a finding's current value says about the defaults it rests on.

    >>> note([AssumedDefault("superuser_reserved_connections", "3", None, 18)])
    '(PostgreSQL 18 default: superuser_reserved_connections = 3)'
    """
    if not assumed:
        return ""
    majors = "/".join(sorted({str(item.major) for item in assumed}))
    plural = "s" if len(assumed) > 1 else ""
    values = ", ".join(f"{item.name} = {item.shown}" for item in assumed)
    return f"(PostgreSQL {majors} default{plural}: {values})"


def server_major(server: Mapping[str, Any]) -> int | None:
    """The server's major version from `version_num` (180006, or "180006" as SHOW prints it)
    or `version` ("16.4", "17"); None when neither says, or before 10 (no catalog goes back
    that far).

    >>> server_major({"version_num": 180006}), server_major({"version": "16.4 (Debian)"})
    (18, 16)
    >>> server_major({"version": 17}), server_major({"version_num": 90624}), server_major({})
    (17, None, None)
    """
    number = server.get("version_num")
    if isinstance(number, str) and number.strip().isdigit():  # SHOW server_version_num
        number = int(number)
    if isinstance(number, int) and not isinstance(number, bool):
        return number // 10000 if number >= 100000 else None
    text = server.get("version")
    if isinstance(text, int | str) and not isinstance(text, bool):
        found = re.match(r"\s*(?:PostgreSQL\s+)?(\d+)", str(text))
        if found and int(found.group(1)) >= 10:
            return int(found.group(1))
    return None


def with_defaults(snapshot: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, AssumedDefault]]:
    """The snapshot with every recorded default the server section lacks, and what was taken.

    The snapshot is returned unchanged (as a dict) when there is no server, no known major
    version, or no catalog for it.
    """
    result = dict(snapshot)
    server = snapshot.get("server")
    if not isinstance(server, Mapping):
        return result, {}
    major = server_major(server)
    defaults = recorded_defaults(major) if major is not None else {}
    if major is None or not defaults:
        return result, {}
    given = server.get("settings")
    settings: dict[str, Any] = dict(given) if isinstance(given, Mapping) else {}
    if "server_version_num" in settings:  # all of pg_settings the role could see
        return result, {}
    unread = snapshot.get("unread") or {}
    meta = recorded_settings(major)
    assumed: dict[str, AssumedDefault] = {}
    for name, value in defaults.items():
        if name in settings or f"server.settings.{name}" in unread:
            continue
        entry = meta[name]
        settings[name] = {
            "setting": value, "unit": entry.unit, "vartype": entry.vartype,
            "source": "default", "context": entry.context, "boot_val": value,
        }  # fmt: skip
        assumed[name] = AssumedDefault(name, value, entry.unit, major)
    result["server"] = {**server, "settings": settings}
    return result, assumed
