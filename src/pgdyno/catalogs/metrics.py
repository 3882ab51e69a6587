"""The catalog of per-second metrics (``data/metrics.toml``): one record per series.

The collectors take their names (and, for the simple ones, the field or counter they read)
from here; the terminal timeline its columns, labels and digits; the charts their labels and
units. A metric is added in the data file, plus its computation in its collector.
Pure apart from `catalog()`, which reads the packaged file once.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pgdyno.errors import PgdynoError

CATALOG_FILE = Path(str(resources.files("pgdyno") / "data" / "metrics.toml"))
DEVICE = "{device}"  # stands for a block device's kernel name in a metric's name
WAIT_TYPE = "{type}"  # a wait event type (LWLock, IO, CPU*...) in a wait series' name
WAIT_EVENT = "{event}"  # a wait event (LWLock:WALWrite, CPU*) in a wait series' name
# pg_stat_io's row of an io.* series: backend_type, object and context, spaces as underscores
IO_BACKEND = "{backend}"  # client_backend, checkpointer, io_worker, autovacuum_worker...
IO_OBJECT = "{object}"  # relation, temp_relation, wal (18)
IO_CONTEXT = "{context}"  # normal, vacuum, bulkread, bulkwrite, init (18)
PLACEHOLDERS = (DEVICE, WAIT_TYPE, WAIT_EVENT, IO_BACKEND, IO_OBJECT, IO_CONTEXT)
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))

_REQUIRED = {"name": str, "label": str, "unit": str, "digits": int, "source": str}
_OPTIONAL = {"column": str, "field": str, "counters": list, "kind": str, "from": str,
             "divisor": float}  # fmt: skip


class MetricCatalogError(PgdynoError):
    """The metric catalog is malformed: names the entry and the key."""


@dataclass(frozen=True, slots=True)
class Metric:
    name: str  # dotted; may hold placeholders ({device}, {type}, ...: PLACEHOLDERS)
    label: str  # chart legends and hovers
    unit: str
    digits: int  # decimals in the terminal
    source: str  # the /proc file, pg_stat view or pgbench output
    column: str | None = None  # header in the compact terminal timeline
    field: str | None = None  # /proc/meminfo or /proc/vmstat field read as it is
    counters: tuple[str, ...] = ()  # pg_stat counters, first present wins
    kind: Literal["count", "rate"] | None = None
    derived_from: str | None = None  # computed at display time: that metric / `divisor`
    divisor: float = 1.0

    def named(self, device: str) -> str:
        """The name with the device filled in.

        >>> Metric("disk.{device}.util_pct", "util", "%", 0, "/proc/diskstats").named("vda")
        'disk.vda.util_pct'
        """
        return self.name.replace(DEVICE, device)

    def matches(self, name: str) -> bool:
        """Whether a series name is this metric: each placeholder stands for one non-empty part
        without a dot (any device for a {device} metric).

        >>> m = Metric("disk.{device}.util_pct", "util", "%", 0, "/proc/diskstats")
        >>> m.matches("disk.nvme0n1.util_pct"), m.matches("disk.util_pct"), m.matches("x")
        (True, False, False)
        >>> Metric("waits.{type}_aas", "AAS", "", 2, "pg_stat_activity").matches("waits.IO_aas")
        True
        >>> io = Metric("io.{backend}.{object}.{context}.reads_per_s", "reads", "/s", 0, "x")
        >>> io.matches("io.client_backend.relation.normal.reads_per_s")
        True
        >>> io.matches("io.client_backend.normal.reads_per_s"), io.matches("io.a.b.c.d.reads_per_s")
        (False, False)
        """
        return _name_pattern(self.name).fullmatch(name) is not None


@cache
def _name_pattern(name: str) -> re.Pattern[str]:
    """A metric name as a pattern: the placeholders as one dotless part each, the rest as is."""
    return re.compile("[^.]+".join(re.escape(part) for part in _PLACEHOLDER.split(name)))


def _checked(entry: Any, index: int, origin: str) -> dict[str, Any]:
    where = f"{origin}: metric {index + 1}"
    if not isinstance(entry, dict):
        raise MetricCatalogError(f"{where} is not a table; write it as [[metric]].")
    where = f"{origin}: metric {entry.get('name', index + 1)!r}"
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise MetricCatalogError(f"{where} has an unknown key {unknown[0]!r}; see the file's head.")
    for key, kind in (*_REQUIRED.items(), *_OPTIONAL.items()):
        value = entry.get(key)
        if value is None and key in _OPTIONAL:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise MetricCatalogError(f"{where}: {key!r} must be a {kind.__name__}.")
    if entry["digits"] < 0:
        raise MetricCatalogError(f"{where}: 'digits' must be 0 or more.")
    if entry.get("kind") not in (None, "count", "rate"):
        raise MetricCatalogError(f"{where}: 'kind' must be 'count' or 'rate'.")
    if bool(entry.get("counters")) != bool(entry.get("kind")):
        raise MetricCatalogError(f"{where}: 'counters' and 'kind' go together.")
    return entry


def _metric(entry: dict[str, Any]) -> Metric:
    return Metric(
        name=entry["name"],
        label=entry["label"],
        unit=entry["unit"],
        digits=entry["digits"],
        source=entry["source"],
        column=entry.get("column"),
        field=entry.get("field"),
        counters=tuple(entry.get("counters") or ()),
        kind=entry.get("kind"),
        derived_from=entry.get("from"),
        divisor=entry.get("divisor", 1.0),
    )


def parse_catalog(text: str, origin: str = "metrics.toml") -> tuple[Metric, ...]:
    """The metrics of a catalog file's text, in file order; MetricCatalogError when malformed.

    >>> parse_catalog('[[metric]]\\nname="tps"\\nlabel="TPS"\\nunit="/s"\\ndigits=0\\nsource="x"')
    (Metric(name='tps', label='TPS', unit='/s', digits=0, source='x', column=None, ...),)
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MetricCatalogError(f"{origin} is not valid TOML ({exc}).") from None
    entries = [_checked(e, i, origin) for i, e in enumerate(data.get("metric") or [])]
    metrics = tuple(_metric(e) for e in entries)
    names = [m.name for m in metrics]
    for metric in metrics:
        if names.count(metric.name) > 1:
            raise MetricCatalogError(f"{origin}: metric {metric.name!r} is listed twice.")
        if metric.derived_from is not None and metric.derived_from not in names:
            raise MetricCatalogError(
                f"{origin}: metric {metric.name!r} is computed from {metric.derived_from!r}, "
                "which the catalog does not list."
            )
    return metrics


@cache
def catalog() -> tuple[Metric, ...]:
    """The packaged catalog, read once."""
    return parse_catalog(CATALOG_FILE.read_text(), str(CATALOG_FILE))


def find(name: str, metrics: tuple[Metric, ...] | None = None) -> Metric | None:
    """The metric a series name is, or None.

    >>> find("disk.vda.write_mbps").label, find("cpu.user_pct").unit, find("nonsense")
    ('write', '%', None)
    """
    return next((m for m in metrics or catalog() if m.matches(name)), None)


def get(name: str) -> Metric:
    """A metric the code names; KeyError if the catalog lacks it (a bug, found by the tests)."""
    metric = find(name)
    if metric is None:
        raise KeyError(f"{name!r} is not in {CATALOG_FILE.name}")
    return metric


def compact_columns() -> tuple[Metric, ...]:
    """The columns of the compact terminal timeline, in catalog order."""
    return tuple(m for m in catalog() if m.column is not None)


def fields_of(source: str) -> tuple[tuple[str, str], ...]:
    """(metric name, field) of the metrics read as they are from a /proc file.

    >>> fields_of("/proc/vmstat")[0]
    ('vm.pswpin_per_s', 'pswpin')
    """
    return tuple((m.name, m.field) for m in catalog() if m.source == source and m.field)


def pg_counters(kind: Literal["count", "rate"]) -> dict[str, tuple[str, ...]]:
    """metric -> the pg_stat counters it comes from (first present wins), for one kind."""
    return {m.name: m.counters for m in catalog() if m.kind == kind}


def with_derived(series: Mapping[str, Mapping[int, float]]) -> dict[str, dict[int, float]]:
    """The series plus those the catalog computes from them (pg.wal_mb_per_s from bytes).

    >>> with_derived({"pg.wal_bytes_per_s": {1: 2e6}})["pg.wal_mb_per_s"]
    {1: 2.0}
    """
    out = {name: dict(values) for name, values in series.items()}
    for metric in catalog():
        source = series.get(metric.derived_from) if metric.derived_from else None
        if source:
            out[metric.name] = {t: v / metric.divisor for t, v in source.items()}
    return out
