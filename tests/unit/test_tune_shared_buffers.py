"""shared_buffers is always recommended: sized from the whole cluster's data, at least
PostgreSQL's minimum, at most its maximum, and work_mem's budget counts the value given.

The three machines that once lost shared_buffers (a value PostgreSQL refused, left out, then
counted as 0 in work_mem's budget): `--ram 256MB`, `--ram 1GB --profile desktop`, `--ram 64TB`.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pgdyno.doctor.snapshot import FORMAT
from pgdyno.postgres.settings import check_setting, conf_value
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.tune.facts import Given, offline_facts, snapshot_facts
from pgdyno.tune.model import Configuration
from pgdyno.tune.recommend import recommend

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4
PG = 17


def offline(ram: int, profile: str = "mixed") -> Configuration:
    given = Given(profile, ram_bytes=ram, cpus=4, pg_version=PG)  # type: ignore[arg-type]
    return recommend(offline_facts(given), recorded_settings(PG), {})


def size(values: dict[str, str], name: str) -> int:
    value = conf_value(values[name])
    assert isinstance(value, int), (name, values[name])
    return value


def expected_work_mem(config: Configuration, ram: int, shared_buffers: int) -> int:
    """data/tune.toml's work_mem restated: 3/4 of RAM less shared buffers, autovacuum's
    memory and each process's own 2 MiB, shared by the connections and 4 parallel workers
    (4 CPUs) at hash_mem_multiplier 2, capped by profile, whole MB from 4MB up (kB below), at
    least 64kB."""
    values = config.pg_values()
    autovacuum = int(values["autovacuum_max_workers"]) * size(values, "maintenance_work_mem")
    processes = config.facts.connections + 4  # as asked: a cap comes after work_mem
    budget = ram * 3 // 4 - shared_buffers - autovacuum - processes * 2 * MiB  # BACKEND_BYTES
    fitting = budget / (processes * 2.0)
    cap = {"mixed": 128 * MiB, "desktop": 32 * MiB}[config.profile]
    unit = MiB if fitting >= 4 * MiB else KiB
    return max(64 * KiB, int(min(cap, fitting)) // unit * unit)


@pytest.mark.parametrize(
    ("ram", "profile", "shared_buffers"),
    [
        (256 * MiB, "mixed", 64 * MiB),  # a quarter, in whole MB below 1GB
        (1 * GiB, "desktop", 128 * MiB),  # an eighth on a desktop (the doctor's floor)
        (64 * TiB, "mixed", 8191 * GiB),  # a quarter would be 16TB: capped below 8TB
    ],
    ids=["ram-256MB", "ram-1GB-desktop", "ram-64TB"],
)
def test_shared_buffers_is_always_given_and_work_mem_counts_it(
    ram: int, profile: str, shared_buffers: int
) -> None:
    config = offline(ram, profile)
    values = config.pg_values()
    assert size(values, "shared_buffers") == shared_buffers
    assert not [note for note in config.notes if "shared_buffers" in note]
    assert check_setting(recorded_settings(PG), "shared_buffers", values["shared_buffers"], "17")
    work_mem = size(values, "work_mem")
    assert work_mem == expected_work_mem(config, ram, shared_buffers)
    if TiB > ram > 256 * MiB:  # below the cap, above the floor: without shared buffers, more
        assert work_mem < expected_work_mem(config, ram, 0)


def test_shared_buffers_never_goes_below_the_minimum() -> None:
    values = offline(256 * KiB).pg_values()
    assert values["shared_buffers"] == "128kB"


def snapshot(ram: int, databases: list[dict[str, Any]], data_bytes: int | None) -> dict[str, Any]:
    """A hand-written doctor snapshot of a server on another host (docs/doctor-snapshot.md)."""
    return {
        "format": FORMAT,
        "target": "server db.example.com:5432/app",
        "host": {"memory_bytes": ram, "cpu_count": 8},
        "server": {
            "version_num": 170004,
            "databases": databases,
            "data_bytes": data_bytes,
            "settings": {"max_connections": {"setting": "100"}},
        },
    }


def test_shared_buffers_holds_the_whole_cluster_not_the_largest_database() -> None:
    """Three databases of 3 GB on 32 GB: the largest alone (3.6 GB with a fifth more) fits in a
    quarter (8 GB); the cluster (10.8 GB with a fifth) is above a quarter and within 2/5
    (12.8 GB), so shared buffers grow to hold all three. pgdyno's template is not counted."""
    ram = 32 * GiB
    three = [{"name": f"app{n}", "bytes": 3 * GiB} for n in range(3)]
    with_template = [*three, {"name": "pgdyno_tpl_s100", "bytes": 20 * GiB}]
    facts = snapshot_facts(snapshot(ram, with_template, 9 * GiB), Given("oltp"))
    assert facts.data_bytes == 9 * GiB and facts.sources["data_bytes"].startswith("the cluster's")
    values = recommend(facts, recorded_settings(PG), {}).pg_values()
    wanted = 9 * GiB * 6 // 5
    assert size(values, "shared_buffers") == math.floor(wanted / (128 * MiB)) * 128 * MiB
    assert size(values, "shared_buffers") > ram // 4  # the largest database alone: a quarter


def test_a_cluster_too_large_for_two_fifths_keeps_a_quarter() -> None:
    ram = 32 * GiB
    databases = [{"name": "big", "bytes": 40 * GiB}]
    facts = snapshot_facts(snapshot(ram, databases, 40 * GiB), Given("oltp"))
    assert recommend(facts, recorded_settings(PG), {}).pg_values()["shared_buffers"] == "8GB"
