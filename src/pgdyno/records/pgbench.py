"""What pgbench reports at the end of a run, as frozen records (parsed by pgbench/output.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StatementLatency:
    """One line of the per-statement report (``-r``)."""

    script: int  # 0-based script index (single-script runs: 0)
    line: int  # 1-based order of the statement within its script
    latency_ms: float
    failures: int | None  # PG15+ print a failures column with -r; None when absent
    retries: int | None  # PG15+ with --max-tries other than 1; None when absent
    command: str


@dataclass(frozen=True, slots=True)
class ScriptSummary:
    """One ``SQL script N: name`` section, printed only when more than one script ran.

    The failure and retry counts are None when pgbench did not print them: failures from 15
    on, their kinds with ``--failures-detailed``, retries with ``--max-tries`` other than 1.
    """

    index: int  # 0-based (pgbench numbers them from 1)
    name: str
    weight: int | None
    transactions: int | None  # successful
    tps: float | None
    latency_avg_ms: float | None
    failed_transactions: int | None = None
    serialization_failures: int | None = None
    deadlock_failures: int | None = None
    retried_transactions: int | None = None  # transactions retried at least once
    retries: int | None = None  # their retries, failed transactions' included


@dataclass(frozen=True, slots=True)
class Summary:
    """The end-of-run report of one pgbench run.

    ``scripts`` is empty when pgbench printed no per-script sections (a single script);
    ``failed_transactions`` is 0 when the version does not report failures (14).
    """

    transaction_type: str | None
    scaling_factor: int | None
    query_mode: str | None
    clients: int | None
    threads: int | None
    duration_s: float | None
    transactions: int
    failed_transactions: int
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    initial_connection_time_ms: float | None
    tps: float
    rate_lag_avg_ms: float | None  # under -R
    rate_lag_max_ms: float | None
    skipped_transactions: int | None  # -R with -L
    late_transactions: int | None  # -L: transactions above the latency limit
    maximum_tries: int | None  # PG15+
    scripts: tuple[ScriptSummary, ...]
    statements: tuple[StatementLatency, ...]
    # as in ScriptSummary, for the whole run; None when not printed
    serialization_failures: int | None = None
    deadlock_failures: int | None = None
    retried_transactions: int | None = None
    retries: int | None = None
