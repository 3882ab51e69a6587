"""What pgtune and timescaledb-tune would recommend for a machine, computed to the unit.

`pgdyno tune --baseline pgtune|timescaledb-tune` benchmarks these tools' advice beside pgdyno's
own, so the numbers must be theirs, not an approximation: the formulas below restate pgtune's
(le0pard/pgtune, `configurationSlice.js` and its configuration view) and timescaledb-tune's
(timescale/timescaledb-tune, `pkg/pgtune`) for Linux, with the facts of the project's pgtune
reference notes. pgtune's part is checked against pgtune's own code run over
thousands of inputs (tests/data/pgtune/cases.json). timescaledb-tune's part follows those
facts, the tool's printing code (`parse.BytesToPGFormat`) and the expected values of its own
unit tests (recorded in tests/unit/test_tune_baselines.py); no run of the tool checked it.

Pure functions of a `BaselineInputs`: nothing is read from the host or a server.

Each result maps setting name to value in the tool's own order, with the value as the tool
prints it in postgresql.conf: a bare number stays a number (`300`, `1.1`, `4`, `0.9`; a JSON
number), anything with a unit or a word is a string (`"2GB"`, `"47004kB"`, `"try"`, `"lz4"`).
So pgtune's `random_page_cost = 4` is the int 4 and `max_wal_senders = 0` the int 0.

pgtune computes memory in kB: RAM in kB (floor of bytes / 1024), every size an integer (floor)
division of it; only work_mem's budget is a fraction until its last floor. A size is printed in
the largest unit that divides it (`format_kb`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pgdyno.errors import UsageError
from pgdyno.records.tune import DataSize, Profile, Storage

Value = str | int | float
Settings = dict[str, Value]

KB_PER_MB = 1024
KB_PER_GB = 1024 * 1024
PG_VERSIONS = range(10, 19)  # the versions pgtune's form offers


@dataclass(frozen=True, slots=True)
class BaselineInputs:
    """pgtune's form (Linux): what a user types in, nothing more."""

    pg_version: int  # major, 10..18
    profile: Profile
    ram_bytes: int  # total RAM
    cpus: int | None = None
    connections: int | None = None
    storage: Storage = "ssd"
    data_size: DataSize = "mid_ram"


@dataclass(frozen=True, slots=True)
class _PgtuneProfile:
    connections: int  # max_connections when none is given
    shared_buffers_div: int  # shared_buffers = RAM / this
    cache_quarters: int  # effective_cache_size = RAM * this / 4
    maintenance_div: int  # maintenance_work_mem = RAM / this
    work_mem_div: int  # work_mem = budget / this
    statistics_target: int
    min_wal_kb: int
    max_wal_kb: int
    jit_off: bool  # jit = off (PG >= 12)


# pgtune's per-profile tables (configurationSlice.js: selectMaxConnections, selectSharedBuffers,
# selectEffectiveCacheSize, selectMaintenanceWorkMem, selectWorkMem, selectCheckpointSegments,
# selectDefaultStatisticsTarget, selectJit).
_PGTUNE: dict[Profile, _PgtuneProfile] = {
    "web": _PgtuneProfile(200, 4, 3, 16, 1, 100, 1 * KB_PER_GB, 4 * KB_PER_GB, True),
    "oltp": _PgtuneProfile(300, 4, 3, 16, 1, 100, 2 * KB_PER_GB, 8 * KB_PER_GB, True),
    "dw": _PgtuneProfile(40, 4, 3, 8, 2, 500, 4 * KB_PER_GB, 16 * KB_PER_GB, False),
    "desktop": _PgtuneProfile(20, 16, 1, 16, 6, 100, 100 * KB_PER_MB, 2 * KB_PER_GB, False),
    "mixed": _PgtuneProfile(100, 4, 3, 16, 2, 100, 1 * KB_PER_GB, 4 * KB_PER_GB, True),
}
_IO_CONCURRENCY: dict[Storage, int] = {"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}
# work_mem scaled by how the data compares with RAM (fits: more; larger: less)
_WORK_MEM_BY_DATA_SIZE: dict[DataSize, float | None] = {
    "less_ram": 1.3,
    "mid_ram": None,
    "greater_ram": 0.9,
}
_MAINTENANCE_CAP_KB = 8 * KB_PER_GB
_AUTOVACUUM_WORK_MEM_KB = 2 * KB_PER_GB  # set when maintenance_work_mem reaches it
_HUGE_PAGES_FROM_KB = 2 * KB_PER_GB  # of shared_buffers
_WORK_MEM_MIN_KB = 4 * KB_PER_MB
_WAL_BUFFERS_MAX_KB = 16 * KB_PER_MB
_WAL_BUFFERS_SNAP_KB = 14 * KB_PER_MB  # above this (and below the max): the max
_WAL_BUFFERS_MIN_KB = 32
_DEFAULT_WORKER_PROCESSES = 8  # PostgreSQL's max_worker_processes, counted in work_mem's budget


def format_kb(kb: int) -> str:
    """A size in kB as pgtune prints it: GB if it divides evenly, else MB, else kB.

    >>> format_kb(4 * 1048576)
    '4GB'
    >>> format_kb(7 * 1024)
    '7MB'
    >>> format_kb(6400 * 1024)
    '6400MB'
    >>> format_kb(47004)
    '47004kB'
    >>> format_kb(0)
    '0GB'
    """
    if kb % KB_PER_GB == 0:
        return f"{kb // KB_PER_GB}GB"
    if kb % KB_PER_MB == 0:
        return f"{kb // KB_PER_MB}MB"
    return f"{kb}kB"


def _check(inputs: BaselineInputs) -> None:
    if inputs.pg_version not in PG_VERSIONS:
        raise UsageError(
            f"PostgreSQL {inputs.pg_version} is outside what pgtune covers: "
            f"give --pg-version between {PG_VERSIONS[0]} and {PG_VERSIONS[-1]}."
        )
    if inputs.ram_bytes < 1024 * KB_PER_MB:
        raise UsageError("RAM must be at least 1MB: give --ram with a unit, e.g. --ram 16GB.")


def _wal_buffers_kb(shared_buffers_kb: int) -> int:
    """3% of shared_buffers, at most 16MB, rounded up to 16MB from above 14MB, at least 32kB.

    >>> _wal_buffers_kb(131072), _wal_buffers_kb(486400), _wal_buffers_kb(4194304)
    (3932, 16384, 16384)
    >>> _wal_buffers_kb(512)
    32
    """
    kb = min(3 * shared_buffers_kb // 100, _WAL_BUFFERS_MAX_KB)
    if _WAL_BUFFERS_SNAP_KB < kb < _WAL_BUFFERS_MAX_KB:
        kb = _WAL_BUFFERS_MAX_KB
    return max(kb, _WAL_BUFFERS_MIN_KB)


def _random_page_cost(inputs: BaselineInputs) -> int | float:
    """1.1 when the data fits in RAM; else 4 on hdd or for dw (index scans are a trap); else 1.1."""
    if inputs.data_size == "less_ram":
        return 1.1
    if inputs.storage == "hdd" or inputs.profile == "dw":
        return 4
    return 1.1


def _parallel(inputs: BaselineInputs) -> list[tuple[str, int]]:
    """Set only from 4 CPUs; per-gather workers capped at 4 except for dw."""
    cpus = inputs.cpus or 0
    if cpus < 4:
        return []
    half = math.ceil(cpus / 2)
    per_gather = half if inputs.profile == "dw" else min(half, 4)
    rows = [
        ("max_worker_processes", cpus),
        ("max_parallel_workers_per_gather", per_gather),
        ("max_parallel_workers", cpus),
    ]
    if inputs.pg_version >= 11:
        rows.append(("max_parallel_maintenance_workers", min(half, 4)))
    return rows


def _work_mem_kb(inputs: BaselineInputs, ram_kb: int, shared_buffers_kb: int) -> int:
    """(RAM - shared_buffers) / ((connections + worker processes) * 3), per profile and data size.

    The budget stays a fraction (pgtune's JavaScript doubles; Python floats are the same IEEE
    doubles, so every floor lands on the same integer).
    """
    profile = _PGTUNE[inputs.profile]
    connections = inputs.connections or profile.connections
    workers = inputs.cpus if inputs.cpus and inputs.cpus >= 4 else _DEFAULT_WORKER_PROCESSES
    budget = (ram_kb - shared_buffers_kb) / ((connections + workers) * 3)
    kb = math.floor(budget / profile.work_mem_div)
    factor = _WORK_MEM_BY_DATA_SIZE[inputs.data_size]
    if factor is not None:
        kb = math.floor(kb * factor)
    return max(kb, _WORK_MEM_MIN_KB)


def _version_settings(inputs: BaselineInputs, maintenance_kb: int) -> list[tuple[str, Value]]:
    """jit, wal_compression, autovacuum and PG 18's io_method, in pgtune's order."""
    version, cpus = inputs.pg_version, inputs.cpus or 0
    rows: list[tuple[str, Value]] = []
    if version >= 12 and _PGTUNE[inputs.profile].jit_off:
        rows.append(("jit", "off"))
    rows.append(("wal_compression", "lz4" if version >= 15 else "on"))
    if cpus >= 16:
        rows.append(("autovacuum_max_workers", 5 if cpus >= 32 else 4))
    if maintenance_kb >= _AUTOVACUUM_WORK_MEM_KB:
        rows.append(("autovacuum_work_mem", format_kb(_AUTOVACUUM_WORK_MEM_KB)))
    if version >= 18:
        # io_workers only matters for io_method=worker, which pgtune never picks on Linux
        rows.append(("io_method", "io_uring"))
    return rows


def pgtune(inputs: BaselineInputs) -> Settings:
    """The settings pgtune prints for these inputs (OS linux), in pgtune's order.

    >>> pgtune(BaselineInputs(17, "web", 16 * 2**30, cpus=8))["work_mem"]
    '20164kB'
    """
    _check(inputs)
    profile = _PGTUNE[inputs.profile]
    ram_kb = inputs.ram_bytes // 1024
    shared_buffers_kb = ram_kb // profile.shared_buffers_div
    maintenance_kb = min(ram_kb // profile.maintenance_div, _MAINTENANCE_CAP_KB)
    rows: list[tuple[str, Value]] = [
        ("max_connections", inputs.connections or profile.connections),
        ("shared_buffers", format_kb(shared_buffers_kb)),
        ("effective_cache_size", format_kb(ram_kb * profile.cache_quarters // 4)),
        ("maintenance_work_mem", format_kb(maintenance_kb)),
        ("checkpoint_completion_target", 0.9),
        ("wal_buffers", format_kb(_wal_buffers_kb(shared_buffers_kb))),
        ("default_statistics_target", profile.statistics_target),
        ("random_page_cost", _random_page_cost(inputs)),
        ("effective_io_concurrency", _IO_CONCURRENCY[inputs.storage]),
        ("work_mem", format_kb(_work_mem_kb(inputs, ram_kb, shared_buffers_kb))),
        ("huge_pages", "try" if shared_buffers_kb >= _HUGE_PAGES_FROM_KB else "off"),
        *_version_settings(inputs, maintenance_kb),
        ("min_wal_size", format_kb(profile.min_wal_kb)),
        ("max_wal_size", format_kb(profile.max_wal_kb)),
        *_parallel(inputs),
    ]
    if inputs.profile == "desktop":
        rows += [("wal_level", "minimal"), ("max_wal_senders", 0)]
    return dict(rows)


# timescaledb-tune works in bytes and prints with its own rule (`format_bytes`).
_TS_GB = 2**30
_TS_MB = 2**20
# default max_connections by RAM: (up to this many bytes, connections); above the last: 100
_TS_CONNECTIONS_BY_RAM = ((2 * _TS_GB, 25), (4 * _TS_GB, 50), (6 * _TS_GB, 75))
_TS_CONNECTIONS_DEFAULT = 100
_TS_MAINTENANCE_PER_GB = 128 * _TS_MB
_TS_MAINTENANCE_CAP = 2047 * _TS_MB  # 2GB is refused on Windows; the tool caps everywhere
_TS_WORK_MEM_PER_GB = 400 * _TS_MB  # shared among the connections
_TS_WORK_MEM_MIN = 64 * 1024  # PostgreSQL's minimum (below it the server refuses the file)
_TS_WAL_BUFFERS_PER_GB = 7864 * 1024  # below 2GB of RAM
_TS_WAL_BUFFERS = 16 * _TS_MB
_TS_MAX_WAL = 1 * _TS_GB  # no WAL disk size given; min_wal_size is half
_TS_BUILTIN_PROCESSES = 3  # checkpointer, WAL writer, autovacuum launcher
_TS_BACKGROUND_WORKERS = 16  # timescaledb.max_background_workers, counted in worker processes
_TS_MIN_CONNECTIONS = 25  # below it the tool refuses (Patroni replaces less with 100)
_TS_STATISTICS_TARGET = 100
# max_locks_per_transaction by RAM: 128 below 8GB, doubled at 8, 16 and 32GB (then 1024)
_TS_LOCKS_BY_RAM = ((32 * _TS_GB, 1024), (16 * _TS_GB, 512), (8 * _TS_GB, 256))
_TS_LOCKS_DEFAULT = 128


def format_bytes(n: int) -> str:
    """A size in bytes as timescaledb-tune prints it (`parse.BytesToPGFormat`): the largest unit
    not above it, one unit smaller (truncated) when that is not whole; never below 1kB.

    >>> format_bytes(2**30), format_bytes(2047 * 2**20), format_bytes(1536 * 2**20)
    ('1GB', '2047MB', '1536MB')
    >>> format_bytes(int(0.5 * 7864 * 1024)), format_bytes(100), format_bytes(1536)
    ('3932kB', '1kB', '2kB')
    """
    units = (("TB", 2**40), ("GB", _TS_GB), ("MB", _TS_MB), ("kB", 1024))
    for index, (unit, size) in enumerate(units):
        if n < size:
            continue
        value = n / size
        if unit == "kB":
            return f"{_round_half_away(value)}kB"
        if value - int(value) > 0.001:  # not whole: the next smaller unit, truncated
            return f"{int(value * 1024)}{units[index + 1][0]}"
        return f"{int(value)}{unit}"
    return "1kB"


def _round_half_away(x: float) -> int:
    """Go's math.Round (half away from zero), not Python's round (half to even)."""
    return math.floor(x + 0.5)


def _ts_connections(inputs: BaselineInputs) -> int:
    if inputs.connections:
        if inputs.connections < _TS_MIN_CONNECTIONS:
            raise UsageError(
                f"timescaledb-tune refuses fewer than {_TS_MIN_CONNECTIONS} connections: give "
                f"--connections {_TS_MIN_CONNECTIONS} or more."
            )
        return inputs.connections
    for limit, connections in _TS_CONNECTIONS_BY_RAM:
        if inputs.ram_bytes <= limit:
            return connections
    return _TS_CONNECTIONS_DEFAULT


def _ts_memory(inputs: BaselineInputs, cpus: int, connections: int) -> list[tuple[str, Value]]:
    ram = inputs.ram_bytes
    gigs = ram / _TS_GB
    maintenance = min(gigs * _TS_MAINTENANCE_PER_GB, _TS_MAINTENANCE_CAP)
    cpu_factor = max(_round_half_away(cpus / 2), 1)
    work_mem = gigs * (_TS_WORK_MEM_PER_GB / connections) / cpu_factor
    return [
        ("shared_buffers", format_bytes(ram // 4)),
        ("effective_cache_size", format_bytes(ram * 3 // 4)),
        ("maintenance_work_mem", format_bytes(int(maintenance))),
        ("work_mem", format_bytes(max(int(work_mem), _TS_WORK_MEM_MIN))),
    ]


def _ts_locks(ram: int) -> int:
    """
    >>> [_ts_locks(g * _TS_GB) for g in (7, 8, 15, 16, 24, 32, 80)]
    [128, 256, 256, 512, 512, 1024, 1024]
    """
    return next((locks for limit, locks in _TS_LOCKS_BY_RAM if ram >= limit), _TS_LOCKS_DEFAULT)


def _ts_parallel(cpus: int) -> list[tuple[str, Value]]:
    if cpus <= 1:  # the tool leaves parallelism alone on one CPU
        return []
    return [
        ("timescaledb.max_background_workers", _TS_BACKGROUND_WORKERS),
        ("max_worker_processes", _TS_BUILTIN_PROCESSES + _TS_BACKGROUND_WORKERS + cpus),
        ("max_parallel_workers_per_gather", _round_half_away(cpus / 2)),
        ("max_parallel_workers", cpus),
    ]


def _ts_wal(ram: int) -> list[tuple[str, Value]]:
    small = ram < 2 * _TS_GB
    wal_buffers = int(ram / _TS_GB * _TS_WAL_BUFFERS_PER_GB) if small else _TS_WAL_BUFFERS
    return [
        ("wal_buffers", format_bytes(wal_buffers)),
        ("min_wal_size", format_bytes(_TS_MAX_WAL // 2)),
        ("max_wal_size", format_bytes(_TS_MAX_WAL)),
    ]


def timescaledb_tune(inputs: BaselineInputs) -> Settings:
    """The settings timescaledb-tune recommends for these inputs (Linux), group by group.

    Groups as the tool prints them: memory, parallelism (with its own
    timescaledb.max_background_workers, a setting of the TimescaleDB extension), WAL, then the
    miscellaneous group (statistics target, costs, connections, locks by RAM, autovacuum,
    I/O concurrency, jit, and lz4 TOAST compression from PostgreSQL 14). timescaledb-tune
    always knows the CPU count (it reads the host), so it must be given; it refuses fewer than
    25 connections.

    >>> timescaledb_tune(BaselineInputs(16, "web", 8 * 2**30, cpus=4))["work_mem"]
    '16MB'
    """
    _check(inputs)
    if not inputs.cpus:
        raise UsageError("timescaledb-tune needs the CPU count: give --cpus.")
    connections = _ts_connections(inputs)
    rows = [
        *_ts_memory(inputs, inputs.cpus, connections),
        *_ts_parallel(inputs.cpus),
        *_ts_wal(inputs.ram_bytes),
        ("default_statistics_target", _TS_STATISTICS_TARGET),
        ("random_page_cost", 1.1),
        ("checkpoint_completion_target", 0.9),
        ("max_connections", connections),
        ("max_locks_per_transaction", _ts_locks(inputs.ram_bytes)),
        ("autovacuum_max_workers", 10),
        ("autovacuum_naptime", 10),
        ("effective_io_concurrency", 200 if inputs.pg_version <= 12 else 256),
    ]
    if inputs.pg_version >= 12:
        rows.append(("jit", "off"))
    if inputs.pg_version >= 14:
        rows.append(("default_toast_compression", "lz4"))
    return dict(rows)


BASELINES: dict[str, Callable[[BaselineInputs], Settings]] = {
    "pgtune": pgtune,
    "timescaledb-tune": timescaledb_tune,
}
