"""The TPC-C-like workload's own queries on its tables (its schema and load steps are the
workload's scripts, pgdyno.tpcc.sql): the new-order counter behind NOPM, the consistency
conditions 1-4 (TPC-C 3.3.2) and the tables' sizes after a load. Typed functions over `Client`,
their queries in queries/tpcc_*.sql.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgdyno.postgres.client import Client
from pgdyno.postgres.queries import load


@dataclass(frozen=True)
class _NewOrders:
    new_orders: int


def new_orders(client: Client) -> int:
    """sum(d_next_o_id) over all districts (queries/tpcc_new_orders.sql)."""
    return client.records(load("tpcc_new_orders"), _NewOrders)[0].new_orders


@dataclass(frozen=True)
class TableSizes:
    table_bytes: int  # the nine tables' heap, TOAST and maps, without indexes
    total_bytes: int  # the database's size


def table_sizes(client: Client) -> TableSizes:
    return client.records(load("tpcc_table_sizes"), TableSizes)[0]


@dataclass(frozen=True)
class Inconsistency:
    """The first row where a consistency condition fails: its columns as
    queries/tpcc_consistency_<condition>.sql lists them (warehouse first)."""

    condition: int
    values: tuple[Any, ...]


def inconsistency(client: Client, condition: int) -> Inconsistency | None:
    """The first row breaking consistency condition `condition` (1-4); None when it holds."""
    rows = client.rows(load(f"tpcc_consistency_{condition}"))
    return Inconsistency(condition, tuple(rows[0])) if rows else None
