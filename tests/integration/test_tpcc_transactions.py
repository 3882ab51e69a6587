"""The five TPC-C-like transactions on a real sandbox: each function on chosen inputs does what
the specification says, then the rendered scripts under real pgbench keep the data consistent
and give the mix, rollbacks and remote shares of the specification."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pgdyno import process
from pgdyno.postgres.client import Client, compose, connect, identifier, with_dbname
from pgdyno.postgres.cluster import Sandbox
from pgdyno.tpcc import consistency, counters
from pgdyno.tpcc.load import load
from pgdyno.tpcc.scripts import TRANSACTIONS, TpccOptions, write_scripts

DB = "tpcc_tx_test"
WAREHOUSES = 2


@pytest.fixture(scope="module")
def dsn(server: Sandbox) -> str:
    with connect(server.conninfo()) as admin:
        admin.execute(compose("DROP DATABASE IF EXISTS {} WITH (FORCE)", identifier(DB)))
        admin.execute(compose("CREATE DATABASE {}", identifier(DB)))
    target = with_dbname(server.conninfo(), DB)
    load(target, None, WAREHOUSES, sessions=2)
    return target


@pytest.fixture
def db(dsn: str) -> Iterator[Client]:
    """A session whose every change is rolled back at the end of the test."""
    with connect(dsn) as client:
        client.rows("BEGIN")
        try:
            yield client
        finally:
            client.rows("ROLLBACK")


def row(client: Client, query: str, **params: Any) -> tuple[Any, ...]:
    rows = client.rows(query, params)
    assert len(rows) == 1, rows
    return rows[0]


def value(client: Client, query: str, **params: Any) -> Any:
    return row(client, query, **params)[0]


def test_new_order_enters_an_order_and_its_lines(db: Client):
    next_o_id = value(db, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 3")
    # Item 11 has little stock left: the order takes it below 10, so it is refilled by 91.
    db.rows("UPDATE stock SET s_quantity = 12 WHERE s_w_id = 1 AND s_i_id = 11")
    db.rows("UPDATE stock SET s_quantity = 50 WHERE s_w_id = 2 AND s_i_id = 22")
    items, supply, quantities = [33, 11, 22, 44, 55], [1, 1, 2, 1, 1], [1, 5, 3, 2, 4]
    stock_before = {
        (w, i): (q, ytd, orders, remote, dist)
        for w, i, q, ytd, orders, remote, dist in db.rows(
            "SELECT s_w_id, s_i_id, s_quantity, s_ytd, s_order_cnt, s_remote_cnt, s_dist_03"
            " FROM stock WHERE (s_w_id, s_i_id) IN ((1, 33), (1, 11), (2, 22), (1, 44), (1, 55))"
        )
    }
    o_id = value(
        db,
        "SELECT tpcc_new_order(1, 3, 77, %(items)s, %(supply)s, %(quantities)s)",
        items=items, supply=supply, quantities=quantities,
    )  # fmt: skip
    assert o_id == next_o_id
    assert value(db, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 3") == (
        next_o_id + 1
    )
    # The order (not all local: line 3 comes from warehouse 2) and its new_order row.
    assert row(
        db,
        "SELECT o_c_id, o_carrier_id, o_ol_cnt, o_all_local FROM orders"
        " WHERE o_w_id = 1 AND o_d_id = 3 AND o_id = %(o)s",
        o=o_id,
    ) == (77, None, 5, 0)
    assert value(
        db, "SELECT count(*) FROM new_order WHERE (no_w_id, no_d_id, no_o_id) = (1, 3, %(o)s)",
        o=o_id,
    ) == 1  # fmt: skip
    lines = db.rows(
        "SELECT ol_number, ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_dist_info,"
        " ol_delivery_d, i_price FROM order_line JOIN item ON i_id = ol_i_id"
        " WHERE ol_w_id = 1 AND ol_d_id = 3 AND ol_o_id = %(o)s ORDER BY ol_number",
        {"o": o_id},
    )
    assert [(n, i, w, q) for n, i, w, q, *_ in lines] == list(
        zip(range(1, 6), items, supply, quantities, strict=True)
    )
    for _n, i, w, q, amount, dist, delivered, price in lines:
        assert amount == q * price and delivered is None
        assert dist == stock_before[(w, i)][4]  # s_dist_03 of district 3
    # Stock: quantity down (or refilled by 91 below 10), year-to-date and counts up.
    for (w, i), (q0, ytd0, orders0, remote0, _) in stock_before.items():
        q = quantities[items.index(i)]
        expected = q0 - q if q0 >= q + 10 else q0 - q + 91
        assert row(
            db,
            "SELECT s_quantity, s_ytd, s_order_cnt, s_remote_cnt FROM stock"
            " WHERE s_w_id = %(w)s AND s_i_id = %(i)s",
            w=w, i=i,
        ) == (expected, ytd0 + q, orders0 + 1, remote0 + (w != 1))  # fmt: skip
    assert stock_before[(1, 11)][0] == 12
    assert value(db, "SELECT s_quantity FROM stock WHERE s_w_id = 1 AND s_i_id = 11") == 98


def state(client: Client) -> tuple[Any, ...]:
    return row(
        client,
        "SELECT (SELECT sum(d_next_o_id) FROM district), (SELECT count(*) FROM orders),"
        " (SELECT count(*) FROM new_order), (SELECT count(*) FROM order_line),"
        " (SELECT sum(s_ytd) + sum(s_quantity) + sum(s_order_cnt) FROM stock WHERE s_w_id = 1)",
    )


def test_new_order_with_an_unused_item_changes_nothing(db: Client):
    before = state(db)
    o_id = value(
        db,
        "SELECT tpcc_new_order(1, 4, 5, ARRAY[1, 2, 3, 4, 5, 100001], ARRAY[1, 1, 1, 1, 1, 1],"
        " ARRAY[5, 5, 5, 5, 5, 5])",
    )
    assert o_id is None
    assert state(db) == before
    # The session goes on: the next order is entered with the id the rolled-back one had.
    next_o_id = value(db, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 4")
    assert value(
        db, "SELECT tpcc_new_order(1, 4, 5, ARRAY[1, 2, 3, 4, 5], ARRAY[1, 1, 1, 1, 1],"
        " ARRAY[5, 5, 5, 5, 5])",
    ) == next_o_id  # fmt: skip


def payment_figures(client: Client, c_w_id: int, c_d_id: int, c_id: int) -> tuple[Any, ...]:
    return row(
        client,
        "SELECT w_ytd, d_ytd, c_balance, c_ytd_payment, c_payment_cnt,"
        " (SELECT count(*) FROM history)"
        " FROM warehouse, district, customer WHERE w_id = 1 AND d_w_id = 1 AND d_id = 2"
        " AND (c_w_id, c_d_id, c_id) = (%(w)s, %(d)s, %(c)s)",
        w=c_w_id, d=c_d_id, c=c_id,
    )  # fmt: skip


def test_payment_moves_ytd_and_balance(db: Client):
    # A remote customer (warehouse 2, district 7) pays 123.45 at district 2 of warehouse 1.
    db.rows("UPDATE customer SET c_credit = 'GC' WHERE (c_w_id, c_d_id, c_id) = (2, 7, 300)")
    w_ytd, d_ytd, balance, ytd, count, history = payment_figures(db, 2, 7, 300)
    paid = value(db, "SELECT tpcc_payment(1, 2, 2, 7, 300, '', 123.45)")
    assert paid == 300
    amount = Decimal("123.45")
    assert payment_figures(db, 2, 7, 300) == (
        w_ytd + amount, d_ytd + amount, balance - amount, ytd + amount, count + 1, history + 1
    )  # fmt: skip
    names = row(db, "SELECT w_name, d_name FROM warehouse, district WHERE w_id = 1"
                " AND d_w_id = 1 AND d_id = 2")  # fmt: skip
    assert db.rows(
        "SELECT h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_amount, h_data FROM history"
        " WHERE h_amount = 123.45"
    ) == [(300, 7, 2, 2, 1, amount, f"{names[0]}    {names[1]}")]
    assert consistency.check(db) is None


def test_payment_by_last_name_takes_the_middle_customer(db: Client):
    # A name three or more customers of district 5 of warehouse 1 share.
    last, n = row(
        db,
        "SELECT c_last, count(*) FROM customer WHERE c_w_id = 1 AND c_d_id = 5"
        " GROUP BY c_last HAVING count(*) >= 3 ORDER BY count(*) DESC, c_last LIMIT 1",
    )
    namesakes = db.rows(
        "SELECT c_id, c_first FROM customer WHERE c_w_id = 1 AND c_d_id = 5 AND c_last = %(last)s",
        {"last": last},
    )
    by_first = sorted(namesakes, key=lambda r: r[1].encode())  # c_first sorts bytewise
    middle = by_first[math.ceil(n / 2) - 1][0]
    assert value(db, "SELECT tpcc_payment(1, 5, 1, 5, 0, %(last)s, 10)", last=last) == middle
    status = row(db, "SELECT * FROM tpcc_order_status(1, 5, 0, %(last)s)", last=last)
    assert status[0] == middle


def test_payment_of_a_bad_credit_customer_prepends_to_c_data(db: Client):
    db.rows("UPDATE customer SET c_credit = 'BC' WHERE (c_w_id, c_d_id, c_id) = (1, 1, 42)")
    before = value(db, "SELECT c_data FROM customer WHERE (c_w_id, c_d_id, c_id) = (1, 1, 42)")
    value(db, "SELECT tpcc_payment(2, 9, 1, 1, 42, '', 99.5)")
    after = value(db, "SELECT c_data FROM customer WHERE (c_w_id, c_d_id, c_id) = (1, 1, 42)")
    assert after == ("42 1 1 9 2 99.5 " + before)[:500]
    assert len(after) == 500 or len(before) < 484


def test_delivery_delivers_the_oldest_order_of_each_district(db: Client):
    oldest = dict(
        db.rows("SELECT no_d_id, min(no_o_id) FROM new_order WHERE no_w_id = 1 GROUP BY 1")
    )
    assert len(oldest) == 10
    # District 10 has nothing left to deliver: it is skipped.
    db.rows("DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id = 10")
    del oldest[10]
    due = {
        d: row(
            db,
            "SELECT o_c_id, (SELECT sum(ol_amount) FROM order_line WHERE"
            " (ol_w_id, ol_d_id, ol_o_id) = (1, %(d)s, %(o)s)),"
            " (SELECT c_balance FROM customer WHERE (c_w_id, c_d_id, c_id) = (1, %(d)s, o_c_id)),"
            " (SELECT c_delivery_cnt FROM customer"
            "  WHERE (c_w_id, c_d_id, c_id) = (1, %(d)s, o_c_id))"
            " FROM orders WHERE (o_w_id, o_d_id, o_id) = (1, %(d)s, %(o)s)",
            d=d, o=o,
        )
        for d, o in oldest.items()
    }  # fmt: skip
    assert value(db, "SELECT tpcc_delivery(1, 7)") == 9
    for d, o in oldest.items():
        c_id, amount, balance, deliveries = due[d]
        assert value(
            db, "SELECT min(no_o_id) FROM new_order WHERE no_w_id = 1 AND no_d_id = %(d)s", d=d
        ) == o + 1  # fmt: skip
        assert row(
            db,
            "SELECT o_carrier_id, bool_and(ol_delivery_d IS NOT NULL) FROM orders JOIN order_line"
            " ON (ol_w_id, ol_d_id, ol_o_id) = (o_w_id, o_d_id, o_id)"
            " WHERE (o_w_id, o_d_id, o_id) = (1, %(d)s, %(o)s) GROUP BY o_carrier_id",
            d=d, o=o,
        ) == (7, True)  # fmt: skip
        assert row(
            db,
            "SELECT c_balance, c_delivery_cnt FROM customer"
            " WHERE (c_w_id, c_d_id, c_id) = (1, %(d)s, %(c)s)",
            d=d, c=c_id,
        ) == (balance + amount, deliveries + 1)  # fmt: skip
    # Warehouse 2 untouched.
    assert value(db, "SELECT count(*) FROM new_order WHERE no_w_id = 2") == 9000


def test_stock_level_counts_distinct_low_items_of_the_last_20_orders(db: Client):
    # Orders 2981..3000 of district 6: make some of their items low, one of them twice over.
    items = [
        i for (i,) in db.rows(
            "SELECT DISTINCT ol_i_id FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 6"
            " AND ol_o_id BETWEEN 2981 AND 3000"
        )
    ]  # fmt: skip
    db.rows("UPDATE stock SET s_quantity = 50 WHERE s_w_id = 1 AND s_i_id = ANY(%(i)s)",
            {"i": items})  # fmt: skip
    low = items[:7]
    db.rows("UPDATE stock SET s_quantity = 11 WHERE s_w_id = 1 AND s_i_id = ANY(%(i)s)",
            {"i": low})  # fmt: skip
    # The same items low in warehouse 2 and an older order's item low in warehouse 1 count not.
    db.rows("UPDATE stock SET s_quantity = 1 WHERE s_w_id = 2 AND s_i_id = ANY(%(i)s)",
            {"i": items})  # fmt: skip
    older = value(
        db,
        "SELECT min(ol_i_id) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 6"
        " AND ol_o_id = 2980 AND ol_i_id <> ALL(%(i)s)",
        i=items,
    )
    assert older is not None
    db.rows("UPDATE stock SET s_quantity = 1 WHERE s_w_id = 1 AND s_i_id = %(i)s", {"i": older})
    assert value(db, "SELECT tpcc_stock_level(1, 6, 12)") == len(low)
    assert value(db, "SELECT tpcc_stock_level(1, 6, 11)") == 0
    assert value(db, "SELECT tpcc_stock_level(1, 6, 51)") == len(items)


def test_order_status_reports_the_customers_latest_order(db: Client):
    value(db, "SELECT tpcc_new_order(2, 8, 123, ARRAY[7, 8, 9, 10, 11, 12], ARRAY[2, 2, 2, 2, 2,"
          " 2], ARRAY[1, 1, 1, 1, 1, 10])")  # fmt: skip
    balance, latest, amount = row(
        db,
        "SELECT c_balance, max(o_id), (SELECT sum(ol_amount) FROM order_line WHERE"
        " (ol_w_id, ol_d_id, ol_o_id) = (2, 8, max(o_id))) FROM customer JOIN orders"
        " ON (o_w_id, o_d_id, o_c_id) = (c_w_id, c_d_id, c_id)"
        " WHERE (c_w_id, c_d_id, c_id) = (2, 8, 123) GROUP BY c_balance",
    )
    assert latest == value(db, "SELECT d_next_o_id - 1 FROM district WHERE (d_w_id, d_id) = (2, 8)")
    assert row(db, "SELECT * FROM tpcc_order_status(2, 8, 123, '')") == (
        123, balance, latest, None, 6, amount
    )  # fmt: skip


def script_counts(log_prefix: Path) -> Counter[int]:
    """Transactions per script number, from pgbench's -l logs (one file per thread): the
    fourth field of each line, `client_id transaction_no time script_no time_epoch time_us`."""
    counts: Counter[int] = Counter()
    for path in log_prefix.parent.glob(f"{log_prefix.name}.*"):
        for line in path.read_text().splitlines():
            counts[int(line.split()[3])] += 1
    return counts


def within_binomial(count: int, n: int, p: float) -> bool:
    """Within 6 standard deviations of n * p: a correct driver misses it once in 10^9 runs."""
    return abs(count - n * p) <= 6 * math.sqrt(n * p * (1 - p))


def test_pgbench_runs_the_mix_and_the_data_stays_consistent(dsn: str, binaries, tmp_path: Path):
    per_client = 2000
    scripts = write_scripts(tmp_path / "scripts", TpccOptions())
    with connect(dsn) as client:
        orders_before = counters.new_orders(client)
        history_before = value(client, "SELECT count(*) FROM history")
        lines_before = value(client, "SELECT count(*) FROM order_line")
    tmp_path.chmod(0o755)
    prefix = tmp_path / "tx"
    argv = [binaries.tool("pgbench"), "-n", "-c", "2", "-j", "2", "-t", str(per_client),
            "-s", str(WAREHOUSES), "--max-tries", "10", "-l", f"--log-prefix={prefix}"]  # fmt: skip
    for _name, weight, path in scripts:
        argv += ["-f", f"{path}@{weight}"]
    result = process.run([*argv, dsn], what="pgbench", timeout=600)
    # Every transaction ran to its end: none failed after its retries, no client aborted.
    assert f"actually processed: {2 * per_client}/{2 * per_client}" in result.stdout
    assert "number of failed transactions: 0 " in result.stdout

    counts = script_counts(prefix)
    n = sum(counts.values())
    assert n == 2 * per_client
    for number, (name, weight) in enumerate(TRANSACTIONS):
        assert within_binomial(counts[number], n, weight / 100), (name, counts)

    with connect(dsn) as client:
        assert consistency.check(client) is None
        # 1% of new-orders roll back (2.4.1.4): they do not raise d_next_o_id.
        rolled_back = counts[0] - (counters.new_orders(client) - orders_before)
        assert rolled_back >= 1 and within_binomial(rolled_back, counts[0], 0.01), rolled_back
        # 15% of payments are for a remote warehouse's customer (2.5.1.2).
        payments = value(client, "SELECT count(*) FROM history") - history_before
        assert payments == counts[1]
        remote = value(client, "SELECT count(*) FROM history WHERE h_c_w_id <> h_w_id")
        assert within_binomial(remote, payments, 0.15), (remote, payments)
        # 1% of order lines come from a remote warehouse (2.4.1.5).
        lines = value(client, "SELECT count(*) FROM order_line") - lines_before
        remote_lines = value(
            client, "SELECT count(*) FROM order_line WHERE ol_supply_w_id <> ol_w_id"
        )
        assert within_binomial(remote_lines, lines, 0.01), (remote_lines, lines)


@pytest.mark.parametrize("keying_thinking", [False, True])
@pytest.mark.parametrize("all_warehouses", [False, True])
def test_pgbench_parses_every_variant(binaries, tmp_path: Path, all_warehouses, keying_thinking):
    # pgbench parses its scripts before it connects: a server that is not there leaves only
    # the connection error when the scripts are valid.
    options = TpccOptions(all_warehouses=all_warehouses, keying_thinking=keying_thinking)
    argv: list[str | Path] = [binaries.tool("pgbench"), "-n", "-t", "1"]
    for _name, weight, path in write_scripts(tmp_path, options):
        argv += ["-f", f"{path}@{weight}"]
    result = process.run([*argv, f"host={tmp_path} port=1"], what="pgbench", check=False)
    assert result.returncode != 0
    assert "could not create connection" in result.stderr, result.stderr
    assert "syntax error" not in result.stderr and ".sql:" not in result.stderr


def test_pgbench_runs_with_all_warehouses(dsn: str, binaries, tmp_path: Path):
    argv: list[str | Path] = [binaries.tool("pgbench"), "-n", "-c", "2", "-t", "200", "-s",
                              str(WAREHOUSES), "--max-tries", "10"]  # fmt: skip
    for _name, weight, path in write_scripts(tmp_path, TpccOptions(all_warehouses=True)):
        argv += ["-f", f"{path}@{weight}"]
    result = process.run([*argv, dsn], what="pgbench", timeout=600)
    assert "actually processed: 400/400" in result.stdout
    with connect(dsn) as client:
        assert consistency.check(client) is None
