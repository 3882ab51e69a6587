"""Counters read from the benchmark database around a TPC-C-like run."""

from __future__ import annotations

from pgdyno.postgres.client import Client
from pgdyno.tpcc.sql import load


def new_orders(client: Client) -> int:
    """sum(d_next_o_id) over all districts: its increase over a window is the number of
    new-orders committed in it (NOPM's counter; rolled-back orders leave it unchanged)."""
    return int(client.rows(load("new_orders"))[0][0])
