"""`pgdyno bench --dsn` on a server that loads pg_wait_sampling (issue 24).

The server is a cluster of Debian's packaged PostgreSQL of its own (`wait_sampling_server`,
tests/debian_cluster.py) started with `shared_preload_libraries = 'pg_wait_sampling'`
(Debian's postgresql-<major>-pg-wait-sampling, which `scripts/bootstrap dev` installs as root).
pgdyno reads the extension's profile in the database its --dsn names, the one its sampler is
connected to (the benchmark database is copied again before every run), and only from a
pg_wait_sampling that samples sessions on CPU too (`pg_wait_sampling.sample_cpu`, on by default
where it exists): Debian bookworm's 1.1.4 does not, so there pgdyno says so and samples
pg_stat_activity. The extension's reading itself is tested on any version in
tests/integration/test_wait_sampling.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Result
from debian_cluster import WAIT_SAMPLING, DebianCluster

# A short real benchmark: tpcb-like with 4 clients for 5 s on the smallest dataset.
BENCH = ("-w", "tpcb-like", "-c", "4", "-T", "5", "-s", "1", "--json")
NO_CPU = f"does not sample sessions on CPU (it has no {WAIT_SAMPLING}.sample_cpu setting"

Cli = Callable[..., Result]


def bench(run_cli: Cli, workdir: Path, dsn: str) -> tuple[Result, dict[str, Any]]:
    """`pgdyno bench --dsn` one short run; what it printed and `runs show ID --json`."""
    result = run_cli(workdir, "bench", "--dsn", dsn, *BENCH)
    assert result.code == 0, result.stderr
    runs = json.loads(result.stdout)
    assert len(runs) == 1 and runs[0]["status"] == "ok", runs
    shown = run_cli(workdir, "runs", "show", str(runs[0]["id"]), "--json")
    assert shown.code == 0, shown.stderr
    return result, json.loads(shown.stdout)


def wait_series(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The run's per-second AAS series of the client backends' waits, by name
    (`runs show --json` keeps samples as {metric: {second: value}})."""
    samples = run["samples"]
    assert isinstance(samples, dict), type(samples)
    return {k: v for k, v in samples.items() if k.startswith("waits.") and k.endswith("_aas")}


def assert_a_profile(run: dict[str, Any], source: str, hz: float) -> dict[str, Any]:
    """The stored profile is from `source` at `hz`, its shares add up, it has events and
    per-second series, and pg_wait_sampling's own collector is not among the processes."""
    waits = run["waits"]
    assert waits is not None, "no wait profile stored"
    assert waits["source"] == source
    assert waits["sample_hz"] == hz
    assert waits["db_time_s"] > 0
    shares = waits["by_type"]
    assert shares and abs(sum(shares.values()) - 1.0) < 1e-9, shares
    events = [w["event"] for w in waits["top"]]
    assert events and all(":" in e or e == "CPU*" for e in events), events
    assert all(WAIT_SAMPLING not in w["process"] for w in waits["background"]), waits
    series = wait_series(run)
    assert series and all(series.values()), sorted(run["samples"])
    return dict(waits)


def samples_cpu(server: DebianCluster) -> bool:
    """Whether the loaded pg_wait_sampling has the sample_cpu setting and it is on."""
    found = server.psql(f"SELECT current_setting('{WAIT_SAMPLING}.sample_cpu', true)").strip()
    return found == "on"


def test_the_profile_comes_from_pg_wait_sampling_created_in_the_dsn_database(
    run_cli: Cli, workdir: Path, wait_sampling_server: DebianCluster
) -> None:
    server = wait_sampling_server
    assert server.psql("SHOW shared_preload_libraries").strip() == WAIT_SAMPLING
    if not samples_cpu(server):
        version = server.psql(f"SELECT default_version FROM pg_available_extensions "
                              f"WHERE name = '{WAIT_SAMPLING}'").strip()  # fmt: skip
        pytest.skip(
            f"this {WAIT_SAMPLING} (extension version {version}) does not sample sessions on "
            "CPU, so pgdyno does not read it (test_an_extension_that_leaves_cpu_out_is_not_used)"
        )
    server.psql(f"CREATE EXTENSION IF NOT EXISTS {WAIT_SAMPLING}")  # in postgres: --dsn's
    period_ms = int(server.psql(f"SHOW {WAIT_SAMPLING}.profile_period").strip())
    assert period_ms == 10  # the extension's default

    result, run = bench(run_cli, workdir, server.peer_dsn("root"))

    assert WAIT_SAMPLING not in result.stderr  # nothing to say: it is used
    waits = assert_a_profile(run, WAIT_SAMPLING, 1000 / period_ms)
    assert waits["sample_hz"] == 100
    assert "CPU*" in waits["by_type"], waits  # sessions on CPU are in the profile


def test_an_extension_that_leaves_cpu_out_is_not_used(
    run_cli: Cli, workdir: Path, wait_sampling_server: DebianCluster
) -> None:
    """A pg_wait_sampling without sample_cpu (before 2024: Debian bookworm's 1.1.4) samples
    only sessions that wait: its shares would be of wait time, not of database time."""
    server = wait_sampling_server
    if samples_cpu(server):
        pytest.skip(f"this {WAIT_SAMPLING} samples sessions on CPU")
    server.psql(f"CREATE EXTENSION IF NOT EXISTS {WAIT_SAMPLING}")

    result, run = bench(run_cli, workdir, server.peer_dsn("root"))

    assert NO_CPU in result.stderr and "sampling pg_stat_activity" in result.stderr
    assert_a_profile(run, "pg_stat_activity", 10)


def test_without_the_extension_in_the_dsn_database_pg_stat_activity_is_sampled(
    run_cli: Cli, workdir: Path, wait_sampling_server: DebianCluster
) -> None:
    """Loaded but not created where pgdyno connects: it says so, and samples the sessions
    itself; the extension's idle collector is not counted as a waiting background process."""
    server = wait_sampling_server
    server.psql(f"DROP EXTENSION IF EXISTS {WAIT_SAMPLING}")

    result, run = bench(run_cli, workdir, server.peer_dsn("root"))

    said = f"{WAIT_SAMPLING} is loaded but not created in database postgres, the one pgdyno"
    assert said in result.stderr
    assert_a_profile(run, "pg_stat_activity", 10)
