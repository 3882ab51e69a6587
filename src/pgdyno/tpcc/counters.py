"""Counters read from the benchmark database around a TPC-C-like run."""

from __future__ import annotations

from pgdyno.postgres.client import Client
from pgdyno.postgres.tpcc_queries import new_orders as read_new_orders


def new_orders(client: Client) -> int:
    """sum(d_next_o_id) over all districts: its increase over a window is the number of
    new-orders committed in it (NOPM's counter; rolled-back orders leave it unchanged)."""
    return read_new_orders(client)
