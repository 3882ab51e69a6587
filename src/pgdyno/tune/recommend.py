"""Facts + knowledge (or a baseline's formulas) -> a Configuration, checked against the target.

Every PostgreSQL value is checked against the target version's pg_settings (the live server's
when there is one, else the recorded catalog of that major): a value PostgreSQL would refuse
is left out and the reason kept in `notes`, so no configuration stops a server from starting
(timescaledb-tune once proposed a work_mem below the 64kB minimum; pgtune proposes io_uring to
builds without it). The current value of each setting is shown beside it when known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.postgres.settings import SettingMeta, check_setting, setting_value, unit_size
from pgdyno.records.tune import TuneFacts
from pgdyno.tune.knowledge import Entry, evaluate, load_knowledge, render
from pgdyno.tune.model import (
    GROUPS,
    Configuration,
    Group,
    KnowledgeStatus,
    Layer,
    Setting,
    Status,
    TakesEffect,
)
from pgdyno.tune.startable import fit_connections, size_bytes


def recommend(
    facts: TuneFacts,
    meta: Mapping[str, SettingMeta],
    current: Mapping[str, str],
    *,
    entries: tuple[Entry, ...] | None = None,
    groups: tuple[Group, ...] = GROUPS,
) -> Configuration:
    """pgdyno's own configuration for these facts.

    `meta` is the target's pg_settings (empty: PostgreSQL values are not checked, and say so);
    `current` maps a setting's key (`Setting.key`) to the value in effect. Only the entries of
    `groups` are computed (`tune --no-observability`: the performance group alone).
    """
    settings: list[Setting] = []
    unknown = dict(facts.unknown)
    notes: list[str] = []
    facts = offered(facts, meta)
    devices = {disk.name: disk.scope() for disk in facts.devices}
    chosen = tuple(e for e in entries or load_knowledge() if e.spec.group in groups)
    for outcome in evaluate(chosen, facts.scope(), devices):
        spec = outcome.entry.spec
        name = outcome.entry.name
        if outcome.missing is not None:
            missing = outcome.missing.removeprefix("t.")
            why = facts.unknown.get(missing, "unknown")
            key = f"{name}@{outcome.device}" if outcome.device else name
            unknown.setdefault(f"{spec.layer}:{key}", f"needs {missing} ({why})")
            continue
        value = render(outcome.value, spec.format)
        setting = Setting(
            layer=spec.layer,
            name=name,
            value=value,
            why=outcome.why,
            device=outcome.device,
            evidence=outcome.entry.evidence,
            rules=tuple(spec.rules),
            # PostgreSQL: from the target's pg_settings below; unknown without them.
            takes_effect="now" if spec.layer != "postgresql" else "restart",
            status=status_of(spec.layer, spec.status, facts),
            group=spec.group,
        )
        checked = _checked(setting, meta, facts, notes, cap=spec.above_max == "cap")
        if checked is not None:
            settings.append(_with_current(checked, current))
    if any(s.status == "host" for s in settings):
        notes.append(HOST_ADMIN.format(container=facts.container))
    return fit_connections(
        Configuration(
            source="pgdyno",
            profile=facts.profile,
            settings=tuple(settings),
            facts=facts,
            unknown=unknown,
            notes=tuple(notes),
        )
    )


HOST_ADMIN = (
    "the server runs in a {container} container: the host and block-device settings are for "
    "the host's administrator (they affect every tenant of the host), never applied from here "
    "nor written into the container's files."
)


def status_of(layer: Layer, status: KnowledgeStatus, facts: TuneFacts) -> Status:
    """A setting's status for these facts: inside a container, host and block-device settings
    are the host administrator's (they affect every tenant), whatever the knowledge says.

    >>> status_of("host", "apply", TuneFacts("oltp", 100, container="docker"))
    'host'
    >>> status_of("postgresql", "apply", TuneFacts("oltp", 100, container="docker"))
    'apply'
    >>> status_of("device", "measure", TuneFacts("oltp", 100))
    'measure'
    """
    return "host" if facts.container and layer != "postgresql" else status


# Facts that list the values of an enum setting, as the target's build offers them.
_OFFERED = {
    "io_methods": "io_method", "wal_compressions": "wal_compression",
    "toast_compressions": "default_toast_compression",
}  # fmt: skip


def offered(facts: TuneFacts, meta: Mapping[str, SettingMeta]) -> TuneFacts:
    """The facts with the values of enum settings a rule chooses among, as the target's build
    offers them (io_uring, lz4 exist only when PostgreSQL was built with them)."""
    found: dict[str, Any] = {
        fact: _enumvals(meta, setting)
        for fact, setting in _OFFERED.items()
        if getattr(facts, fact) is None
    }
    if not found:
        return facts
    sources = {**facts.sources, **dict.fromkeys(found, "the target's pg_settings")}
    return replace(facts, **found, sources=sources)


def _enumvals(meta: Mapping[str, SettingMeta], name: str) -> tuple[str, ...]:
    entry = meta.get(name)
    return entry.enumvals if entry else ()


def baseline_configuration(
    source: str,
    values: Mapping[str, str | int | float],
    facts: TuneFacts,
    meta: Mapping[str, SettingMeta],
    current: Mapping[str, str],
) -> Configuration:
    """A baseline's values (pgtune, timescaledb-tune) as a Configuration, checked alike."""
    notes: list[str] = []
    settings: list[Setting] = []
    for name, raw in values.items():
        setting = Setting(
            layer="postgresql",
            name=name,
            value=str(raw),
            why=f"{source}'s formula",
            evidence=(BASELINE_SOURCES.get(source, f"{source}'s own formulas"),),
            takes_effect="restart",  # until the target's pg_settings say otherwise
        )
        checked = _checked(setting, meta, facts, notes, source=source)
        if checked is not None:
            settings.append(_with_current(checked, current))
    return Configuration(
        source=source,
        profile=facts.profile,
        settings=tuple(settings),
        facts=facts,
        unknown=dict(facts.unknown),
        notes=tuple(notes),
    )


def _checked(
    setting: Setting,
    meta: Mapping[str, SettingMeta],
    facts: TuneFacts,
    notes: list[str],
    *,
    source: str = "pgdyno",
    cap: bool = False,
) -> Setting | None:
    if setting.layer == "postgresql":
        if cap:
            setting = capped(setting, meta.get(setting.name))
        return _checked_pg(setting, meta, facts, notes, source)
    if setting.layer == "device":
        disk = facts.disk(setting.device)
        schedulers = (disk.schedulers if disk else None) or ()
        if setting.name == "scheduler" and schedulers and setting.value not in schedulers:
            notes.append(f"{setting.device} offers no scheduler {setting.value}: left as it is.")
            return None
    return setting


def _checked_pg(
    setting: Setting,
    meta: Mapping[str, SettingMeta],
    facts: TuneFacts,
    notes: list[str],
    source: str,
) -> Setting | None:
    major = facts.pg
    if not meta:
        return setting
    if "." in setting.name and setting.name not in meta:
        # An extension's setting (timescaledb.*): the target does not load the extension.
        extension = setting.name.partition(".")[0]
        notes.append(
            f"{source}'s {setting.name} = {setting.value} left out: a setting of the "
            f"{extension} extension, absent from the target's pg_settings (PostgreSQL {major} "
            "without it loaded)."
        )
        return None
    try:
        check_setting(meta, setting.name, setting.value, str(major), source=source)
    except UsageError as exc:
        notes.append(f"{source}'s {setting.name} = {setting.value} left out: {exc}")
        return None
    entry = meta.get(setting.name)
    takes: TakesEffect = "restart" if entry is not None and entry.needs_restart else "reload"
    return replace(setting, takes_effect=takes)


def capped(setting: Setting, meta: SettingMeta | None) -> Setting:
    """A size above the target's maximum, written as the maximum (said in its reason).

    >>> from pgdyno.postgres.settings import settings_meta_from_rows
    >>> meta = settings_meta_from_rows([("effective_cache_size", "integer", "8kB", "1",
    ...                                  "2147483647", None, "user", "524288")])
    >>> s = capped(Setting("postgresql", "effective_cache_size", "18TB", "why"),
    ...            meta["effective_cache_size"])
    >>> s.value, s.why
    ('17179869176kB', 'why; 18TB is above the maximum, so the maximum')
    >>> capped(Setting("postgresql", "effective_cache_size", "3TB", "why"),
    ...        meta["effective_cache_size"]).value
    '3TB'
    """
    amount = size_bytes(setting.value)
    if meta is None or meta.max_val is None or not meta.unit or amount is None:
        return setting
    most = int(meta.max_val * unit_size(meta.unit))
    if amount <= most:
        return setting
    why = f"{setting.why}; {setting.value} is above the maximum, so the maximum"
    return replace(setting, value=render(most, "size"), why=why)


def _with_current(setting: Setting, current: Mapping[str, str]) -> Setting:
    value = current.get(setting.key)
    return setting if value is None else replace(setting, current=value)


def current_values(snapshot: Mapping[str, Any], facts: TuneFacts) -> dict[str, str]:
    """What is in effect, keyed like `Setting.key`, written the way tune writes values: all
    from the snapshot (nothing read here)."""
    current: dict[str, str] = {}
    server = snapshot.get("server") or {}
    for name, row in (server.get("settings") or {}).items():
        current[name] = shown(row)
    host = snapshot.get("host") or {}
    for name, field in HOST_CURRENT.items():
        if host.get(field) is not None:
            current[name] = str(host[field])
    for disk in facts.devices:
        if disk.scheduler:
            current[f"scheduler@{disk.name}"] = disk.scheduler
        if disk.read_ahead_kb is not None:
            current[f"read_ahead_kb@{disk.name}"] = str(disk.read_ahead_kb)
    return current


# A host setting tune recommends -> the field of the snapshot's `host` section that holds it.
HOST_CURRENT = {
    "vm.nr_hugepages": "nr_hugepages", "vm.dirty_background_bytes": "dirty_background_bytes",
    "vm.dirty_bytes": "dirty_bytes", "vm.swappiness": "swappiness",
    "vm.zone_reclaim_mode": "zone_reclaim_mode", "kernel.numa_balancing": "numa_balancing",
    "vm.overcommit_memory": "overcommit_memory", "vm.overcommit_ratio": "overcommit_ratio",
    "kernel.sched_autogroup_enabled": "sched_autogroup_enabled",
    "kernel.sched_migration_cost_ns": "sched_migration_cost_ns",
    "transparent_hugepage/enabled": "thp_enabled", "transparent_hugepage/defrag": "thp_defrag",
}  # fmt: skip


# Where a user can read a baseline's formulas.
BASELINE_SOURCES = {
    "pgtune": "pgtune's formulas: https://github.com/le0pard/pgtune (configurationSlice.js)",
    "timescaledb-tune": "timescaledb-tune's formulas: "
    "https://github.com/timescale/timescaledb-tune (pkg/pgtune)",
}


def shown(row: Mapping[str, Any]) -> str:
    """`pg_text`, except that a setting left at an automatic default (-1: wal_buffers,
    autovacuum_work_mem) shows as -1, the value tune recommends for "automatic"."""
    if row.get("source") == "default" and row.get("boot_val") == "-1":
        return "-1"
    return pg_text(row)


def pg_text(row: Mapping[str, Any]) -> str:
    """A pg_settings row's value written as tune writes values: sizes in the largest whole
    unit, booleans on/off, numbers plain.

    >>> pg_text({"setting": "16384", "unit": "8kB", "vartype": "integer"})
    '128MB'
    >>> pg_text({"setting": "0.9", "unit": None, "vartype": "real"})
    '0.9'
    >>> pg_text({"setting": "300", "unit": "s", "vartype": "integer"})
    '5min'
    >>> pg_text({"setting": "on", "vartype": "bool"})
    'on'
    >>> pg_text({"setting": "-1", "unit": "kB", "vartype": "integer"})
    '-1'
    """
    value = setting_value(row)
    unit = row.get("unit")
    if isinstance(value, bool):
        return "on" if value else "off"
    if unit in ("8kB", "kB", "MB", "B") and isinstance(value, int) and value >= 0:
        return render(value, "size")
    if unit in ("s", "min", "ms") and isinstance(value, float) and value >= 0:
        return _duration(value)
    return str(row.get("setting"))


def _duration(seconds: float) -> str:
    """
    >>> _duration(900.0), _duration(30.0), _duration(0.2), _duration(3600.0)
    ('15min', '30s', '200ms', '1h')
    """
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"
