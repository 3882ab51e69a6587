"""The summary of one cell's repeats: median, mean, spread and the interval of the mean."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pgdyno.stats.levels import ALPHA
from pgdyno.stats.student_t import t_quantile

__all__ = ["CellStats", "describe", "require_finite", "require_positive"]


@dataclass(frozen=True, slots=True)
class CellStats:
    """Summary of the repeats of one cell (one figure, one configuration set)."""

    n: int
    median: float
    mean: float
    sd: float | None  # sample standard deviation; None when n < 2
    cv_pct: float | None  # sd / mean, in %; None when n < 2 or the mean is not positive
    ci_low: float | None  # 95% confidence interval of the mean (Student t); None when n < 2
    ci_high: float | None


def require_finite(values: Sequence[float], what: str) -> None:
    """Raise ValueError, naming ``what``, unless there are values and all are finite."""
    if len(values) == 0:
        raise ValueError(f"{what}: no values")
    for v in values:
        if not math.isfinite(v):
            raise ValueError(f"{what}: values must be finite numbers, got {v!r}")


def require_positive(values: Sequence[float], what: str) -> None:
    """Like `require_finite`, and every value above zero (comparisons take logarithms)."""
    require_finite(values, what)
    for v in values:
        if v <= 0:
            raise ValueError(
                f"{what}: values must be positive (the comparison works on their logarithms), "
                f"got {v!r}"
            )


def sample_sd(values: Sequence[float], mean: float) -> float:
    """The sample standard deviation of two or more ``values`` about ``mean``, their mean, in
    floating point (the squares summed by math.fsum). statistics.stdev sums in exact fractions:
    the same figure to the last digit or two, for about a seventh of the analysis's CPU in a
    profile of the simulations that look after every round.

    >>> sample_sd([10.0, 12.0, 14.0], 12.0)
    2.0
    """
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def describe(values: Sequence[float]) -> CellStats:
    """Median, mean, spread and the 95% interval of the mean of one cell's repeats.

    >>> s = describe([10.0, 12.0, 14.0])
    >>> s.median, s.mean, s.sd, round(s.ci_low or 0, 2), round(s.ci_high or 0, 2)
    (12.0, 12.0, 2.0, 7.03, 16.97)
    >>> describe([5.0]).sd is None
    True
    """
    require_finite(values, "describe")
    n = len(values)
    mean = statistics.fmean(values)
    median = float(statistics.median(values))
    if n < 2:
        return CellStats(n, median, mean, None, None, None, None)
    sd = sample_sd(values, mean)
    cv = 100.0 * sd / mean if mean > 0 else None
    half = t_quantile(1.0 - ALPHA / 2.0, n - 1) * sd / math.sqrt(n)
    return CellStats(n, median, mean, sd, cv, mean - half, mean + half)
