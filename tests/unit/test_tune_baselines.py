"""pgtune and timescaledb-tune baselines: the tools' own numbers, to the unit.

pgtune's part is compared with pgtune's own code run over 3,000 inputs
(tests/data/pgtune/cases.json, see its README), with pgtune's unit-test expectations and with the
worked examples of ../shared/reference/PGTUNE.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgdyno.errors import UsageError
from pgdyno.tune.baselines import (
    BASELINES,
    BaselineInputs,
    format_bytes,
    format_kb,
    pgtune,
    timescaledb_tune,
)

CASES = Path(__file__).parent.parent / "data" / "pgtune" / "cases.json"
GB = 2**30
MB = 2**20


def _recorded() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(CASES.read_text())["cases"]
    return cases


def test_every_recorded_pgtune_case_matches_value_type_and_order() -> None:
    cases = _recorded()
    assert len(cases) >= 3000
    mismatches = []
    for case in cases:
        got = list(pgtune(BaselineInputs(**case["input"])).items())
        want = [tuple(pair) for pair in case["settings"]]
        # type too: pgtune prints `random_page_cost = 4`, a number, never "4" nor 4.0
        if [(k, v, type(v)) for k, v in got] != [(k, v, type(v)) for k, v in want]:
            mismatches.append((case["input"], got, want))
    assert not mismatches, f"{len(mismatches)} cases differ, first: {mismatches[0]}"


def test_recorded_cases_reach_every_branch() -> None:
    """The sample is only worth something if it crosses each cap and threshold."""
    seen: dict[str, set[Any]] = {}
    for case in _recorded():
        for key, value in case["settings"]:
            seen.setdefault(key, set()).add(value)
    assert {"16MB", "32kB"} & seen["wal_buffers"] == {"16MB"}  # 14-16MB snap and the cap
    assert any(v.endswith("kB") for v in seen["wal_buffers"])
    assert "8GB" in seen["maintenance_work_mem"]
    assert seen["huge_pages"] == {"try", "off"}
    assert seen["autovacuum_work_mem"] == {"2GB"}
    assert seen["autovacuum_max_workers"] == {4, 5}
    assert "4MB" in seen["work_mem"]
    assert seen["random_page_cost"] == {1.1, 4}
    assert seen["effective_io_concurrency"] == {2, 200, 300, 1000}
    assert seen["wal_compression"] == {"on", "lz4"}
    assert seen["max_parallel_workers_per_gather"] >= {2, 4, 16, 32}


# PGTUNE.md's worked examples (from pgtune's own code), values as pgtune prints them.
WORKED = [
    (
        BaselineInputs(17, "web", 16 * GB, cpus=8),
        {
            "max_connections": 200, "shared_buffers": "4GB", "effective_cache_size": "12GB",
            "maintenance_work_mem": "1GB", "work_mem": "20164kB", "wal_buffers": "16MB",
            "min_wal_size": "1GB", "max_wal_size": "4GB", "huge_pages": "try",
            "random_page_cost": 1.1, "effective_io_concurrency": 200, "max_worker_processes": 8,
            "max_parallel_workers_per_gather": 4, "max_parallel_workers": 8,
            "max_parallel_maintenance_workers": 4, "jit": "off", "wal_compression": "lz4",
        },
    ),
    (
        BaselineInputs(16, "oltp", 64 * GB, cpus=16, connections=500, storage="nvme",
                       data_size="greater_ram"),
        {
            "shared_buffers": "16GB", "effective_cache_size": "48GB",
            "maintenance_work_mem": "4GB", "work_mem": "29261kB", "min_wal_size": "2GB",
            "max_wal_size": "8GB", "effective_io_concurrency": 1000,
            "autovacuum_max_workers": 4, "autovacuum_work_mem": "2GB",
        },
    ),
    (
        BaselineInputs(18, "dw", 128 * GB, cpus=32),
        {
            "max_connections": 40, "shared_buffers": "32GB", "maintenance_work_mem": "8GB",
            "work_mem": "233016kB", "random_page_cost": 4, "max_parallel_workers_per_gather": 16,
            "default_statistics_target": 500, "min_wal_size": "4GB", "max_wal_size": "16GB",
            "io_method": "io_uring",
        },
    ),
]  # fmt: skip


@pytest.mark.parametrize(("inputs", "expected"), WORKED)
def test_pgtune_worked_examples(inputs: BaselineInputs, expected: dict[str, object]) -> None:
    got = pgtune(inputs)
    assert {k: got[k] for k in expected} == expected
    assert all(type(got[k]) is type(v) for k, v in expected.items())


def test_pgtune_published_output_pg18_mixed() -> None:
    """A postgresql.conf pgtune printed (PG 18, mixed, 32 GB, 6 CPUs, ssd; work_mem 51438kB is
    pgtune's less_ram result), line for line."""
    got = pgtune(BaselineInputs(18, "mixed", 32 * GB, cpus=6, data_size="less_ram"))
    assert got == {
        "max_connections": 100, "shared_buffers": "8GB", "effective_cache_size": "24GB",
        "maintenance_work_mem": "2GB", "checkpoint_completion_target": 0.9,
        "wal_buffers": "16MB", "default_statistics_target": 100, "random_page_cost": 1.1,
        "effective_io_concurrency": 200, "work_mem": "51438kB", "huge_pages": "try",
        "jit": "off", "wal_compression": "lz4", "autovacuum_work_mem": "2GB",
        "io_method": "io_uring", "min_wal_size": "1GB", "max_wal_size": "4GB",
        "max_worker_processes": 6, "max_parallel_workers_per_gather": 3,
        "max_parallel_workers": 6, "max_parallel_maintenance_workers": 3,
    }  # fmt: skip
    assert list(got)[-4:] == [
        "max_worker_processes", "max_parallel_workers_per_gather", "max_parallel_workers",
        "max_parallel_maintenance_workers",
    ]  # fmt: skip


# pgtune's own unit tests (configurationSlice.test.js), restated: inputs -> one value.
def _one(key: str, **kwargs: Any) -> object:
    defaults: dict[str, Any] = {"pg_version": 18, "profile": "web", "ram_bytes": 16 * GB}
    return pgtune(BaselineInputs(**(defaults | kwargs))).get(key)


@pytest.mark.parametrize(
    ("profile", "connections"),
    [("web", 200), ("oltp", 300), ("dw", 40), ("desktop", 20), ("mixed", 100)],
)
def test_pgtune_suite_max_connections(profile: str, connections: int) -> None:
    assert _one("max_connections", profile=profile) == connections


@pytest.mark.parametrize(
    ("profile", "target"), [("web", 100), ("oltp", 100), ("dw", 500), ("desktop", 100)]
)
def test_pgtune_suite_statistics_target(profile: str, target: int) -> None:
    assert _one("default_statistics_target", profile=profile) == target


@pytest.mark.parametrize(
    ("storage", "cost", "io"),
    [("hdd", 4, 2), ("ssd", 1.1, 200), ("san", 1.1, 300), ("nvme", 1.1, 1000)],
)
def test_pgtune_suite_storage(storage: str, cost: float, io: int) -> None:
    assert _one("random_page_cost", storage=storage) == cost
    assert _one("effective_io_concurrency", storage=storage) == io


def test_pgtune_suite_parallel() -> None:
    assert _one("max_worker_processes", cpus=1) is None
    got = pgtune(BaselineInputs(13, "web", 16 * GB, cpus=12))
    assert [got[k] for k in ("max_worker_processes", "max_parallel_workers_per_gather",
                             "max_parallel_workers", "max_parallel_maintenance_workers")] == [
        12, 4, 12, 4]  # fmt: skip
    pg10 = pgtune(BaselineInputs(10, "web", 16 * GB, cpus=31))
    assert (pg10["max_parallel_workers_per_gather"], pg10["max_parallel_workers"]) == (4, 31)
    assert "max_parallel_maintenance_workers" not in pg10
    dw = pgtune(BaselineInputs(12, "dw", 16 * GB, cpus=31))
    assert dw["max_parallel_workers_per_gather"] == 16
    assert dw["max_parallel_maintenance_workers"] == 4


def test_pgtune_suite_desktop_wal_level() -> None:
    desktop = pgtune(BaselineInputs(18, "desktop", 16 * GB))
    assert list(desktop.items())[-2:] == [("wal_level", "minimal"), ("max_wal_senders", 0)]
    assert "wal_level" not in pgtune(BaselineInputs(18, "web", 16 * GB))


def test_pgtune_suite_memory_caps() -> None:
    assert _one("maintenance_work_mem", ram_bytes=256 * GB, pg_version=17) == "8GB"
    assert _one("maintenance_work_mem", ram_bytes=16 * GB, pg_version=15) == "1GB"
    assert _one("huge_pages", ram_bytes=4 * GB) == "off"
    assert _one("huge_pages", ram_bytes=16 * GB) == "try"
    assert _one("work_mem", ram_bytes=4 * GB, connections=9999, cpus=4) == "4MB"
    assert _one("autovacuum_work_mem", ram_bytes=4 * GB, pg_version=15) is None
    assert _one("autovacuum_work_mem", ram_bytes=256 * GB, pg_version=15) == "2GB"


def test_pgtune_suite_version_dependent() -> None:
    assert _one("jit", pg_version=12) == "off"
    assert _one("jit", pg_version=15, profile="oltp") == "off"
    assert _one("jit", pg_version=15, profile="dw") is None
    assert _one("jit", pg_version=11) is None
    assert [_one("wal_compression", pg_version=v) for v in (10, 14, 15, 17)] == [
        "on", "on", "lz4", "lz4"]  # fmt: skip
    assert [_one("autovacuum_max_workers", cpus=c) for c in (32, 16, 8)] == [5, 4, None]
    assert _one("io_method", pg_version=17) is None
    assert _one("io_method", pg_version=18) == "io_uring"
    assert _one("io_workers", pg_version=18, cpus=64) is None  # not with io_uring


def test_format_kb_prefers_the_largest_exact_unit() -> None:
    assert [format_kb(kb) for kb in (2097152, 2096128, 102400, 7864)] == [
        "2GB", "2047MB", "100MB", "7864kB"]  # fmt: skip


def test_bad_inputs_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="between 10 and 18"):
        pgtune(BaselineInputs(9, "web", 16 * GB))
    with pytest.raises(UsageError, match="--ram"):
        pgtune(BaselineInputs(16, "web", 0))


def test_registry_names_both_tools() -> None:
    assert set(BASELINES) == {"pgtune", "timescaledb-tune"}
    assert BASELINES["pgtune"] is pgtune
    assert BASELINES["timescaledb-tune"] is timescaledb_tune
    assert json.loads(json.dumps(pgtune(BaselineInputs(16, "oltp", 512 * MB))))


# timescaledb-tune: no oracle was run (its module is not on the Go proxy here); these are the
# facts of PGTUNE.md and the edge cases its users hit.
def _ts(ram: int, cpus: int = 4, **kwargs: Any) -> dict[str, object]:
    return timescaledb_tune(BaselineInputs(16, "web", ram, cpus=cpus, **kwargs))


def test_timescaledb_memory_facts() -> None:
    got = _ts(8 * GB)
    assert list(got)[:4] == [
        "shared_buffers", "effective_cache_size", "maintenance_work_mem", "work_mem"]  # fmt: skip
    assert (got["shared_buffers"], got["effective_cache_size"]) == ("2GB", "6GB")
    assert got["maintenance_work_mem"] == "1GB"  # 8 x 128MB
    assert got["work_mem"] == "16MB"  # 8 x (400MB / 100) / round(4 / 2)
    assert _ts(16 * GB)["maintenance_work_mem"] == "2047MB"  # capped
    assert _ts(1536 * MB)["maintenance_work_mem"] == "192MB"


def test_timescaledb_work_mem_never_below_64kb() -> None:
    """timescaledb-tune's most-reported bug: a work_mem PostgreSQL refuses."""
    assert _ts(1 * GB, cpus=64, connections=10000)["work_mem"] == "64kB"


def test_timescaledb_max_connections_by_ram() -> None:
    sizes = [1 * GB, 2 * GB, 2 * GB + MB, 4 * GB, 6 * GB, 6 * GB + MB, 64 * GB]
    assert [_ts(r)["max_connections"] for r in sizes] == [25, 25, 50, 50, 75, 100, 100]
    assert _ts(64 * GB, connections=300)["max_connections"] == 300


def test_timescaledb_parallel_wal_and_versions() -> None:
    assert "max_worker_processes" not in _ts(8 * GB, cpus=1)
    five = _ts(8 * GB, cpus=5)
    # Go's math.Round(2.5) is 3 (Python's round gives 2)
    assert (five["max_parallel_workers_per_gather"], five["max_worker_processes"]) == (3, 24)
    assert five["max_parallel_workers"] == 5
    assert [_ts(r)["wal_buffers"] for r in (512 * MB, 1 * GB, 2 * GB)] == [
        "3932kB", "7864kB", "16MB"]  # fmt: skip
    assert (five["min_wal_size"], five["max_wal_size"]) == ("512MB", "1GB")
    assert (five["checkpoint_completion_target"], five["random_page_cost"]) == (0.9, 1.1)
    assert (five["autovacuum_max_workers"], five["autovacuum_naptime"]) == (10, 10)

    def version(v: int) -> dict[str, object]:
        return timescaledb_tune(BaselineInputs(v, "web", 8 * GB, cpus=4))

    assert [version(v)["effective_io_concurrency"] for v in (12, 13)] == [200, 256]
    assert "jit" not in version(11)
    assert version(12)["jit"] == "off"


def test_timescaledb_needs_the_cpu_count() -> None:
    with pytest.raises(UsageError, match="--cpus"):
        timescaledb_tune(BaselineInputs(16, "web", 8 * GB))


def test_format_bytes_follows_timescaledb_tune() -> None:
    assert [format_bytes(n) for n in (2**40, 1536 * 2**30, 1025, 1, 3 * 2**20 + 1)] == [
        "1TB", "1536GB", "1kB", "1kB", "3MB"]  # fmt: skip


# timescaledb-tune's own unit-test tables (pkg/pgtune/misc_test.go, parallel_test.go,
# tune_test.go of timescale/timescaledb-tune), recorded as cases: the figures its tests expect.
TS_MAX_LOCKS = [  # totalMemory -> max_locks_per_transaction (misc_test.go)
    (7 * GB, 128), (8 * GB, 256), (15 * GB, 256), (16 * GB, 512), (24 * GB, 512),
    (32 * GB, 1024), (80 * GB, 1024),
]  # fmt: skip
TS_PARALLEL = {  # CPUs -> (background workers, worker processes, per gather, parallel workers)
    2: (16, 2 + 3 + 16, 1, 2),
    4: (16, 4 + 3 + 16, 2, 4),
    5: (16, 5 + 3 + 16, 3, 5),
}


@pytest.mark.parametrize(("ram", "locks"), TS_MAX_LOCKS)
def test_timescaledb_max_locks_by_ram(ram: int, locks: int) -> None:
    assert _ts(ram)["max_locks_per_transaction"] == locks


@pytest.mark.parametrize("cpus", sorted(TS_PARALLEL))
def test_timescaledb_parallel_table(cpus: int) -> None:
    got = _ts(8 * GB, cpus=cpus)
    names = ("timescaledb.max_background_workers", "max_worker_processes",
             "max_parallel_workers_per_gather", "max_parallel_workers")  # fmt: skip
    assert tuple(got[n] for n in names) == TS_PARALLEL[cpus]


def test_timescaledb_miscellaneous_group() -> None:
    got = _ts(8 * GB)
    assert (got["default_statistics_target"], got["random_page_cost"]) == (100, 1.1)
    misc = ["default_statistics_target", "random_page_cost", "checkpoint_completion_target",
            "max_connections", "max_locks_per_transaction", "autovacuum_max_workers",
            "autovacuum_naptime", "effective_io_concurrency"]  # fmt: skip
    assert [name for name in got if name in misc] == misc  # the tool's order

    def version(v: int) -> dict[str, object]:
        return timescaledb_tune(BaselineInputs(v, "web", 8 * GB, cpus=4))

    assert "default_toast_compression" not in version(13)
    assert [version(v)["default_toast_compression"] for v in (14, 18)] == ["lz4", "lz4"]


@pytest.mark.parametrize("connections", [1, 24])
def test_timescaledb_refuses_fewer_than_25_connections(connections: int) -> None:
    with pytest.raises(UsageError, match="fewer than 25 connections"):
        _ts(8 * GB, connections=connections)
    assert _ts(8 * GB, connections=25)["max_connections"] == 25
