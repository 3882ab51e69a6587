"""What a plan may change: kernel settings and PostgreSQL settings, as data (pure).

pgdyno runs as root, so a plan must not be a root shell. The sysctls a plan may write, with
each one's kernel type and range, are in ``data/host_settings.toml``; the PostgreSQL settings
it may not set (they run commands, load code, or point the server at files) are in
``data/pg_settings_policy.toml``. A refused name can be allowed only on the command line
(`Allowed`, from ``--allow-sysctl`` and ``--allow-pg-setting``), never by the plan itself.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError

_DATA = Path(str(resources.files("pgdyno") / "data"))
HOST_SETTINGS = _DATA / "host_settings.toml"
PG_SETTINGS_POLICY = _DATA / "pg_settings_policy.toml"

# For a sysctl allowed on the command line but not described in the data: the widest C type.
_ANY_INTEGER = ("long or unsigned long", -(1 << 63), (1 << 64) - 1)


@dataclass(frozen=True)
class Allowed:
    """Names the person running pgdyno allowed on the command line."""

    sysctls: frozenset[str] = frozenset()
    pg_settings: frozenset[str] = frozenset()

    @classmethod
    def of(cls, sysctls: tuple[str, ...] = (), pg_settings: tuple[str, ...] = ()) -> Allowed:
        return cls(
            frozenset(sysctl_name(n) for n in sysctls),
            frozenset(n.strip().lower() for n in pg_settings),
        )


@dataclass(frozen=True)
class SysctlRule:
    pattern: str
    allow: bool
    why: str
    type: str | None = None  # "int", "uint", "long", "ulong"
    min: int | None = None
    max: int | None = None


@dataclass(frozen=True)
class HostPolicy:
    types: dict[str, tuple[int, int]]
    rules: tuple[SysctlRule, ...]
    block: tuple[str, ...]


def sysctl_name(name: str) -> str:
    """The dotted form the data uses.

    >>> sysctl_name("vm/dirty_ratio"), sysctl_name(" vm.swappiness ")
    ('vm.dirty_ratio', 'vm.swappiness')
    """
    return name.strip().replace("/", ".")


@cache
def host_policy() -> HostPolicy:
    data: dict[str, Any] = tomllib.loads(HOST_SETTINGS.read_text(encoding="utf-8"))
    types = {name: (int(t["min"]), int(t["max"])) for name, t in data["types"].items()}
    rules = tuple(_rule(r) for r in data["sysctl"])
    return HostPolicy(types, rules, tuple(b["name"] for b in data["block"]))


def _rule(entry: dict[str, Any]) -> SysctlRule:
    return SysctlRule(
        pattern=entry["name"],
        allow=bool(entry.get("allow", True)),
        why=entry["why"],
        type=entry.get("type"),
        min=entry.get("min"),
        max=entry.get("max"),
    )


@cache
def refused_pg_settings() -> dict[str, str]:
    """Lower-case name -> why a plan may not set it."""
    data: dict[str, Any] = tomllib.loads(PG_SETTINGS_POLICY.read_text(encoding="utf-8"))
    return {r["name"].lower(): r["why"] for r in data["refused"]}


def sysctl_rule(name: str) -> SysctlRule | None:
    """The first rule whose pattern matches, or None.

    >>> sysctl_rule("vm.swappiness").max, sysctl_rule("kernel.core_pattern") is None
    (200, True)
    >>> sysctl_rule("vm.mmap_min_addr").allow
    False
    """
    dotted = sysctl_name(name)
    return next((r for r in host_policy().rules if fnmatchcase(dotted, r.pattern)), None)


def check_sysctl_name(name: str, allowed: Allowed) -> SysctlRule | None:
    """The rule for a sysctl a plan may change; UsageError when it may not."""
    rule = sysctl_rule(name)
    if sysctl_name(name) in allowed.sysctls or (rule is not None and rule.allow):
        return rule
    option = f"--allow-sysctl {sysctl_name(name)}"
    if rule is not None:
        raise UsageError(
            f"sysctl {name} is refused in plans ({rule.why}): remove it, or pass {option} "
            "to allow it."
        )
    raise UsageError(
        f"sysctl {name} is not among the kernel settings a plan may change (those for database "
        f"performance, listed in {HOST_SETTINGS}): remove it, or pass {option} to allow it."
    )


def integer_range(rule: SysctlRule | None) -> tuple[str, int, int]:
    """The C type's name and the range a sysctl's numbers must lie in.

    >>> integer_range(sysctl_rule("vm.dirty_ratio"))
    ('int', 0, 100)
    >>> integer_range(sysctl_rule("vm.dirty_background_bytes"))[1:]
    (1, 18446744073709551615)
    """
    if rule is None or rule.type is None:
        return _ANY_INTEGER
    low, high = host_policy().types[rule.type]
    return (
        rule.type,
        low if rule.min is None else max(low, rule.min),
        high if rule.max is None else min(high, rule.max),
    )


def check_sysctl_value(name: str, rule: SysctlRule | None, text: str) -> None:
    """UsageError when a number of `text` (a sysctl value, words separated by blanks) lies
    outside the kernel's range for `name`; text that is not numbers is left to the kernel
    check, except where the data says the sysctl holds numbers."""
    words = text.split()
    numeric = bool(words) and all(w.lstrip("-").isdigit() for w in words)
    ctype, low, high = integer_range(rule)
    if not numeric:
        if rule is not None and rule.type is not None:
            raise UsageError(
                f"sysctl {name} takes whole numbers ({ctype}), not {text!r}: fix the value in "
                "the plan."
            )
        return
    for word in words:
        if not low <= int(word) <= high:
            raise UsageError(
                f"sysctl {name} = {text} is out of range: the kernel takes a whole number from "
                f"{low} to {high} ({ctype}) here; fix the value in the plan."
            )


def check_pg_name(name: str, allowed: Allowed) -> None:
    """UsageError when a plan may not set this PostgreSQL setting."""
    lowered = name.strip().lower()
    why = refused_pg_settings().get(lowered)
    if why is not None and lowered not in allowed.pg_settings:
        raise UsageError(
            f"{name} is refused in plans ({why}): remove it, or pass "
            f"--allow-pg-setting {lowered} to allow it."
        )
