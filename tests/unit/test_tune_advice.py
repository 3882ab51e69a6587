"""Advice a PostgreSQL expert would sign: each point checked against the documentation of the
version it targets (cited in data/tune.toml), on the recorded pg_settings of 14 to 18."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pgdyno.cli.tune_request import VerifyOptions, check_verify, workload_names
from pgdyno.errors import UsageError
from pgdyno.postgres.settings import check_setting
from pgdyno.postgres.settings_catalog import recorded_defaults, recorded_settings
from pgdyno.records.tune import TuneFacts
from pgdyno.tune.facts import Given, offline_facts
from pgdyno.tune.huge_pages import PagesFigure, probe_command, sized
from pgdyno.tune.model import Configuration, Setting
from pgdyno.tune.recommend import recommend
from pgdyno.tune.request_checks import (
    check_connections,
    check_options,
    check_pg_version,
    most_connections,
    out_dir,
    parse_ram,
)

GiB = 1024**3
VERSIONS = (14, 15, 16, 17, 18)
FACTS = TuneFacts("oltp", connections=300)  # the --out files do not read the facts


def configure(major: int, **given: object) -> dict[str, str]:
    """pgdyno's PostgreSQL values for a machine, each checked against that version's catalog."""
    fields: dict[str, object] = {"profile": "oltp", "ram_bytes": 64 * GiB, "cpus": 16,
                                 "storage": "ssd", "pg_version": major, **given}  # fmt: skip
    meta = recorded_settings(major)
    config = recommend(offline_facts(Given(**fields)), meta, {})  # type: ignore[arg-type]
    assert not config.notes, config.notes
    for name, value in config.pg_values().items():
        check_setting(meta, name, value, str(major))
    return {s.name: s.value for s in config.layer("postgresql")}


def why(major: int, name: str, **given: object) -> str:
    fields: dict[str, object] = {"profile": "oltp", "ram_bytes": 64 * GiB, "cpus": 16,
                                 "storage": "ssd", "pg_version": major, **given}  # fmt: skip
    config = recommend(offline_facts(Given(**fields)), recorded_settings(major), {})  # type: ignore[arg-type]
    return next(s.why for s in config.settings if s.name == name)


# -- max_worker_processes leaves room beside the parallel workers ---------------------------------


@pytest.mark.parametrize("major", VERSIONS)
@pytest.mark.parametrize("cpus", [4, 16, 96])
def test_worker_processes_leave_room_for_replication_and_extensions(major: int, cpus: int):
    values = configure(major, cpus=cpus)
    # Logical replication workers (max_logical_replication_workers, 4 by default) and the
    # extensions' background workers come from the same pool as the parallel workers.
    logical = int(recorded_defaults(major)["max_logical_replication_workers"])
    assert logical == 4
    assert int(values["max_worker_processes"]) >= int(values["max_parallel_workers"]) + logical
    reason = why(major, "max_worker_processes", cpus=cpus)
    assert "logical replication" in reason and "standby" in reason and "extensions" in reason


# -- io_workers in proportion to the I/O in flight; io_method left at its default ------------------


@pytest.mark.parametrize(
    ("storage", "cpus", "workers"),
    [("ssd", 16, "25"), ("san", 16, "32"), ("nvme", 16, "25"), ("ssd", 2, "8"), ("hdd", 16, None)],
)
def test_io_workers_follow_the_io_concurrency_on_18(storage: str, cpus: int, workers: str | None):
    values = configure(18, storage=storage, cpus=cpus)
    assert "io_method" not in values  # worker is 18's default: not written
    assert values.get("io_workers") == workers
    if workers is not None:
        meta = recorded_settings(18)["io_workers"]
        assert recorded_defaults(18)["io_workers"] == "3"
        assert int(workers) <= int(meta.max_val or 0) == 32
        # 200 in flight through 3 workers contradicted itself: at most 8 requests per worker,
        # unless a cap (32, 4 per CPU) holds it.
        in_flight = int(values["effective_io_concurrency"])
        assert int(workers) == min(in_flight // 8, 32, 4 * cpus)


@pytest.mark.parametrize("major", [14, 15, 16, 17])
def test_no_io_settings_before_18(major: int):
    values = configure(major)
    assert "io_method" not in values and "io_workers" not in values


# -- more autovacuum workers, a larger shared cost limit ------------------------------------------


@pytest.mark.parametrize("major", VERSIONS)
@pytest.mark.parametrize(
    ("cpus", "workers", "limit"), [(8, 3, None), (16, 4, "266"), (32, 8, "533")]
)
def test_autovacuum_cost_limit_rises_with_the_workers(major, cpus, workers, limit):
    values = configure(major, cpus=cpus)
    assert values["autovacuum_max_workers"] == str(workers)
    assert values.get("autovacuum_vacuum_cost_limit") == limit
    if limit is not None:
        # The limit is shared among the running workers: each keeps the default three's pace.
        assert int(limit) // workers == 200 // 3
        assert "shared" in why(major, "autovacuum_vacuum_cost_limit", cpus=cpus)


# -- WAL sizes on a small file system -----------------------------------------------------------


def megabytes(text: str) -> int:
    return int(text[:-2]) * (1024 if text.endswith("GB") else 1)


@pytest.mark.parametrize("profile", ["web", "oltp", "dw", "mixed", "desktop"])
@pytest.mark.parametrize("free", [3 * GiB, 6 * GiB, 100 * GiB])
def test_min_wal_size_stays_below_max_wal_size(profile: str, free: int):
    facts = offline_facts(Given(profile, ram_bytes=16 * GiB, cpus=4, pg_version=17, storage="ssd"))  # type: ignore[arg-type]
    facts = replace(facts, wal_free=free, sources={**facts.sources, "wal_free": "test"})
    config = recommend(facts, recorded_settings(17), {})
    values = config.pg_values()
    sizes = {n: megabytes(values[n]) for n in ("min_wal_size", "max_wal_size")}
    assert sizes["min_wal_size"] < sizes["max_wal_size"], values
    if profile == "dw" and free == 3 * GiB:  # a quarter of the free space, never above it
        assert (values["min_wal_size"], values["max_wal_size"]) == ("384MB", "768MB")


# -- huge_pages = on only over pages known to suffice (tune/huge_pages.py) -----------------------


def huge_config(current: str | None) -> Configuration:
    return Configuration("pgdyno", "oltp", (
        Setting("postgresql", "huge_pages", "on", "why", takes_effect="restart"),
        Setting("host", "vm.nr_hugepages", "1024", "why", current=current),
    ), FACTS)  # fmt: skip


def host_pages(config: Configuration) -> str | None:
    return next((s.value for s in config.layer("host") if s.name == "vm.nr_hugepages"), None)


# The 8 GiB snapshot of issue 31 at --connections 5000: PostgreSQL 18.6 counted 1252 pages.
COUNTED = PagesFigure(1252, "PostgreSQL 18.6 (postgres -C)", "postgres -D DATADIR -C ...")


@pytest.mark.parametrize(
    ("current", "mode", "pages"),
    [(None, "try", "1252"), ("0", "try", "1252"), ("1108", "try", "1252"),
     ("1252", "on", "1252"), ("9000", "on", "9000")],
)  # fmt: skip
def test_huge_pages_on_only_over_pages_that_hold_the_servers_count(
    current: str | None, mode: str, pages: str
):
    config = sized(huge_config(current), COUNTED)
    assert config.pg_values()["huge_pages"] == mode
    assert host_pages(config) == pages  # the server's count, never the estimate (1024)
    why = next(s.why for s in config.settings if s.name == "huge_pages")
    assert ("set huge_pages = on" in why) == (mode == "try") and not config.notes


def test_without_the_servers_count_nothing_is_reserved_and_the_command_is_given():
    command = "postgres -D DATADIR -C shared_memory_size_in_huge_pages -c shared_buffers=2GB"
    figure = PagesFigure(None, "no PostgreSQL 17 binary is at hand here", command)
    config = sized(huge_config("0"), figure)
    assert config.pg_values()["huge_pages"] == "try" and host_pages(config) is None
    assert any(command in note for note in config.notes), config.notes


def test_pg14_gets_the_vmpeak_method():
    figure = PagesFigure(None, "PostgreSQL 14 does not report it", probe_command(14, {}))
    (note,) = sized(huge_config(None), figure).notes
    assert "VmPeak" in note and "huge_pages = try" in note


# -- what the server refuses at start is refused before -------------------------------------------


@pytest.mark.parametrize("connections", [1, 2, 3])
def test_too_few_connections_are_refused(connections: int):
    with pytest.raises(UsageError, match="superuser_reserved_connections"):
        check_connections(connections, {}, 18)


def test_connections_up_to_what_the_version_starts_with():
    # PostgreSQL 18 refuses max_connections 262108 beside 16 autovacuum worker slots, 8
    # background workers and 10 WAL senders ("must be less than 262142"): its own figure,
    # checked on the real server in tests/integration/test_tune_files_live.py.
    assert most_connections({}, 18) == 262107
    check_connections(262107, {}, 18)
    check_connections(4, {}, 18)
    for major in (17, 18, None):
        with pytest.raises(UsageError, match="give at most"):
            check_connections(262143, {}, major)
    # more background workers leave fewer connections
    assert most_connections({"max_worker_processes": 24}, 17) == most_connections({}, 17) - 16


@pytest.mark.parametrize("version", [0, -1, 9, 13, 19])
def test_unknown_versions_are_refused(version: int):
    with pytest.raises(UsageError, match="give 14 to 18"):
        check_pg_version(version)


@pytest.mark.parametrize("text", ["infGB", "nanGB", "0x10GB", "1e-9GB", "1B", "64", "GB", "-1GB"])
def test_ram_that_is_no_size_is_refused(text: str):
    with pytest.raises(UsageError, match="--ram"):
        parse_ram(text)


def test_ram_sizes():
    assert parse_ram("64GB") == 64 * GiB and parse_ram(" 1.5 GB ") == 3 * GiB // 2
    for text in ("0.5MB", "0GB", "2000TB"):
        with pytest.raises(UsageError):
            parse_ram(text)


def test_empty_out_is_refused():
    with pytest.raises(UsageError, match="--out needs a directory"):
        out_dir("")
    assert str(out_dir("tuned")) == "tuned"


OFFLINE_NOOPS = ["ladder", "workloads", "budget", "restart_command", "data_dir", "pg_bin", "scale",
                 "clients", "duration", "precision"]  # fmt: skip


@pytest.mark.parametrize("name", OFFLINE_NOOPS)
def test_options_that_do_nothing_offline_are_refused(name: str):
    with pytest.raises(UsageError, match="offline"):
        check_options({name}, offline=True, verify=False)


def test_verify_options_without_verify_are_refused_online():
    with pytest.raises(UsageError, match="--ladder only acts with --verify"):
        check_options({"ladder"}, offline=False, verify=False)
    check_options({"ladder", "budget"}, offline=False, verify=True)
    check_options({"restart_command", "data_dir"}, offline=False, verify=False)


def _verify(workloads: str, scale: str, budget: str | None = None) -> VerifyOptions:
    return VerifyOptions(workload_names(workloads), scale, None, 30, 10, None, budget, False)


@pytest.mark.parametrize(("options", "words"), [
    (_verify(",", "small"), "names no workload"),
    (_verify("tpcc,select-only", "small"), "cannot share a matrix with pgbench's workloads"),
    (_verify("tpcb-like", "huge"), "--scale 'huge'"),
    (_verify("tpcb-like", "small", "soon"), "--budget 'soon'"),
])  # fmt: skip
def test_bad_verify_options_are_refused(options: VerifyOptions, words: str):
    with pytest.raises(UsageError, match=words):
        check_verify(options)
    check_verify(_verify("tpcb-like,select-only", "small", "30m"))
    check_verify(_verify("tpcc", "4", "30m"))
