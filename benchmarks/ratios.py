"""Ratios of paired benchmark arms, summarised the same way in every benchmark script."""

from __future__ import annotations

import math
import statistics

from pgdyno.stats.student_t import t_quantile


def summarise(ratios: list[float]) -> str:
    """Geometric mean with a 95% t interval on the log ratios, and the median.

    >>> summarise([1.0, 1.02, 0.98, 1.01])
    '1.002 (95% CI 0.975-1.030, median 1.005)'
    """
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    low, high = math.exp(mean - half), math.exp(mean + half)
    median = statistics.median(ratios)
    return f"{math.exp(mean):.3f} (95% CI {low:.3f}-{high:.3f}, median {median:.3f})"
