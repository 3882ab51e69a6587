"""Switched rounds adjusted for the interference measured in their periods (pure).

When the sets take turns inside one run (periods of a few seconds), a burst of other processes'
CPU (or of the hypervisor's steal) that lasts longer than a period lands on both periods of a
round alike and cancels in their difference; one that lands on one period only moves that
round's difference by about the throughput it took. Each period's interference is measured
(foreign CPU and steal, in % of the machine), so the round's difference ``d_i`` (log figure of
the candidate's period minus the baseline's) has a covariate ``x_i``: the candidate period's
interference minus the baseline period's, as a fraction of the machine (a period whose
interference stayed under the limit is stored as clean and counts as 0).

The adjustment is ``d_i - b_i x_i`` with ``b_i`` estimated from the rounds *before* round ``i``
only (the least-squares slope of ``d`` on ``x``, with an intercept): predictable, so it is fixed
before round ``i`` is seen. The switching design draws each round's order by a fair coin
(`pgdyno.experiment.switching.PairOrders`) independent of everything before it and of the load
on the host, and swapping the order swaps the sign of both ``d_i`` and ``x_i`` around the
change; so, for any predictable ``b_i``, the adjusted difference is the change plus a term
symmetric about zero given the past: a martingale difference sequence about the change, which
the always-valid intervals of `pgdyno.stats.paired.sequential_interval` take as they take the
unadjusted differences. This is the predictable plug-in route to anytime-valid regression
adjustment (Lindon, Ham, Tingley and Bojinov 2022, "Anytime-valid linear models and regression
adjustment for experimental data", arXiv:2210.08589, give the exact Gaussian-linear-model
version). A slope that is wrong costs width, never validity; a slope is used only once the
earlier rounds show it clearly (``|t| >= SLOPE_T`` on at least ``MIN_EARLIER`` rounds), so where
interference does not move the figure the differences are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

__all__ = ["COVARIATES", "MIN_EARLIER", "SLOPE_T", "Adjusted", "adjust", "predictable_slopes"]

# What a period's covariate is made of, as the result names it. The host probe
# (pgdyno.host.probe) is not among them: docs/statistics.md, "A neutral probe of the host".
COVARIATES: Final = ("foreign_cpu", "steal")
MIN_EARLIER: Final = 4  # earlier rounds a slope is estimated from before it is used
SLOPE_T: Final = 2.0  # ...and how clearly (its t statistic) they must show it


@dataclass(frozen=True, slots=True)
class Adjusted:
    """Round differences after the adjustment, in round order, and what it did."""

    diffs: tuple[float, ...]  # d_i - b_i x_i
    slope: float  # the slope the next round would use (all rounds so far), else the last used
    rounds: int  # rounds whose difference the adjustment moved (b_i != 0 and x_i != 0)


def predictable_slopes(diffs: Sequence[float], covariate: Sequence[float]) -> np.ndarray:
    """``b_i`` for every round ``i`` and one more (``n + 1`` values): the least-squares slope of
    the differences on the covariate over the rounds before ``i``, 0 while fewer than
    ``MIN_EARLIER`` rounds, no spread of the covariate or a slope not clearly away from 0.

    >>> d = [0.0, -0.2, 0.01, 0.2, -0.01, -0.1]
    >>> x = [0.0, 0.25, 0.0, -0.25, 0.0, 0.125]
    >>> [round(float(b), 2) for b in predictable_slopes(d, x)]
    [0.0, 0.0, 0.0, 0.0, -0.8, -0.8, -0.8]
    """
    d = np.concatenate(([0.0], np.asarray(diffs, dtype=float)))
    x = np.concatenate(([0.0], np.asarray(covariate, dtype=float)))
    k = np.arange(d.size, dtype=float)  # rounds before round k + 1
    sx, sy = np.cumsum(x), np.cumsum(d)
    sxx, sxy, syy = np.cumsum(x * x), np.cumsum(x * d), np.cumsum(d * d)
    with np.errstate(divide="ignore", invalid="ignore"):
        cxx = sxx - sx * sx / k
        cxy = sxy - sx * sy / k
        cyy = syy - sy * sy / k
        slope = cxy / cxx
        residual = np.maximum(cyy - slope * cxy, 0.0) / (k - 2.0)
        t = np.abs(slope) / np.sqrt(residual / cxx)
    spread = cxx > 1e-12 * np.maximum(sxx, 1e-300)
    clear = (k >= MIN_EARLIER) & spread & (t >= SLOPE_T)
    return np.where(clear, slope, 0.0)


def adjust(diffs: Sequence[float], covariate: Sequence[float]) -> Adjusted | None:
    """The differences adjusted for the covariate (`predictable_slopes`); None when the
    covariate never moved (no period was disturbed: nothing to adjust for).

    >>> adjust([0.01, 0.02], [0.0, 0.0]) is None
    True
    >>> a = adjust([0.0, -0.2, 0.01, 0.2, -0.01, -0.1], [0.0, 0.25, 0.0, -0.25, 0.0, 0.125])
    >>> [round(v, 3) for v in a.diffs], round(a.slope, 2), a.rounds
    ([0.0, -0.2, 0.01, 0.2, -0.01, 0.0], -0.8, 1)
    """
    x = np.asarray(covariate, dtype=float)
    if not np.any(x):
        return None
    slopes = predictable_slopes(diffs, covariate)
    used = slopes[:-1]
    adjusted = np.asarray(diffs, dtype=float) - used * x
    moved = int(np.count_nonzero((used != 0.0) & (x != 0.0)))
    nonzero = slopes[slopes != 0.0]
    slope = float(nonzero[-1]) if nonzero.size else 0.0
    return Adjusted(tuple(float(v) for v in adjusted), slope, moved)
