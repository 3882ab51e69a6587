"""A configuration the server starts with and can live with, beyond each value's own range.

Two checks that need several values at once:

- memory: when work_mem is at PostgreSQL's 64kB floor and every session sorting at once would
  still exceed the memory budget of data/tune.toml's work_mem entry (3/4 of the memory, with
  shared_buffers and autovacuum's maintenance_work_mem), max_connections is lowered to what
  fits, and the configuration says so, instead of printing a budget no machine has;
- files (`--out`): huge_pages = on is written only when the host already holds enough reserved
  huge pages for the estimate; otherwise `try`, which starts the server whatever the kernel
  reserved (`on` without the pages refuses to start). `--apply` does not need this: it
  reserves the pages from the server's own count before it sets `on`.
"""

from __future__ import annotations

from dataclasses import replace

from pgdyno.postgres.setting_values import read_number, unit_size
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
    """The configuration, with max_connections lowered when even the work_mem floor cannot
    hold the worst case of memory (see the module's docstring)."""
    values = config.pg_values()
    ram, hash_mem = config.facts.ram, config.facts.hash_mem
    if values.get("work_mem") != "64kB" or ram is None:
        return config
    fixed = _fixed_memory(values)
    per_session = WORK_MEM_FLOOR * (hash_mem if hash_mem is not None else 1.0)
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
        f"lowered from {connections}: with work_mem at its 64kB floor, {connections} connections "
        f"sorting at once need {_mb(worst)} MB, more than the {_mb(budget)} MB budget (3/4 of "
        f"the memory); {fitting} fit"
    )
    note = f"max_connections {why} (use a connection pooler for more clients)."
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


def for_files(config: Configuration) -> Configuration:
    """The configuration as `--out` writes it: huge_pages = on only over reserved pages."""
    pages = next((s for s in config.settings if s.name == "vm.nr_hugepages"), None)
    reserved = pages is not None and (pages.current or "").isdigit()
    if reserved and pages is not None and int(pages.current or 0) >= int(pages.value):
        return config
    settings = tuple(
        replace(s, value="try", why=f"{s.why} (written as try: {_TRY})")
        if s.layer == "postgresql" and s.name == "huge_pages" and s.value == "on"
        else s
        for s in config.settings
    )
    if settings == config.settings:
        return config
    note = f"huge_pages is written as try, not on: {_TRY}."
    return replace(config, settings=settings, notes=(*config.notes, note))


_TRY = (
    "vm.nr_hugepages is an estimate and not yet reserved, and with on a server whose pages "
    "fall short does not start; once `postgres -C shared_memory_size_in_huge_pages` pages are "
    "reserved, set huge_pages = on (or let `pgdyno tune --apply` do both)"
)
