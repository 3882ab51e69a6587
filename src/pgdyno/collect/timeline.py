"""pgbench's per-second figures on the wall clock shared by every other series (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from pgdyno.pgbench.progress import Progress
from pgdyno.pgbench.txlog import LatencySummary
from pgdyno.records import Percentiles, Sample, SecondRow


def progress_second(started_at: float, elapsed_s: float) -> int:
    """The epoch second that pgbench's progress interval ending at `elapsed_s` overlaps most.

    >>> progress_second(1000.3, 1.0), progress_second(1000.7, 1.0), progress_second(1000.0, 3.0)
    (1000, 1001, 1002)
    """
    return round(started_at + elapsed_s - 1.0)


PROGRESS_METRIC = "pgbench.progress_tps"


def progress_samples(progress: Sequence[Progress], started_at: float) -> list[Sample]:
    """pgbench's own -P 1 throughput, kept beside the timeline as a cross-check.

    Its intervals run from pgbench's start, not from the top of a second, so each is filed
    under the epoch second it overlaps most (`started_at` is when pgbench was started).
    """
    return [(progress_second(started_at, p.elapsed_s), PROGRESS_METRIC, p.tps) for p in progress]


def second_rows(
    latencies: Sequence[LatencySummary], total: LatencySummary, transactions: int
) -> list[SecondRow]:
    """One row per whole wall-clock second, counted from pgbench's transaction log.

    The log stamps each transaction with its completion time, so its seconds are the same
    epoch seconds the samplers use. The first and last seconds are cut by the start and end of
    the run and are left out. From a sampled log, counts are scaled so that they add up to
    `transactions`, pgbench's exact count for the whole run.

    >>> def sec(t, n): return LatencySummary(t, n, n, 1, 2, 3, 4, 5, 0, 0, None, None, 1.5, 0.5)
    >>> seconds = [sec(9, 40), sec(10, 100), sec(11, 110), sec(12, 7)]
    >>> rows = second_rows(seconds, sec(None, 257), 514)
    >>> [(r.t, r.tps, r.latency_p99_ms, r.logged) for r in rows]
    [(10, 200.0, 3, 100), (11, 220.0, 3, 110)]
    """
    factor = transactions / total.transactions if total.transactions else 1.0
    return [
        SecondRow(
            t=s.t,
            tps=s.transactions * factor,
            latency_avg_ms=s.avg_ms,
            latency_min_ms=s.min_ms,
            latency_max_ms=s.max_ms,
            failures=round(s.failed * factor),
            lag_avg_ms=s.lag_avg_ms,
            skipped=round(s.skipped * factor),
            latency_p50_ms=s.p50_ms,
            latency_p90_ms=s.p90_ms,
            latency_p99_ms=s.p99_ms,
            latency_p999_ms=s.p999_ms,
            logged=s.logged,
        )
        for s in latencies[1:-1]
        if s.t is not None
    ]


def run_percentiles(total: LatencySummary) -> Percentiles:
    return Percentiles(
        total.p50_ms, total.p90_ms, total.p99_ms, total.p999_ms, total.max_ms, total.p95_ms
    )


def latency_source(sampling_rate: float) -> str:
    """
    >>> latency_source(1.0), latency_source(0.05)
    ('every transaction', 'sampled: 5% of transactions')
    """
    if sampling_rate >= 1.0:
        return "every transaction"
    return f"sampled: {sampling_rate * 100:g}% of transactions"


# Aim for about this many logged transactions per second under automatic sampling: enough
# for a per-second p99, cheap for pgbench to write. Measured by benchmarks/harness_cost.py
# (pgbench 18, 2 vCPUs): -l costs pgbench ~50 ns per transaction whatever the rate (a clock
# read and a random draw each) and ~220 ns per line written, so 2,000 lines a second take
# ~0.4 ms of CPU a second (0.02% of two CPUs). A lower target would save nothing measurable
# and would cost the per-second p99 its accuracy.
TARGET_LOGGED_PER_S = 2000
_RATES = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)


def sampling_rate(expected_tps: float | None) -> float:
    """The largest round rate that keeps the log near TARGET_LOGGED_PER_S lines a second.

    >>> sampling_rate(None), sampling_rate(1500), sampling_rate(50000), sampling_rate(1e9)
    (1.0, 1.0, 0.05, 0.001)
    """
    if expected_tps is None or expected_tps <= 0:
        return 1.0
    for rate in _RATES:
        if expected_tps * rate <= TARGET_LOGGED_PER_S * 1.5:
            return rate
    return _RATES[-1]
