"""Put pgbench's per-second output on the wall clock shared by every other series (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from pgdyno.pgbench.progress import Progress
from pgdyno.pgbench.txlog import LatencySummary
from pgdyno.records import Percentiles, SecondRow


def progress_second(started_at: float, elapsed_s: float) -> int:
    """The epoch second that pgbench's progress interval ending at `elapsed_s` overlaps most.

    >>> progress_second(1000.3, 1.0), progress_second(1000.7, 1.0), progress_second(1000.0, 3.0)
    (1000, 1001, 1002)
    """
    return round(started_at + elapsed_s - 1.0)


def second_rows(
    progress: Sequence[Progress], latencies: Sequence[LatencySummary], started_at: float
) -> list[SecondRow]:
    """Throughput from pgbench's own -P 1 report, percentiles and max from its transaction log.

    `started_at` is the epoch time pgbench was started.
    """
    by_second = {s.t: s for s in latencies if s.t is not None}
    rows = []
    for p in progress:
        t = progress_second(started_at, p.elapsed_s)
        lat = by_second.get(t)
        rows.append(
            SecondRow(
                t=t,
                tps=p.tps,
                latency_avg_ms=p.latency_avg_ms,
                latency_stddev_ms=p.latency_stddev_ms,
                latency_max_ms=lat.max_ms if lat else None,
                failures=p.failed or 0,
                lag_avg_ms=p.lag_ms,
                skipped=p.skipped or 0,
                latency_p50_ms=lat.p50_ms if lat else None,
                latency_p90_ms=lat.p90_ms if lat else None,
                latency_p99_ms=lat.p99_ms if lat else None,
                latency_p999_ms=lat.p999_ms if lat else None,
                logged=lat.logged if lat else None,
            )
        )
    return rows


def run_percentiles(total: LatencySummary) -> Percentiles:
    return Percentiles(total.p50_ms, total.p90_ms, total.p99_ms, total.p999_ms, total.max_ms)


def latency_source(sampling_rate: float) -> str:
    """
    >>> latency_source(1.0), latency_source(0.05)
    ('every transaction', 'sampled: 5% of transactions')
    """
    if sampling_rate >= 1.0:
        return "every transaction"
    return f"sampled: {sampling_rate * 100:g}% of transactions"


# Aim for about this many logged transactions per second under automatic sampling: enough
# for a per-second p99, cheap for pgbench to write.
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
