"""What pgdyno leaves on a server is visible and removable: `bench` says what it created,
`pgdyno datasets list|drop` shows and removes it (issue 14 item 7).

An existing server is a sandbox the module starts, reached only through `--dsn` (with a password
that must never be printed), as the other --dsn tests do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    Cli,
    cli_in,
    make_env,
    new_workdir,
    one_clear_sentence,
    plain_role,
    remove_workdir,
)
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.client import connect, with_dbname
from pgdyno.postgres.cluster import Sandbox

SECRET = "not-a-secret-datasets"
# Scale 1, one second, every transaction logged (no rate probe): the smallest real bench.
BENCH = ["bench", "--pg-version", "18", "-w", "select-only", "-s", "1", "-T", "1",
         "--latency-log", "full"]  # fmt: skip


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} in JSON output")


def strict(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)


@pytest.fixture(scope="module")
def server(cache_dir: Path, binaries) -> Iterator[tuple[Path, Sandbox]]:
    """A work directory with a running sandbox that stands in for an existing server."""
    workdir = new_workdir()
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    box.start({}, owner_pid=None)
    try:
        yield workdir, box
    finally:
        box.stop()
        remove_workdir(workdir)


@pytest.fixture(scope="module")
def cli(server: tuple[Path, Sandbox], cache_dir: Path) -> Cli:
    return cli_in(server[0], cache_dir, secret=SECRET)


@pytest.fixture(scope="module")
def dsn(server: tuple[Path, Sandbox]) -> str:
    return server[1].conninfo() + f" password={SECRET}"


def databases(box: Sandbox) -> set[str]:
    with connect(box.conninfo()) as client:
        return {name for (name,) in client.rows("SELECT datname FROM pg_database")}


def listed(cli: Cli, dsn: str) -> dict[str, Any]:
    result = cli("datasets", "list", "--dsn", dsn, "--json")
    assert result.code == 0, result.stderr
    return strict(result.stdout)


@pytest.fixture
def fresh(cli: Cli, dsn: str) -> None:
    """No pgdyno database on the server before the test."""
    assert cli("datasets", "drop", "--all", "--dsn", dsn, "--yes").code == 0


def test_bench_says_what_it_created_then_reused(cli: Cli, dsn: str, fresh: None):
    first = cli(*BENCH, "--dsn", dsn, "--json")
    assert first.code == 0, first.stderr
    (run,) = strict(first.stdout)
    created = {item["name"]: item for item in run["created"]}
    assert set(created) == {"pgdyno_tpl_s1", "pgdyno_bench"} and run["reused"] == []
    assert all(item["kind"] == "database" and item["bytes"] > 1024**2 for item in created.values())

    second = cli(*BENCH, "--dsn", dsn)
    assert second.code == 0, second.stderr
    (line,) = [x for x in second.stdout.splitlines() if x.startswith("left on server ")]
    assert "pgdyno_tpl_s1" in line and "(reused)" in line and "(created)" not in line


def test_list_shows_sizes_and_which_is_a_template(cli: Cli, dsn: str, fresh: None):
    assert cli(*BENCH, "--dsn", dsn).code == 0
    found = listed(cli, dsn)
    assert found["target"].startswith("server ")
    by_name = {db["name"]: db for db in found["databases"]}
    assert set(by_name) == {"pgdyno_tpl_s1", "pgdyno_bench"}
    template, copy = by_name["pgdyno_tpl_s1"], by_name["pgdyno_bench"]
    assert template["template"] and template["complete"] and template["scale"] == 1
    assert not copy["template"] and copy["bytes"] > 1024**2 and template["bytes"] > 1024**2
    text = cli("datasets", "list", "--dsn", dsn)
    assert text.code == 0 and "template scale 1" in text.stdout and "MiB" in text.stdout


def test_drop_on_a_server_needs_yes(cli: Cli, dsn: str, server, fresh: None):
    box = server[1]
    assert cli(*BENCH, "--dsn", dsn).code == 0
    refused = cli("datasets", "drop", "--all", "--dsn", dsn)
    assert refused.code == 2
    assert "would drop pgdyno_bench" in one_clear_sentence(refused.stderr)
    assert {"pgdyno_tpl_s1", "pgdyno_bench"} <= databases(box)

    dropped = cli("datasets", "drop", "pgdyno_tpl_s1", "pgdyno_bench", "--dsn", dsn, "--yes",
                  "--json")  # fmt: skip
    assert dropped.code == 0, dropped.stderr
    assert {d["name"] for d in strict(dropped.stdout)["dropped"]} == {"pgdyno_tpl_s1",
                                                                      "pgdyno_bench"}  # fmt: skip
    assert not {"pgdyno_tpl_s1", "pgdyno_bench"} & databases(box)
    assert listed(cli, dsn)["databases"] == []


@pytest.mark.parametrize("name", ["postgres", "pgdyno_tpl_s1x", "template1"])
def test_a_database_that_is_not_pgdynos_is_refused(cli: Cli, dsn: str, server, name: str):
    result = cli("datasets", "drop", name, "--dsn", dsn, "--yes")
    assert result.code == 2
    assert f"{name} is not a database pgdyno creates" in one_clear_sentence(result.stderr)
    assert {"postgres", "template1"} <= databases(server[1])


def test_a_database_in_use_is_not_dropped(cli: Cli, dsn: str, server, fresh: None):
    box = server[1]
    assert cli(*BENCH, "--dsn", dsn).code == 0
    with connect(with_dbname(box.conninfo(), "pgdyno_tpl_s1")):
        result = cli("datasets", "drop", "--all", "--dsn", dsn, "--yes")
    assert result.code == 1
    message = one_clear_sentence(result.stderr)
    assert "cannot drop pgdyno_tpl_s1" in message and "another session" in message
    assert "pgdyno_tpl_s1" in databases(box)  # the bench copy went first, the template stays


def test_prewarm_extension_is_listed_and_goes_with_the_bench_copy(cli: Cli, dsn: str, fresh):
    assert cli(*BENCH, "--dsn", dsn, "--prewarm").code == 0
    (ext,) = listed(cli, dsn)["extensions"]
    assert ext["name"] == "pg_prewarm" and ext["database"] == "pgdyno_bench"
    assert cli("datasets", "drop", "pgdyno_bench", "--dsn", dsn, "--yes").code == 0
    assert listed(cli, dsn)["extensions"] == []


def test_an_extension_pgdyno_did_not_create_is_not_listed(cli: Cli, dsn: str, server, fresh):
    """pg_prewarm already in the bench copy (from template1 here): not pgdyno's to report."""
    box = server[1]
    with connect(with_dbname(box.conninfo(), "template1")) as client:
        client.rows("CREATE EXTENSION pg_prewarm")
    try:
        assert cli(*BENCH, "--dsn", dsn, "--prewarm").code == 0
        assert listed(cli, dsn)["extensions"] == []
    finally:
        with connect(with_dbname(box.conninfo(), "template1")) as client:
            client.rows("DROP EXTENSION pg_prewarm")


def test_auto_conf_is_listed_or_said_unreadable(cli: Cli, dsn: str, server):
    box = server[1]
    with connect(box.conninfo()) as admin:
        admin.rows("ALTER SYSTEM SET work_mem = '8MB'")
    try:
        settings = listed(cli, dsn)["auto_conf"]
        assert {"name": "work_mem", "setting": "8MB", "applied": True, "error": None,
                "set_by_pgdyno": False} in settings  # fmt: skip
        plain = plain_role(box, "dataset_reader") + f" password={SECRET}"
        result = cli("datasets", "list", "--dsn", plain)
        assert result.code == 0, result.stderr
        assert "postgresql.auto.conf not read" in result.stdout
        assert strict(cli("datasets", "list", "--dsn", plain, "--json").stdout)["auto_conf"] is None
    finally:
        with connect(box.conninfo()) as admin:
            admin.rows("ALTER SYSTEM RESET work_mem")


def test_no_sandbox_is_created_to_list_nothing(run_cli, workdir: Path):
    result = run_cli(workdir, "datasets", "list", "--sandbox", "--pg-version", "18", "--json")
    assert result.code == 0, result.stderr
    assert strict(result.stdout)["databases"] == []
    assert not (workdir / "clusters" / "pg18").exists()


def test_unreachable_server_is_one_sentence(run_cli, workdir: Path):
    result = run_cli(workdir, "datasets", "list", "--dsn",
                     f"host=/nonexistent-dir port=1 dbname=x password={SECRET}")  # fmt: skip
    assert result.code == 3
    assert "cannot connect" in one_clear_sentence(result.stderr)
    assert SECRET not in result.stderr
