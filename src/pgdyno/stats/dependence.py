"""Dependence between rounds: the lag-1 autocorrelation of the per-round differences (pure).

Both always-valid intervals of a comparison assume that, given the rounds before, a round's
difference has the same law: no memory between rounds. A host whose state lasts longer than a
round (a cache warmed by the last run, a neighbour's job over several rounds) makes consecutive
differences alike; with AR(1) differences the intervals then miss the true change far more
often than they promise (issue 33: 7.3% at rho 0.3, 18.5% at rho 0.5, for 2.5%).

pgdyno measures the lag-1 autocorrelation of the differences at every look (`lag1`) and, from
``MIN_PAIRS`` rounds on, widens both intervals by the AR(1) long-run factor
``sqrt((1 + r) / (1 - r))`` (`inflation`): the variance of a mean of n AR(1) values is about
``(1 + r) / (1 - r)`` times that of n independent ones. ``r`` is the estimate corrected for its
small-sample bias (`corrected`: it falls short by about ``(1 + 3 rho) / n``), so that rounds
that are alike are allowed for from the first looks, long before the autocorrelation is
measurably positive; never below 0 (no narrowing), at most ``RHO_CAP``. Where it is **clearly
positive** (`clearly_dependent`: above ``RHO_Z`` standard errors of zero, the null band of an
independent series, Bartlett's ``1/sqrt(n)``; Box, Jenkins and Reinsel, "Time Series
Analysis", ch. 2) ``r`` is at least the estimate plus one standard error, the robust half is
left out of the verdict (`pgdyno.stats.paired.sequential_interval`), and it is said. This is a
plug-in long-run variance, the one-lag AR(1) form of the estimates of Newey and West (1987, "A
simple, positive semi-definite, heteroskedasticity and autocorrelation consistent covariance
matrix", Econometrica 55) with the small-sample bias correction of Marriott and Pope (1954).

What it costs and what it cannot do: independent rounds are widened too, by a few percent on
average (their corrected estimate is above zero about half the time): a +3% change is found
within the rounds `rounds_to_detect` asks for in 77% of comparisons instead of 82%. Below
``MIN_PAIRS`` rounds nothing is widened (an estimate from 3-5 values is noise, and would stop
the large changes that resolve there). At rho 0.5 the A/A false verdicts fall from 14.7% to
8.5%, not to 2.5%: most of the rest come at 6-15 rounds, where an autocorrelation of 0.5 cannot
be told from noise. tests/unit/test_sequential_sim.py states the rates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Final

__all__ = ["MIN_PAIRS", "RHO_CAP", "RHO_Z", "clearly_dependent", "corrected", "inflation", "lag1"]

RHO_Z: Final = 2.0  # clearly positive: above this many standard errors (1/sqrt(n)) of zero
MIN_PAIRS: Final = 6  # below this many differences the estimate says nothing
RHO_CAP: Final = 0.8  # the largest autocorrelation the factor allows for (factor 3)


def lag1(diffs: Sequence[float]) -> float | None:
    """The lag-1 autocorrelation of ``diffs`` in round order; None below 3 values or without
    spread.

    >>> lag1([1.0, 2.0, 3.0, 4.0, 5.0]), lag1([1.0, -1.0, 1.0, -1.0])
    (0.4, -0.75)
    """
    n = len(diffs)
    if n < 3:
        return None
    mean = math.fsum(diffs) / n
    dev = [d - mean for d in diffs]
    square = math.fsum(x * x for x in dev)
    if square <= 0.0:
        return None
    return math.fsum(a * b for a, b in itertools.pairwise(dev)) / square


def clearly_dependent(rho: float | None, n: int) -> bool:
    """Whether an autocorrelation ``rho`` measured on ``n`` rounds is clearly positive.

    >>> clearly_dependent(0.2, 40), clearly_dependent(0.5, 40), clearly_dependent(0.9, 5)
    (False, True, False)
    """
    return rho is not None and n >= MIN_PAIRS and rho > RHO_Z / math.sqrt(n)


def inflation(rho: float | None, n: int) -> float:
    """The factor on the t-mixture's spread for an autocorrelation ``rho`` measured on ``n``
    rounds: the AR(1) long-run factor at the bias-corrected estimate (`corrected`), or, where
    the autocorrelation is clearly positive, at the estimate plus one standard error; 1 where
    neither is above zero.

    >>> inflation(-0.3, 40), round(inflation(0.2, 40), 3), round(inflation(0.5, 40), 3)
    (1.0, 1.277, 2.202)
    >>> round(inflation(0.0, 8), 3), inflation(None, 2)
    (1.134, 1.0)
    """
    if rho is None or n < MIN_PAIRS:
        return 1.0
    r = corrected(rho, n)
    if clearly_dependent(rho, n):
        r = max(r, rho + 1.0 / math.sqrt(n))
    r = min(RHO_CAP, r)
    return math.sqrt((1.0 + r) / (1.0 - r)) if r > 0.0 else 1.0


def corrected(rho: float, n: int) -> float:
    """The lag-1 autocorrelation ``rho`` of ``n`` values corrected for its small-sample bias:
    for an AR(1) series the estimate falls short by about ``(1 + 3 rho) / n`` (Marriott and
    Pope 1954, "Bias in the estimation of autocorrelations", Biometrika 41; Kendall 1954).

    >>> round(corrected(0.0, 10), 3), round(corrected(0.25, 10), 3)
    (0.1, 0.425)
    """
    return rho + (1.0 + 3.0 * rho) / n
