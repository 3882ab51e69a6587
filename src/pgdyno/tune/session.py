"""Collect the facts for `pgdyno tune` and compute a configuration (pgdyno's or a baseline's).

Offline (`Given.ram_bytes` set) reads nothing; online takes a doctor snapshot of the server the
caller connected to (and of this host when the server runs here) and the server's own
pg_settings, against which every PostgreSQL value is checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgdyno.doctor.gather import take_snapshot
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.postgres.client import connect
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.postgres.settings_meta import SettingMeta, load_settings_meta
from pgdyno.tune.baselines import BASELINES, BaselineInputs
from pgdyno.tune.facts import Facts, Given, offline_facts, snapshot_facts
from pgdyno.tune.model import Configuration
from pgdyno.tune.recommend import baseline_configuration, current_values, recommend

# data / RAM below and above which pgtune's data-size classes start (its form's wording:
# data smaller than RAM, around it, larger).
LESS_RAM, GREATER_RAM = 0.5, 1.5


@dataclass(frozen=True)
class Target:
    """A connected server to tune (dsn without password), or None offline."""

    label: str
    dsn: str
    password: str | None


@dataclass(frozen=True)
class Gathered:
    facts: Facts
    meta: Mapping[str, SettingMeta]
    current: dict[str, str]
    snapshot: Mapping[str, Any] | None


def gather(env: Environment, given: Given, target: Target | None) -> Gathered:
    if given.offline or target is None:
        facts = offline_facts(given)
        major = facts.values.get("pg")
        meta = recorded_settings(int(major)) if major else {}
        if major and not meta:
            facts.unknown["pg_settings"] = f"no recorded pg_settings of PostgreSQL {major}"
        return Gathered(facts, meta, {}, None)
    snapshot = take_snapshot(env, target=target.label, dsn=target.dsn, password=target.password)
    with connect(target.dsn, target.password) as client:
        meta = load_settings_meta(client)
    facts = snapshot_facts(snapshot, given, env.sys_root)
    if given.pg_version is not None and facts.values.get("pg") != _server_major(snapshot):
        raise UsageError(
            f"--pg-version {given.pg_version} is not the version of {target.label}: leave it out "
            "(it is read from the server) or tune offline with --ram."
        )
    current = current_values(snapshot, facts, env.proc_root, env.sys_root)
    return Gathered(facts, meta, current, snapshot)


def _server_major(snapshot: Mapping[str, Any]) -> int | None:
    version_num = (snapshot.get("server") or {}).get("version_num")
    return int(version_num) // 10000 if version_num else None


def pgdyno_configuration(gathered: Gathered) -> Configuration:
    return recommend(gathered.facts, gathered.meta, gathered.current)


def baseline_inputs(facts: Facts, name: str) -> BaselineInputs:
    """The baseline tool's form, filled from the facts (its own defaults where unknown)."""
    values = facts.values
    needed = (("--ram", "ram"), ("--pg-version", "pg"))
    missing = [flag for flag, key in needed if key not in values]
    if missing:
        raise UsageError(f"{name} needs {' and '.join(missing)}: give them, or tune a server.")
    by_profile = facts.sources.get("connections", "").startswith("profile")
    ratio = values.get("data_ratio")
    data_size = (
        "mid_ram" if ratio is None
        else "less_ram" if ratio < LESS_RAM
        else "greater_ram" if ratio > GREATER_RAM
        else "mid_ram"
    )  # fmt: skip
    return BaselineInputs(
        pg_version=int(values["pg"]),
        profile=values["profile"],
        ram_bytes=int(values["ram"]),
        cpus=values.get("cpus"),
        connections=None if by_profile else values.get("connections"),
        storage=values.get("storage") or "ssd",
        data_size=data_size,  # type: ignore[arg-type]
    )


def baseline_values(facts: Facts, name: str) -> dict[str, str | int | float]:
    return BASELINES[name](baseline_inputs(facts, name))


def baseline(gathered: Gathered, name: str) -> tuple[dict[str, str | int | float], Configuration]:
    """The baseline's exact values, and the same as a Configuration checked against the target."""
    values = baseline_values(gathered.facts, name)
    config = baseline_configuration(name, values, gathered.facts, gathered.meta, gathered.current)
    return values, config
