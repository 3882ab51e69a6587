"""What each PostgreSQL setting accepts, read from the target version's own pg_settings.

A plan is judged by the server it will run on: `wal_compression = "lz4"` is fine on 15 and a
mistake on 14. The check of a plan's values is in `setting_checks`; PostgreSQL's reading of
values and units (guc.c) is in `setting_values`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgdyno.postgres.queries import load
from pgdyno.textsafe import strict_json

if TYPE_CHECKING:
    from pgdyno.postgres.client import Client

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
