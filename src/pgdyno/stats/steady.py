"""Steady state and load-generator health of one run: pure functions of per-second values."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pgdyno.records.health import RunHealth

# A fitted TPS change across the measured window larger than this is flagged as a trend.
TREND_LIMIT_PCT = 10.0
# A per-second TPS coefficient of variation above this is flagged as unstable.
CV_LIMIT_PCT = 10.0
# pgbench using this share of the CPU its threads can use means the client is the bottleneck.
CLIENT_SATURATION = 0.9


def client_capacity_pct(jobs: int, cpus: int) -> float:
    """The CPU pgbench's threads can use, in % of one core: one core per thread, at most all.

    >>> client_capacity_pct(4, 2), client_capacity_pct(1, 8)
    (200.0, 100.0)
    """
    return 100.0 * min(jobs, cpus)


def default_trim(duration_s: int, warmup_s: int) -> int:
    """Seconds trimmed from the start of the per-second series before judging steady state.

    With a separate warm-up, nothing; otherwise 10% of the run, at most 30 s.

    >>> default_trim(60, 0), default_trim(600, 0), default_trim(60, 10), default_trim(5, 0)
    (6, 30, 0, 0)
    """
    if warmup_s > 0:
        return 0
    return min(30, duration_s // 10)


def cv_pct(values: Sequence[float]) -> float | None:
    """Coefficient of variation (population), in %.

    >>> cv_pct([10, 10, 10]), round(cv_pct([9, 11]) or 0, 3)
    (0.0, 10.0)
    """
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    if mean <= 0:
        return None
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return 100.0 * math.sqrt(var) / mean


def trend_pct(values: Sequence[float]) -> float | None:
    """Least-squares slope times the window length, as % of the mean.

    >>> round(trend_pct([100, 105, 110, 115, 120]) or 0, 1)
    18.2
    >>> trend_pct([5, 5, 5])
    0.0
    """
    n = len(values)
    if n < 3:
        return None
    mean = sum(values) / n
    if mean <= 0:
        return None
    x_mean = (n - 1) / 2
    sxx = sum((i - x_mean) ** 2 for i in range(n))
    sxy = sum((i - x_mean) * (v - mean) for i, v in enumerate(values))
    return 100.0 * (sxy / sxx) * (n - 1) / mean


def assess(
    tps_per_second: Sequence[float],
    trim_s: int,
    *,
    client_cpu_pct: float | None,
    client_capacity_pct: float,
    lag_avg_ms: float | None = None,
    skipped: int = 0,
    rate: float | None = None,
) -> RunHealth:
    """Judge one run: stable, trending, client-bound, falling behind its rate?

    `tps_per_second` holds whole seconds only; the first `trim_s` are warm-up.
    `client_capacity_pct` is the CPU pgbench's threads can use (`client_capacity_pct()`).
    """
    window = list(tps_per_second[trim_s:])
    mean = sum(window) / len(window) if window else None
    cv = cv_pct(window)
    trend = trend_pct(window)
    capacity = client_capacity_pct
    warnings = []
    if cv is not None and cv > CV_LIMIT_PCT:
        warnings.append(
            f"unstable throughput: per-second TPS varies by {cv:.0f}% (coefficient of variation)"
        )
    if trend is not None and abs(trend) > TREND_LIMIT_PCT:
        warnings.append(
            f"no steady state: TPS {'rose' if trend > 0 else 'fell'} {abs(trend):.0f}% across "
            "the measured window; run longer or warm up first"
        )
    if client_cpu_pct is not None and client_cpu_pct >= CLIENT_SATURATION * capacity:
        warnings.append(
            f"saturated client: pgbench used {client_cpu_pct:.0f}% CPU of the {capacity:.0f}% "
            "its threads can use, so it may be the bottleneck; add --jobs or run it elsewhere"
        )
    if rate is not None and skipped > 0:
        warnings.append(f"{skipped} transactions skipped: the server could not keep up with -R")
    if rate is not None and lag_avg_ms is not None and lag_avg_ms > 10:
        warnings.append(
            f"schedule lag averaged {lag_avg_ms:.1f} ms: the run fell behind its -R rate"
        )
    return RunHealth(
        measured_s=len(window), trimmed_s=trim_s, tps_mean=mean, tps_cv_pct=cv,
        tps_trend_pct=trend, client_cpu_pct=client_cpu_pct, client_capacity_pct=capacity,
        warnings=tuple(warnings),
    )  # fmt: skip
