"""The TPC-C-like loader on a real sandbox: cardinalities, data rules and figures of the spec."""

from __future__ import annotations

import _thread
import math
import threading
from collections.abc import Iterator

import pytest

from conftest import wait_for
from pgdyno.errors import DatasetError, QueryRefused
from pgdyno.postgres.client import Client, compose, connect, identifier, with_dbname
from pgdyno.postgres.cluster import Sandbox
from pgdyno.tpcc import consistency, counters
from pgdyno.tpcc.load import Loaded, dataset_bytes, load
from pgdyno.tpcc.sessions import Step, run_tasks

WAREHOUSES = 2
DB = "tpcc_load_test"


def fresh_database(server: Sandbox, name: str) -> str:
    with connect(server.conninfo()) as admin:
        admin.execute(compose("DROP DATABASE IF EXISTS {} WITH (FORCE)", identifier(name)))
        admin.execute(compose("CREATE DATABASE {}", identifier(name)))
    return with_dbname(server.conninfo(), name)


@pytest.fixture(scope="module")
def loaded(server: Sandbox) -> Iterator[tuple[Loaded, str]]:
    dsn = fresh_database(server, DB)
    yield load(dsn, None, WAREHOUSES, sessions=2), dsn


@pytest.fixture(scope="module")
def db(loaded: tuple[Loaded, str]) -> Iterator[Client]:
    with connect(loaded[1]) as client:
        yield client


def one(client: Client, query: str) -> int:
    return int(client.rows(query)[0][0])


def no_other_session(client: Client) -> bool:
    """Whether every other session of the database has ended (a backend leaves a moment after
    its client closed the connection)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    )
    return wait_for(lambda: client.rows(query) == [(0,)], 30)


def within_binomial(count: int, n: int, p: float) -> bool:
    """Whether `count` successes of `n` draws at rate `p` are within 6 standard deviations: a
    correct loader misses this about once in 10^9 loads."""
    return abs(count - n * p) <= 6 * math.sqrt(n * p * (1 - p))


def test_every_table_has_the_specifications_cardinality(db: Client):
    # 4.3.3.1, per warehouse (W = 2) and item once.
    expected = {
        "item": 100_000,
        "warehouse": WAREHOUSES,
        "district": 10 * WAREHOUSES,
        "customer": 30_000 * WAREHOUSES,
        "history": 30_000 * WAREHOUSES,
        "orders": 30_000 * WAREHOUSES,
        "new_order": 9_000 * WAREHOUSES,
        "stock": 100_000 * WAREHOUSES,
    }
    for table, rows in expected.items():
        assert one(db, f"SELECT count(*) FROM {table}") == rows, table
    # Per district: 3,000 customers and orders, the last 900 orders (2101..3000) undelivered.
    assert db.rows(
        "SELECT DISTINCT count(*), min(o_id), max(o_id) FROM orders GROUP BY o_w_id, o_d_id"
    ) == [(3000, 1, 3000)]
    assert db.rows(
        "SELECT DISTINCT count(*), min(no_o_id), max(no_o_id) FROM new_order"
        " GROUP BY no_w_id, no_d_id"
    ) == [(900, 2101, 3000)]
    assert db.rows("SELECT DISTINCT d_next_o_id FROM district") == [(3001,)]
    # Order lines: 5..15 per order, exactly o_ol_cnt of them, numbered 1..o_ol_cnt.
    assert db.rows(
        "SELECT min(o_ol_cnt), max(o_ol_cnt), bool_and(lines = o_ol_cnt AND top = o_ol_cnt)"
        " FROM orders JOIN (SELECT ol_w_id, ol_d_id, ol_o_id, count(*) AS lines,"
        " max(ol_number) AS top FROM order_line GROUP BY 1, 2, 3) AS l"
        " ON (ol_w_id, ol_d_id, ol_o_id) = (o_w_id, o_d_id, o_id)"
    ) == [(5, 15, True)]
    assert one(db, "SELECT count(*) FROM order_line") == one(db, "SELECT sum(o_ol_cnt) FROM orders")


def test_orders_deal_each_customer_one_order_per_district(db: Client):
    # o_c_id is a permutation of 1..3000 in each district (4.3.3.1).
    assert db.rows(
        "SELECT DISTINCT count(DISTINCT o_c_id), min(o_c_id), max(o_c_id) FROM orders"
        " GROUP BY o_w_id, o_d_id"
    ) == [(3000, 1, 3000)]
    # Delivered orders (o_id < 2101) have a carrier and delivered lines of amount 0.
    assert db.rows(
        "SELECT o_id < 2101, bool_and((o_carrier_id IS NOT NULL) = (o_id < 2101)),"
        " bool_and((ol_delivery_d IS NOT NULL) = (o_id < 2101)),"
        " bool_and((ol_amount = 0) = (o_id < 2101))"
        " FROM orders JOIN order_line ON (ol_w_id, ol_d_id, ol_o_id) = (o_w_id, o_d_id, o_id)"
        " GROUP BY 1 ORDER BY 1"
    ) == [(False, True, True, True), (True, True, True, True)]


def test_last_names_follow_the_syllables(db: Client):
    syllables = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"]

    def name(n: int) -> str:
        return syllables[n // 100] + syllables[n // 10 % 10] + syllables[n % 10]

    # c_id 1..1000: the syllables of c_id - 1, exactly, in every district (4.3.2.3).
    rows = db.rows("SELECT c_id, c_last FROM customer WHERE c_id <= 1000")
    assert len(rows) == 1000 * 10 * WAREHOUSES
    assert all(last == name(c_id - 1) for c_id, last in rows)
    # The others: names from the same 1,000, not uniformly (NURand favours some).
    names = {name(n) for n in range(1000)}
    drawn = db.rows("SELECT c_last, count(*) FROM customer WHERE c_id > 1000 GROUP BY c_last")
    assert {last for last, _ in drawn} <= names
    counts = sorted(count for _, count in drawn)
    assert counts[-1] > 3 * counts[len(counts) // 2]


def test_a_tenth_of_item_and_stock_data_is_original(db: Client):
    items = one(db, "SELECT count(*) FROM item WHERE i_data LIKE '%%ORIGINAL%%'")
    assert within_binomial(items, 100_000, 0.1), items
    stock = one(db, "SELECT count(*) FROM stock WHERE s_data LIKE '%%ORIGINAL%%'")
    assert within_binomial(stock, 100_000 * WAREHOUSES, 0.1), stock
    # a-strings of 26..50 characters, ORIGINAL anywhere in them (4.3.3.1).
    assert db.rows("SELECT min(length(i_data)), max(length(i_data)) FROM item") == [(26, 50)]
    assert db.rows(
        "SELECT min(strpos(i_data, 'ORIGINAL')), bool_and(strpos(i_data, 'ORIGINAL')"
        " <= length(i_data) - 7), count(DISTINCT strpos(i_data, 'ORIGINAL')) > 30"
        " FROM item WHERE i_data LIKE '%%ORIGINAL%%'"
    ) == [(1, True, True)]
    credit = one(db, "SELECT count(*) FROM customer WHERE c_credit = 'BC'")
    assert within_binomial(credit, 30_000 * WAREHOUSES, 0.1), credit


def test_loaded_database_is_consistent_with_keys_and_functions(db: Client):
    assert consistency.check(db) is None
    assert counters.new_orders(db) == 3001 * 10 * WAREHOUSES
    keys = {
        name
        for (name,) in db.rows(
            "SELECT conname FROM pg_constraint WHERE contype = 'p'"
            " AND connamespace = 'public'::regnamespace"
        )
    }
    assert len(keys) == 8  # every table but history
    functions = {
        name for (name,) in db.rows("SELECT proname FROM pg_proc WHERE proname LIKE 'tpcc%%'")
    }
    assert {
        "tpcc_new_order", "tpcc_payment", "tpcc_order_status", "tpcc_delivery",
        "tpcc_stock_level", "tpcc_last_name",
    } <= functions  # fmt: skip
    assert not any(name.startswith("tpcc_load") for name in functions)  # helpers dropped
    assert one(db, "SELECT count(*) FROM pg_stat_user_tables WHERE last_analyze IS NULL") == 0


def test_loaded_figures(loaded: tuple[Loaded, str], db: Client):
    figures = loaded[0]
    assert figures.warehouses == WAREHOUSES and figures.seconds > 0
    assert 0 < figures.table_bytes < figures.total_bytes
    assert figures.total_bytes == one(db, "SELECT pg_database_size(current_database())")
    heap = one(db, "SELECT sum(pg_table_size(relid)) FROM pg_stat_user_tables")
    assert figures.table_bytes == heap
    # sizes.toml's estimate (measured on PostgreSQL 18 as the sandbox is) holds for this load.
    assert abs(figures.total_bytes / dataset_bytes(WAREHOUSES) - 1) < 0.05


def test_a_database_that_is_not_empty_is_refused(server: Sandbox, loaded: tuple[Loaded, str]):
    with pytest.raises(DatasetError, match=r"creating the schema.*already exists"):
        load(loaded[1], None, 1, sessions=1)


def test_a_failed_task_cancels_the_others_and_leaves_no_session(server: Sandbox):
    dsn = fresh_database(server, "tpcc_sessions_test")
    tasks = [
        (Step("SELECT pg_sleep(0.5)"), Step("SELECT 1 / 0")),
        # Cancelled while it sleeps, or never started: the table is never made.
        (Step("SELECT pg_sleep(60)"), Step("CREATE TABLE finished ()")),
        (Step("CREATE TABLE never_started ()"),),
    ]
    with pytest.raises(QueryRefused, match="division by zero"):
        run_tasks(dsn, None, tasks, 2)
    assert not [t for t in threading.enumerate() if t.name.startswith("pgdyno-tpcc-load")]
    with connect(dsn) as client:
        assert client.rows("SELECT count(*) FROM pg_class WHERE relname = 'finished'") == [(0,)]
        assert no_other_session(client)


BREAKS = {
    1: ("UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 2", "warehouse 2 has w_ytd"),
    2: (
        "UPDATE district SET d_next_o_id = 3005 WHERE d_w_id = 1 AND d_id = 4",
        "district 4 of warehouse 1 has d_next_o_id - 1 = 3004 but max(o_id) 3000",
    ),
    3: (
        "DELETE FROM new_order WHERE no_w_id = 2 AND no_d_id = 6 AND no_o_id = 2500",
        "district 6 of warehouse 2 has new_order ids spanning 900 but 899 rows",
    ),
    4: (
        "DELETE FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 9 AND ol_o_id = 17"
        " AND ol_number = 1",
        "district 9 of warehouse 1 has sum(o_ol_cnt)",
    ),
}


@pytest.mark.parametrize("condition", sorted(BREAKS))
def test_consistency_names_the_broken_condition(db: Client, condition: int):
    change, example = BREAKS[condition]
    db.rows("BEGIN")
    try:
        db.rows(change)
        found = consistency.check(db)
    finally:
        db.rows("ROLLBACK")
    assert found is not None
    assert found.startswith(f"consistency condition {condition} (TPC-C 3.3.2.{condition}, ")
    assert example in found and found.endswith(".") and "\n" not in found
    assert consistency.check(db) is None


@pytest.mark.usefixtures("python_sigint")
def test_an_interrupt_cancels_the_sessions_and_leaves_none(server: Sandbox):
    dsn = fresh_database(server, "tpcc_interrupt_test")
    tasks = [(Step("SELECT pg_sleep(60)"), Step("CREATE TABLE finished ()"))] * 2
    timer = threading.Timer(1.0, _thread.interrupt_main)  # what Ctrl-C does to pgdyno
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tasks(dsn, None, tasks, 2)
    finally:
        timer.cancel()
    assert not [t for t in threading.enumerate() if t.name.startswith("pgdyno-tpcc-load")]
    with connect(dsn) as client:
        assert client.rows("SELECT count(*) FROM pg_class WHERE relname = 'finished'") == [(0,)]
        assert no_other_session(client)
