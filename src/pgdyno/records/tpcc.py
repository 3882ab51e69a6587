"""What a run of the TPC-C-like workload measured beyond pgbench's own figures.

Not TPC-C results: the workload follows the specification's schema, data and transaction
profiles without its pricing, auditing or keying-time rules, so its throughput is NOPM (new
orders per minute, HammerDB's name for the comparable figure), never "tpmC".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TpccOptions:
    """How the TPC-C-like workload's clients pick their warehouse, and whether they wait."""

    # Each transaction picks its warehouse at random among all (HammerDB's "use all
    # warehouses": more I/O); default: a fixed home warehouse per client (specification 2.4.1.1).
    all_warehouses: bool = False
    # The specification's keying and think times (5.2.5) as \sleep in the scripts: a warehouse
    # then makes at most about 12.86 new orders a minute.
    keying_thinking: bool = False


@dataclass(frozen=True, slots=True)
class TpccTransaction:
    """One transaction type of a run (one pgbench script): its count, latencies and retries."""

    name: str  # new_order, payment, order_status, delivery, stock_level
    count: int  # successful transactions (a new-order rolled back by design counts)
    share: float  # of all successful transactions of the run
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    retries: int  # serialization or deadlock failures pgbench retried (--max-tries)
    failed: int  # transactions that failed for good (retries exhausted)


@dataclass(frozen=True, slots=True)
class TpccResult:
    """The TPC-C-like figures of one run, over its measured window."""

    warehouses: int
    nopm: float  # new orders per minute: the increase of sum(district.d_next_o_id)
    # Commits plus rollbacks per minute of the benchmark database alone (pg_stat_database);
    # None when the statistics could not be read.
    tpm: float | None
    transactions: tuple[TpccTransaction, ...]  # in the specification's order
    mix_ok: bool  # every type's share at or above the specification's minimum (5.2.3)
    # "passed", or the consistency condition (specification 3.3.2) that failed; "not checked"
    # when the run ended before it could be.
    consistency: str
    rollbacks: int  # new orders rolled back for an unused item (about 1% by design)
    all_warehouses: bool = False  # each transaction picked its warehouse among all
    keying_thinking: bool = False  # the specification's keying and think times were on

    @property
    def nopm_per_warehouse(self) -> float:
        return self.nopm / self.warehouses if self.warehouses else 0.0

    @property
    def consistent(self) -> bool:
        return self.consistency in ("passed", "not checked")
