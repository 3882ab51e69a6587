"""A TPC-C-like order-entry workload for pgbench, written from the TPC-C specification v5.11.

TPC-C-like, not TPC-C: it is not audited and omits what the specification requires of a full
system (terminals, response-time constraints, durability tests), so its throughput figure is
NOPM (new orders per minute), never "tpmC". The nine tables are generated server-side
(load.py), each transaction is one PL/pgSQL function called by one pgbench script (scripts.py),
and consistency.py checks the specification's consistency conditions 1-4 after a run.
"""
