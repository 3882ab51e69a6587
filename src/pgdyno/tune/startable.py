"""A configuration the server starts with and can live with, beyond each value's own range.

A check that needs several values at once:

- memory: every backend costs memory of its own before any work_mem (BACKEND_BYTES, about
  2 MiB: data/memory.toml). When work_mem is at PostgreSQL's 64kB floor and every
  session (its own memory plus a sort) at once would still exceed the memory budget of
  data/tune.toml's work_mem entry (3/4 of the memory, with shared_buffers and autovacuum's
  maintenance_work_mem), max_connections is capped at what fits, and the configuration says
  so and recommends a connection pooler (PgBouncer) sized to that figure, instead of a number
  of connections that exhausts the memory;
- huge pages: tune/huge_pages.py (huge_pages = on only over pages known to suffice, counted
  by the target version's own binary).
"""

from __future__ import annotations

from dataclasses import replace

from pgdyno.expressions.expr import BACKEND_BYTES
from pgdyno.postgres.settings import read_number, unit_size
from pgdyno.tune.model import Configuration, Setting

WORK_MEM_FLOOR = 64 * 1024  # PostgreSQL's minimum
MIN_CONNECTIONS = 4  # above superuser_reserved_connections' 3, or the server does not start
BUDGET_SHARE = 3 / 4  # work_mem's budget in data/tune.toml
DEFAULTS = {"autovacuum_max_workers": 3, "max_parallel_workers": 8}


def size_bytes(text: str) -> int | None:
    """A size as postgresql.conf writes it, in bytes.

    >>> size_bytes("64kB"), size_bytes("2GB"), size_bytes("-1")
    (65536, 2147483648, None)
    """
    read = read_number(text, integer=True)
    if read is None or read[0] < 0 or not read[1]:
        return None
    return int(read[0] * unit_size(read[1]))


def fit_connections(config: Configuration) -> Configuration:
    """The configuration, with max_connections capped when even the work_mem floor cannot
    hold the worst case of memory (see the module's docstring)."""
    values = config.pg_values()
    ram, hash_mem = config.facts.ram, config.facts.hash_mem
    if values.get("work_mem", "64kB") != "64kB" or ram is None:  # unknown: at most the floor
        return config
    fixed = _fixed_memory(values)
    per_session = BACKEND_BYTES + WORK_MEM_FLOOR * (hash_mem if hash_mem is not None else 1.0)
    parallel = int(values.get("max_parallel_workers", DEFAULTS["max_parallel_workers"]))
    connections = int(values["max_connections"])
    budget = int(ram * BUDGET_SHARE)
    worst = fixed + (connections + parallel) * per_session
    if worst <= budget:
        return config
    fitting = max(MIN_CONNECTIONS, int((budget - fixed) // per_session) - parallel)
    if fitting >= connections:
        return config
    why = (
        f"capped from {connections}: each connection needs about {_mb(BACKEND_BYTES)} MB of its "
        f"own before any work_mem, so {connections} connections sorting at once at work_mem's "
        f"64kB floor need {_mb(worst)} MB, more than the {_mb(budget)} MB budget (3/4 of the "
        f"memory); {fitting} fit"
    )
    note = (
        f"{connections} connections do not fit in this memory: max_connections {why}. Put a "
        f"connection pooler such as PgBouncer in front of the server for more clients, with "
        f"at most {fitting} server connections."
    )
    if budget - fixed < (MIN_CONNECTIONS + parallel) * per_session:
        note = (
            f"this memory holds no workable configuration: shared_buffers and autovacuum alone "
            f"take {_mb(fixed)} MB of a {_mb(budget)} MB budget; give more memory."
        )
    settings = tuple(
        _lowered(s, fitting, why) if s.layer == "postgresql" and s.name == "max_connections" else s
        for s in config.settings
    )
    return replace(config, settings=settings, notes=(*config.notes, note))


def _fixed_memory(values: dict[str, str]) -> int:
    shared = size_bytes(values.get("shared_buffers", "128MB")) or 0
    maintenance = size_bytes(values.get("maintenance_work_mem", "64MB")) or 0
    workers = int(values.get("autovacuum_max_workers", DEFAULTS["autovacuum_max_workers"]))
    return shared + workers * maintenance


def _lowered(setting: Setting, connections: int, why: str) -> Setting:
    return replace(setting, value=str(connections), why=f"{setting.why}; {why}")


def _mb(n: float) -> int:
    return round(n / 2**20)
