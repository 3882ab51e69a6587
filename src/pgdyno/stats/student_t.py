"""Student's t distribution (quantile and CDF) for the intervals, from SciPy.

Welch's interval needs the t distribution at real, not only integer, degrees of freedom, and
the planning loop compares quantiles closely. ``scipy.stats.t`` is exact to double precision
there and is maintained and tested far beyond the incomplete-beta code this module used to
hold; the wrappers only keep the project's argument checks and return plain floats.

SciPy is imported on first use: it takes about half a second to import, and most pgdyno
commands never compute an interval.
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["t_cdf", "t_quantile"]


def _check_df(df: float) -> None:
    if not df > 0 or math.isinf(df):
        raise ValueError(f"degrees of freedom must be positive and finite, got {df}")


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (> 0, real) degrees of freedom.

    >>> t_cdf(0.0, 7)
    0.5
    >>> round(t_cdf(2.228, 10), 4)
    0.975
    """
    _check_df(df)
    from scipy.stats import t as student  # on first use: see the module docstring

    return float(student.cdf(t, df))


@lru_cache(maxsize=4096)  # every look after a round asks for the same few quantiles again
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (> 0, real) degrees of freedom.

    >>> round(t_quantile(0.975, 1), 3), round(t_quantile(0.975, 2), 3)
    (12.706, 4.303)
    >>> round(t_quantile(0.975, 10), 3), round(t_quantile(0.05, 5), 3)
    (2.228, -2.015)
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p}")
    _check_df(df)
    from scipy.stats import t as student  # on first use: see the module docstring

    return float(student.ppf(p, df))
