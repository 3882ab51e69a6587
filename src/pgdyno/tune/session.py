"""Collect the facts for `pgdyno tune` and compute a configuration (pgdyno's or a baseline's).

Offline (`Given.ram_bytes` set) reads nothing. Online takes a doctor snapshot of the server the
caller connected to (and of this host when the server runs here); `tune --from` reads one from
a file. Either way everything after the snapshot is the same pure code (`from_snapshot`), so a
snapshot tunes exactly as the machine it was taken on: the facts, the values in effect and the
server's own pg_settings (ranges, enum values), against which every PostgreSQL value is checked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pgdyno.doctor.gather import take_snapshot
from pgdyno.environment import Environment
from pgdyno.errors import BinariesError, UsageError
from pgdyno.postgres.binaries import Binaries, at_hand, resolve
from pgdyno.postgres.settings import COLUMNS, SettingMeta, settings_meta_from_rows
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.postgres.shmem_probe import ProbeError, huge_pages_needed
from pgdyno.postgres.timing import ClockTiming, measure_clock
from pgdyno.records.tune import DataSize, TuneFacts
from pgdyno.tune.baselines import BASELINES, BaselineInputs
from pgdyno.tune.facts import NEW_SNAPSHOT, Given, offline_facts, server_major
from pgdyno.tune.facts import snapshot_facts as read_facts
from pgdyno.tune.huge_pages import (
    FIGURE,
    FIRST_MAJOR,
    PagesFigure,
    probe_command,
    probe_settings,
    sized,
    wants_pages,
)
from pgdyno.tune.model import GROUPS, Configuration, Group
from pgdyno.tune.recommend import baseline_configuration, current_values, recommend

# data / RAM below and above which pgtune's data-size classes start (its form's wording:
# data smaller than RAM, around it, larger).
LESS_RAM, GREATER_RAM = 0.5, 1.5


@dataclass(frozen=True)
class TuneTarget:
    """A connected server to tune (dsn without password)."""

    label: str
    dsn: str
    password: str | None


@dataclass(frozen=True)
class Gathered:
    facts: TuneFacts
    meta: Mapping[str, SettingMeta]
    current: dict[str, str]
    snapshot: Mapping[str, Any] | None
    label: str  # what is tuned, for the output


OFFLINE_LABEL = "the machine described on the command line"
# Why the clock's cost (t.timing_ns, for track_io_timing) is not known.
UNTIMED_OFFLINE = (
    "unmeasured: offline, nothing runs on the server's host (pgdyno tune --dsn or --sandbox on "
    "that host runs pg_test_timing)"
)
UNTIMED_SNAPSHOT = (
    "unmeasured: a snapshot file does not carry it (pgdyno tune on the server's host runs "
    "pg_test_timing)"
)
UNTIMED_REMOTE = (
    "unmeasured: the server runs on another host (pgdyno tune there runs pg_test_timing)"
)


@dataclass(frozen=True)
class Clock:
    """What pg_test_timing said on the server's host, or why it was not run or failed."""

    timing: ClockTiming | None
    why: str = ""
    source: str = ""


def gather(env: Environment, given: Given, target: TuneTarget | None) -> Gathered:
    if given.offline or target is None:
        facts = with_clock(offline_facts(given), Clock(None, UNTIMED_OFFLINE))
        meta = recorded_settings(facts.pg) if facts.pg else {}
        if facts.pg and not meta:
            unknown = {**facts.unknown, "pg_settings": f"no recorded pg_settings of "
                       f"PostgreSQL {facts.pg}"}  # fmt: skip
            facts = replace(facts, unknown=unknown)
        return Gathered(facts, meta, {}, None, OFFLINE_LABEL)
    snapshot = take_snapshot(env, target=target.label, dsn=target.dsn, password=target.password)
    clock = measure_here(env) if snapshot.get("host") else Clock(None, UNTIMED_REMOTE)
    return from_snapshot(snapshot, given, clock)


CLOCK_FILE = "clock.json"  # in the work directory: the last pg_test_timing and what it was of


def measure_here(env: Environment) -> Clock:
    """pg_test_timing of the binaries pgdyno resolves here (the clock is the host's, whatever
    the version); a failure leaves the figure unknown with the reason.

    The cost of a clock read is the host's clock source's: it stays until the kernel switches
    source or the host boots again, so the figure is kept in the work directory and measured
    again only then (or for other binaries), not for one second at every `tune`."""
    try:
        binaries = resolve(None, None, env.cache_dir)
        key = clock_key(env, binaries)
        timing = cached_clock(env.data_dir / CLOCK_FILE, key)
        if timing is None:
            timing = measure_clock(binaries)
            keep_clock(env.data_dir / CLOCK_FILE, key, timing)
    except BinariesError as exc:
        return Clock(None, f"pg_test_timing could not be run: {exc}")
    return Clock(timing, source=f"pg_test_timing of PostgreSQL {binaries.version} on this host")


def clock_key(env: Environment, binaries: Binaries) -> dict[str, str]:
    """What a kept clock figure holds for: this boot, this clock source, these binaries."""
    return {
        "boot_id": _read(env.proc_root / "sys/kernel/random/boot_id"),
        "clocksource": _read(
            env.sys_root / "devices/system/clocksource/clocksource0/current_clocksource"
        ),
        "binaries": f"{binaries.bin_dir} {binaries.version}",
    }


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def cached_clock(path: Path, key: Mapping[str, str]) -> ClockTiming | None:
    """The figure kept at `path` when it was measured under `key` (none without a boot id).

    >>> import tempfile
    >>> where = Path(tempfile.mkdtemp()) / CLOCK_FILE
    >>> key = {"boot_id": "b1", "clocksource": "tsc", "binaries": "/pg 18.1"}
    >>> keep_clock(where, key, ClockTiming(29.91, ((1, 97.6, 3263),)))
    >>> cached_clock(where, key)
    ClockTiming(per_loop_ns=29.91, histogram=((1, 97.6, 3263),))
    >>> cached_clock(where, {**key, "clocksource": "hpet"}) is None  # switched: measure again
    True
    """
    try:
        kept = json.loads(path.read_text())
        if not key["boot_id"] or kept["key"] != dict(key):
            return None
        histogram = tuple((int(u), float(p), int(c)) for u, p, c in kept["histogram"])
        return ClockTiming(per_loop_ns=float(kept["per_loop_ns"]), histogram=histogram)
    except (OSError, ValueError, KeyError, TypeError):  # none kept, or not pgdyno's: measure
        return None


def keep_clock(path: Path, key: Mapping[str, str], timing: ClockTiming) -> None:
    """Keep `timing` at `path` (atomically); a work directory that cannot hold it keeps none."""
    text = json.dumps(
        {"key": dict(key), "per_loop_ns": timing.per_loop_ns, "histogram": timing.histogram}
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}")
        part.write_text(text)
        part.replace(path)
    except OSError:
        return


def with_clock(facts: TuneFacts, clock: Clock) -> TuneFacts:
    """The facts with the clock's cost per read, or the reason it is unknown.

    >>> from pgdyno.tune.facts import Given, offline_facts
    >>> facts = with_clock(offline_facts(Given(ram_bytes=2**30)), Clock(None, "unmeasured"))
    >>> facts.timing_ns, facts.unknown["timing_ns"]
    (None, 'unmeasured')
    >>> with_clock(facts, Clock(ClockTiming(29.91, ()), source="here")).timing_ns
    29.91
    """
    if clock.timing is None:
        return replace(facts, unknown={**facts.unknown, "timing_ns": clock.why})
    unknown = {k: v for k, v in facts.unknown.items() if k != "timing_ns"}
    sources = {**facts.sources, "timing_ns": clock.source}
    return replace(facts, timing_ns=clock.timing.per_loop_ns, sources=sources, unknown=unknown)


def from_snapshot(
    snapshot: Mapping[str, Any], given: Given, clock: Clock | None = None
) -> Gathered:
    """Facts, pg_settings and the values in effect, all from a doctor snapshot (pure); the
    clock's cost when it was measured on the snapshot's host just now."""
    label = str(snapshot.get("target") or "the machine of the snapshot")
    facts = with_clock(read_facts(snapshot, given), clock or Clock(None, UNTIMED_SNAPSHOT))
    if given.pg_version is not None and facts.pg != server_major(snapshot):
        raise UsageError(
            f"--pg-version {given.pg_version} is not the version of {label}: leave it out "
            "(it is read from the server) or tune offline with --ram."
        )
    meta, why = snapshot_meta(snapshot, facts.pg)
    if why:
        facts = replace(facts, unknown={**facts.unknown, "pg_settings": why})
    return Gathered(facts, meta, current_values(snapshot, facts), snapshot, label)


def snapshot_meta(
    snapshot: Mapping[str, Any], major: int | None
) -> tuple[dict[str, SettingMeta], str | None]:
    """The server's pg_settings as the snapshot recorded them (with ranges and enum values);
    from a snapshot without them, the recorded catalog of its version, and why."""
    rows = ((snapshot.get("server") or {}).get("settings")) or {}
    if rows and all("min_val" in row for row in rows.values()):
        return settings_meta_from_rows(
            [name, *(row.get(column) for column in COLUMNS[1:])] for name, row in rows.items()
        ), None
    meta = recorded_settings(major) if major else {}
    if not rows:
        why = "no server was read: values are checked against the recorded catalog"
    else:
        why = f"the snapshot has no ranges of the settings ({NEW_SNAPSHOT})"
    if not meta:
        which = f"none is recorded for PostgreSQL {major}" if major else "its version is unknown"
        return {}, f"{why}; {which}, so values are not checked"
    return meta, f"{why}: values are checked against the recorded catalog of PostgreSQL {major}"


def pgdyno_configuration(
    gathered: Gathered,
    cache_dir: Path,
    binaries: Binaries | None = None,
    groups: tuple[Group, ...] = GROUPS,
) -> Configuration:
    """pgdyno's configuration, its huge pages sized by the target version's own binary
    (`binaries` when the caller has the target's, else one of that version at hand)."""
    config = recommend(gathered.facts, gathered.meta, gathered.current, groups=groups)
    if not wants_pages(config):
        return config
    settings = probe_settings(config, configured(gathered), gathered.meta)
    return sized(config, count_pages(config.facts.pg, settings, binaries, cache_dir))


def configured(gathered: Gathered) -> dict[str, str]:
    """The values in effect that someone set (not PostgreSQL's defaults, nor what it computed
    itself: the SLRU buffers and wal_buffers it sizes from shared_buffers must be sized again
    from the new shared_buffers, not pinned at today's figure)."""
    rows = ((gathered.snapshot or {}).get("server") or {}).get("settings") or {}
    return {
        name: value
        for name, value in gathered.current.items()
        if (rows.get(name) or {}).get("source") not in (None, "default", "override")
    }


def count_pages(
    major: int | None, settings: Mapping[str, str], binaries: Binaries | None, cache_dir: Path
) -> PagesFigure:
    """shared_memory_size_in_huge_pages for `settings`, from a binary of `major`, or why not."""
    command = probe_command(major, settings)
    if major is None:
        return PagesFigure(None, "the target's PostgreSQL version is not known", command)
    if major < FIRST_MAJOR:
        return PagesFigure(None, f"PostgreSQL {major} does not report {FIGURE}", command)
    if binaries is None or binaries.major != major:
        binaries = at_hand(major, cache_dir)
    if binaries is None:
        why = (
            f"no PostgreSQL {major} binary is at hand here to compute {FIGURE} (`pgdyno pg "
            f"versions` lists them; `pgdyno sandbox start --pg-version {major}` installs one)"
        )
        return PagesFigure(None, why, command)
    try:
        pages = huge_pages_needed(binaries, settings, cache_dir)
    except ProbeError as exc:
        return PagesFigure(None, str(exc).rstrip("."), command)
    if pages is None:
        return PagesFigure(None, f"PostgreSQL {binaries.version} reports no huge pages", command)
    return PagesFigure(pages, f"PostgreSQL {binaries.version} (postgres -C)", command)


def baseline_inputs(facts: TuneFacts, name: str) -> BaselineInputs:
    """The baseline tool's form, filled from the facts (its own defaults where unknown)."""
    needed = (("--ram", facts.ram), ("--pg-version", facts.pg))
    missing = [flag for flag, value in needed if value is None]
    if missing or facts.ram is None or facts.pg is None:
        raise UsageError(f"{name} needs {' and '.join(missing)}: give them, or tune a server.")
    by_profile = facts.sources.get("connections", "").startswith("profile")
    ratio = facts.data_ratio
    data_size: DataSize = (
        "mid_ram" if ratio is None
        else "less_ram" if ratio < LESS_RAM
        else "greater_ram" if ratio > GREATER_RAM
        else "mid_ram"
    )  # fmt: skip
    return BaselineInputs(
        pg_version=facts.pg,
        profile=facts.profile,
        ram_bytes=facts.ram,
        cpus=facts.cpus,
        connections=None if by_profile else facts.connections,
        storage=facts.storage or "ssd",
        data_size=data_size,
    )


def baseline_values(facts: TuneFacts, name: str) -> dict[str, str | int | float]:
    return BASELINES[name](baseline_inputs(facts, name))


def baseline(gathered: Gathered, name: str) -> tuple[dict[str, str | int | float], Configuration]:
    """The baseline's exact values, and the same as a Configuration checked against the target."""
    values = baseline_values(gathered.facts, name)
    config = baseline_configuration(name, values, gathered.facts, gathered.meta, gathered.current)
    return values, config
