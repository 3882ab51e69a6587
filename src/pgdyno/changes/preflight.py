"""What a server would refuse at start, checked before pgdyno restarts it.

Each setting is already checked against its own range; the server also refuses some
combinations (reserved connection slots against max_connections, WAL senders without a WAL
level for them, huge pages it cannot get). Those are data, in data/start_constraints.toml,
in the doctor's expression language, evaluated over the settings the server would start with:
the ones in effect now with the new values over them.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pgdyno.errors import UsageError
from pgdyno.expressions import expr
from pgdyno.expressions.load import FactNames, read
from pgdyno.postgres.settings import (
    SettingMeta,
    convert_to_setting_unit,
    in_base_units,
    parse_bool,
    read_number,
    setting_value,
)


@dataclass(frozen=True)
class Constraint:
    name: str
    require: ast.expr
    message: str
    evidence: str


class ConstraintSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    require: str
    message: str = Field(min_length=10)
    evidence: str = Field(min_length=10)


class ConstraintFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    constraint: list[ConstraintSpec]


CONSTRAINTS_FILE = Path(str(resources.files("pgdyno") / "data" / "start_constraints.toml"))


@cache
def constraints(path: Path = CONSTRAINTS_FILE) -> tuple[Constraint, ...]:
    """The constraints, vetted when read (pgdyno.expressions.load: errors name file and line)."""
    parsed, source = read(path, ConstraintFile, guide="the comment at the top of that file",
                          entry_key="name")  # fmt: skip
    facts: FactNames = {"pg": None, "host": None}  # any setting, any host fact
    found = []
    for index, spec in enumerate(parsed.constraint):
        key: list[str | int] = ["constraint", index, "require"]
        require = source.expression(key, spec.require, facts, facts)
        found.append(Constraint(spec.name, require, spec.message, spec.evidence))
    return tuple(found)


def value_of(meta: SettingMeta, text: str) -> Any:
    """A value as written (`128MB`, `on`) in the base units `setting_value` gives.

    >>> sb = SettingMeta("shared_buffers", "integer", "8kB", 16, 1e9, (), "postmaster")
    >>> value_of(sb, "128MB"), value_of(sb, "16384")
    (134217728, 134217728)
    """
    if meta.vartype == "bool":
        return parse_bool(text)
    if meta.vartype not in ("integer", "real"):
        return text.lower() if meta.vartype == "enum" else text
    read = read_number(text, integer=meta.vartype == "integer")
    if read is None:
        return None
    number, unit = read
    if unit and meta.unit:
        converted = convert_to_setting_unit(number, unit, meta.unit)
        if converted is None:
            return None
        number = converted
    if meta.vartype == "integer":
        number = round(number)
    return number if number < 0 else in_base_units(number, meta.unit)


def future_settings(meta: Mapping[str, SettingMeta], values: Mapping[str, str]) -> dict[str, Any]:
    """The settings the server would start with: those in effect, the new values over them."""
    settings = {
        name.lower(): setting_value({"setting": m.setting, "unit": m.unit, "vartype": m.vartype})
        for name, m in meta.items()
    }
    lower = {name.lower(): m for name, m in meta.items()}
    for name, text in values.items():
        m = lower.get(name.lower())
        if m is not None:
            settings[name.lower()] = value_of(m, text)
    return settings


def refusals(settings: Mapping[str, Any], host: Mapping[str, Any]) -> list[Constraint]:
    """The constraints the settings break (those that cannot be checked are left out)."""
    scope = {"pg": expr.Facts("pg", settings), "host": expr.Facts("host", host)}
    broken = []
    for constraint in constraints():
        try:
            if expr.evaluate(constraint.require, scope) is False:
                broken.append(constraint)
        except expr.Unknown:
            continue
    return broken


def explain(constraint: Constraint, settings: Mapping[str, Any], host: Mapping[str, Any]) -> str:
    """The constraint's message with the values filled in."""
    spaces = {"pg": _Namespace(settings), "host": _Namespace(host)}
    return constraint.message.format_map(spaces)


class _Namespace:
    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def __getattr__(self, key: str) -> Any:
        value = self._values.get(key)
        if isinstance(value, bool):
            return "on" if value else "off"
        return value


def check_start(
    label: str,
    meta: Mapping[str, SettingMeta],
    values: Mapping[str, str],
    host: Mapping[str, Any],
) -> None:
    """UsageError naming the first constraint the new values would break at the next start."""
    settings = future_settings(meta, values)
    broken = refusals(settings, host)
    if broken:
        first = broken[0]
        names = ", ".join(f"{name} = {value}" for name, value in values.items()) or "as set"
        raise UsageError(
            f"{label} would not start with {names}: PostgreSQL refuses it at start "
            f"({explain(first, settings, host)}); change the values, nothing was changed."
        )
