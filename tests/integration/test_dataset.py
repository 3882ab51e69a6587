"""Datasets: generated once into a template, copied for each run, same state every time."""

from __future__ import annotations

import pytest

from conftest import plain_role
from pgdyno import process
from pgdyno.errors import DatasetError
from pgdyno.pgbench.dataset import (
    Generator,
    ensure_dataset,
    is_pristine,
    mark_in_use,
    prewarm,
    ready_templates,
    reset_bench_db,
    template_name,
)
from pgdyno.postgres.client import compose, connect, identifier, with_dbname
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import BENCH_DB


def test_generate_once_reuse_and_reset(box: Sandbox, binaries):
    pgbench = binaries.tool("pgbench")
    with connect(box.conninfo()) as client:
        first = ensure_dataset(client, 2, Generator(pgbench=pgbench))
        assert first.generated and first.template == template_name(2)
        assert first.size_bytes > 20 * 1024**2  # 200,000 accounts with indexes
        again = ensure_dataset(client, 2, Generator(pgbench=pgbench))
        assert not again.generated and again.size_bytes == first.size_bytes

        version = client.server_info().version_num
        reset_bench_db(client, first.template, version)
        assert is_pristine(client, first.template)
        mark_in_use(client)  # what the runner does before a writing run
        assert not is_pristine(client, first.template)
        bench_dsn = with_dbname(box.conninfo(), BENCH_DB)
        process.run([pgbench, "-n", "-T", "2", "-c", "2", bench_dsn], what="pgbench", timeout=60)
        with connect(bench_dsn) as bench:
            assert bench.rows("SELECT count(*) FROM pgbench_history")[0][0] > 0
        reset_bench_db(client, first.template, version)
        with connect(bench_dsn) as bench:
            assert bench.rows("SELECT count(*) FROM pgbench_history")[0][0] == 0
            assert bench.rows("SELECT sum(abalance) FROM pgbench_accounts")[0][0] == 0
            assert bench.rows("SELECT count(*) FROM pgbench_accounts")[0][0] == 200_000


def test_prewarm_fills_shared_buffers_after_a_restart(box: Sandbox, binaries):
    with connect(box.conninfo()) as client:
        dataset = ensure_dataset(client, 1, Generator(pgbench=binaries.tool("pgbench")))
        reset_bench_db(client, dataset.template, client.server_info().version_num)
    box.stop()
    box.start({}, owner_pid=None)  # shared buffers are empty again
    bench_dsn = with_dbname(box.conninfo(), BENCH_DB)

    def cached_blocks() -> int:
        with connect(bench_dsn) as bench:
            bench.execute(compose("CREATE EXTENSION IF NOT EXISTS pg_buffercache"))
            return int(bench.rows(
                "SELECT count(*) FROM pg_buffercache b JOIN pg_class c"
                " ON c.relfilenode = b.relfilenode WHERE c.relname = 'pgbench_accounts_pkey'"
            )[0][0])  # fmt: skip

    before = cached_blocks()
    blocks = prewarm(bench_dsn, None)
    with connect(bench_dsn) as bench:
        pages = bench.rows(
            "SELECT sum(pg_relation_size(oid)) / 8192 FROM pg_class"
            " WHERE relname LIKE 'pgbench_%%' AND relkind IN ('r', 'i')"
        )[0][0]
    assert blocks == pages  # every table and index read, once
    assert cached_blocks() > before + 200  # the 100,000-row primary key is now cached


def test_incomplete_template_is_rebuilt(box: Sandbox, binaries):
    with connect(box.conninfo()) as client:
        # What an interrupted `pgbench -i` leaves: the database without pgdyno's marker.
        client.execute(compose("CREATE DATABASE {}", identifier(template_name(1))))
        assert ready_templates(client) == {}
        dataset = ensure_dataset(client, 1, Generator(pgbench=binaries.tool("pgbench")))
        assert dataset.generated
        assert template_name(1) in ready_templates(client)


def test_a_role_that_may_not_create_databases_gets_one_sentence(box: Sandbox, binaries):
    """The server refuses CREATE DATABASE (insufficient privilege): a DatasetError, no driver
    error, and nothing is left behind."""
    with connect(plain_role(box, "plain")) as client:
        with pytest.raises(DatasetError) as caught:
            ensure_dataset(client, 1, Generator(pgbench=binaries.tool("pgbench")))
        assert ready_templates(client) == {}
    assert str(caught.value) == (
        "creating the database pgdyno_tpl_s1 for scale 1 failed (permission denied to create "
        "database); check free disk space and that the role may create databases."
    )


def test_a_missing_template_is_a_dataset_error(box: Sandbox):
    with connect(box.conninfo()) as client:
        version = client.server_info().version_num
        with pytest.raises(DatasetError) as caught:
            reset_bench_db(client, "pgdyno_tpl_s999", version)
        assert client.rows("SELECT 1") == [(1,)]
    assert str(caught.value) == (
        f"could not copy dataset pgdyno_tpl_s999 into {BENCH_DB} (template database "
        '"pgdyno_tpl_s999" does not exist); check free disk space and that nobody is connected '
        "to the template."
    )
