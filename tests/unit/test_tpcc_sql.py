"""The TPC-C-like workload's SQL files as the loader reads them, and the size estimate."""

from __future__ import annotations

from pgdyno.postgres.queries import load as load_query
from pgdyno.tpcc.load import MIB, dataset_bytes
from pgdyno.tpcc.sql import load, statements

TABLES = ["warehouse", "district", "customer", "history", "new_order", "orders", "order_line",
          "item", "stock"]  # fmt: skip


def test_keys_are_one_statement_each_without_comments():
    keys = statements("keys")
    assert len(keys) == 10  # eight primary keys (history has none) and two indexes
    assert all(s.startswith(("ALTER TABLE ", "CREATE INDEX ")) for s in keys)
    assert not any("--" in s or s.endswith(";") for s in keys)
    assert sum("ADD PRIMARY KEY" in s for s in keys) == 8


def test_vacuum_covers_every_table_once():
    assert sorted(s.removeprefix("VACUUM (ANALYZE) ") for s in statements("vacuum")) == sorted(
        TABLES
    )


def test_the_schema_creates_the_nine_tables():
    schema = load("schema")
    assert sorted(t for t in TABLES if f"CREATE TABLE {t} (" in schema) == sorted(TABLES)


def test_parameterized_steps_hold_no_stray_percent_sign():
    # psycopg reads % in a statement sent with parameters as a placeholder.
    texts = {
        name: load(name)
        for name in (
            "load_item",
            "load_warehouses",
            "load_customers",
            "load_history",
            "load_stock",
            "load_orders",
        )
    }
    texts["cancel"] = load_query("cancel_backends")  # the loader's cancel, in postgres/queries
    for name, text in texts.items():
        assert text.count("%") == text.count("%("), name


def test_dataset_bytes_grows_by_about_100_mib_a_warehouse():
    assert 120 * MIB < dataset_bytes(1) < 130 * MIB
    steps = {dataset_bytes(w + 1) - dataset_bytes(w) for w in range(1, 50)}
    assert all(104 * MIB < step < 105 * MIB for step in steps)
