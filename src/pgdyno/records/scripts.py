"""Per-script figures of a run with several pgbench scripts (``-f a.sql@45 -f b.sql@43 ...``),
read from pgbench's per-transaction log (pgbench/txlog.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScriptLatency:
    """The whole run's transactions of one script number.

    Counts are estimates under ``--sampling-rate`` (the logged counts divided by the rate and
    rounded). ``failed`` is every failure; the three kinds below it are the ones
    ``--failures-detailed`` names (without it pgbench writes ``failed`` and they stay 0).
    ``retried`` and ``retries`` are None when the log has no retries column (``--max-tries``
    1); they count failed transactions' retries too, as pgbench's summary does. Percentiles are
    over successful transactions, within 1% of the exact ones.
    """

    script: int  # 0-based, in the order of pgbench's -f/-b options
    transactions: int  # successful
    failed: int
    serialization_failures: int
    deadlock_failures: int
    other_failures: int
    skipped: int
    retried: int | None  # transactions retried at least once
    retries: int | None  # the sum of their retries
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None
    avg_ms: float | None  # exact mean of the logged successful latencies
    min_ms: float | None
