"""A candidate against a baseline round by round: the paired verdict (pure).

`compare` runs its sets in rounds: round r is one run of every set, back to back, in an order
rotated from round to round. Two runs of the same round saw the same state of a drifting
machine, so the difference of their logarithms cancels the drift that separates rounds: the
verdict rests on the per-round differences ``log(candidate_r) - log(baseline_r)``, their mean
(the log of the geometric-mean ratio) and its interval:

* one look (a fixed number of repeats): Student's t-interval on the differences, ``n - 1``
  degrees of freedom, at ``COMPARE_CONFIDENCE``;
* looks after every round (adaptive repeats): the always-valid confidence sequence of
  `pgdyno.stats.sequential`, at the same level, valid at whatever round the run stops.

A round where either side has no usable run (failed, or discarded for interference) forms no
pair; its other run is left out and counted. With fewer than two complete rounds the comparison
falls back to the unpaired Welch interval of `pgdyno.stats.verdict.compare` and says so
(``method="unpaired"``); in adaptive mode such a comparison has no interval and stays
unresolved, since Welch's interval is not valid under repeated looks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import replace

from pgdyno.stats.levels import COMPARE_ALPHA, MIN_EFFECT_PCT, NOISY_CV_PCT
from pgdyno.stats.planning import repeats_needed
from pgdyno.stats.robust import robust_interval
from pgdyno.stats.sequential import MIXTURE_G, half_width, rounds_to_detect
from pgdyno.stats.student_t import t_quantile
from pgdyno.stats.summary import require_positive
from pgdyno.stats.verdict import SAME, ChangeVerdict, Verdict, compare, decide

__all__ = ["compare_rounds", "noisy_pairs", "sequential_interval"]

Rounds = Mapping[int, float]  # round number -> the figure of that round's run


def compare_rounds(
    baseline: Rounds,
    candidate: Rounds,
    *,
    higher_is_better: bool = True,
    sequential: bool = False,
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = COMPARE_ALPHA,
    g: float = MIXTURE_G,
) -> ChangeVerdict:
    """The candidate's runs against the baseline's, paired by round (positive values); the
    interval at level ``1 - alpha`` (the plan-wide error split over its comparisons:
    `pgdyno.stats.family`); ``g`` is the t-mixture's variance when ``sequential``
    (`pgdyno.stats.sequential.mixture_for_rounds`).

    >>> c = compare_rounds({1: 100.0, 2: 90.0, 3: 80.0}, {1: 110.0, 2: 99.5, 3: 87.5})
    >>> round(c.change_pct, 1), c.verdict, c.method, c.pairs
    (10.0, 'better', 'paired', 3)

    The unpaired interval of the same runs is swamped by the 20% drift between rounds:

    >>> compare([100.0, 90.0, 80.0], [110.0, 99.5, 87.5]).verdict
    'no detectable difference'
    """
    require_positive(list(baseline.values()), "baseline")
    require_positive(list(candidate.values()), "candidate")
    rounds = sorted(baseline.keys() & candidate.keys())
    left_out = len(baseline) + len(candidate) - 2 * len(rounds)
    if len(rounds) < 2:
        unpaired = compare(
            list(baseline.values()), list(candidate.values()),
            higher_is_better=higher_is_better, min_effect_pct=min_effect_pct, alpha=alpha,
        )  # fmt: skip
        if sequential:  # Welch's interval is not valid under a look after every round
            unpaired = replace(unpaired, verdict=SAME, ci_low_pct=None, ci_high_pct=None)
        return replace(unpaired, pairs=len(rounds), left_out=left_out)
    diffs = [math.log(candidate[r]) - math.log(baseline[r]) for r in rounds]
    n = len(diffs)
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs, mean)
    if sequential:
        centre, low_log, high_log = sequential_interval(diffs, alpha, g=g)
    else:
        half = t_quantile(1.0 - alpha / 2.0, n - 1) * sd / math.sqrt(n)
        centre, low_log, high_log = mean, mean - half, mean + half
    change_pct = 100.0 * math.expm1(centre)
    low = 100.0 * math.expm1(low_log) if math.isfinite(low_log) else None
    high = 100.0 * math.expm1(high_log) if math.isfinite(high_log) else None
    verdict: Verdict = SAME
    if low is not None and high is not None:
        verdict = decide(change_pct, low, high, higher_is_better, min_effect_pct)
    return ChangeVerdict(
        change_pct, low, high, verdict, noisy_pairs(sd),
        _needed(sd, change_pct, sequential=sequential, min_effect_pct=min_effect_pct,
                alpha=alpha),
        method="sequential" if sequential else "paired", pairs=n, left_out=left_out, sd_log=sd,
        alpha=alpha,
    )  # fmt: skip


def noisy_pairs(sd_diff: float) -> bool:
    """Whether the paired spread is "noisy": the sd of the per-round log differences, divided
    by sqrt(2) to be the spread of one run (the differences add two runs' noise), above
    ``NOISY_CV_PCT``. Drift between rounds, which pairing removes, does not count.

    >>> noisy_pairs(0.05), noisy_pairs(0.08)
    (False, True)
    """
    return 100.0 * sd_diff / math.sqrt(2.0) > NOISY_CV_PCT


def sequential_interval(
    diffs: list[float], alpha: float, *, g: float = MIXTURE_G
) -> tuple[float, float, float]:
    """(centre, low, high) of the always-valid interval for the per-round log differences: the
    intersection of the t-mixture (`pgdyno.stats.sequential`) and the robust betting sequence
    (`pgdyno.stats.robust`), each at ``alpha / 2``. By the union bound, both cover the true
    change at every round at once with probability at least ``1 - alpha``; the t-mixture gives
    the early rounds and normal noise, the robust one heavy tails. The centre is the mean,
    moved into the interval when slow runs have pulled it out. Ends are infinite while
    unbounded.

    >>> centre, low, high = sequential_interval([0.05, 0.06, 0.04, 0.05, 0.055, 0.045], 0.025)
    >>> round(centre, 3), round(low, 3), round(high, 3)
    (0.05, 0.028, 0.072)
    """
    n = len(diffs)
    mean = statistics.fmean(diffs)
    half = half_width(n, statistics.stdev(diffs, mean), alpha=alpha / 2.0, g=g)
    _, low_r, high_r = robust_interval(diffs, alpha=alpha / 2.0)
    low, high = max(mean - half, low_r), min(mean + half, high_r)
    if low > high:  # the two disagree (an assumption broken): keep what either allows
        low, high = min(mean - half, low_r), max(mean + half, high_r)
    return min(max(mean, low), high), low, high


def _needed(
    sd: float, change_pct: float, *, sequential: bool, min_effect_pct: float, alpha: float
) -> int | None:
    """Rounds that would resolve a change of this size with this spread of differences."""
    if sd <= 0 or abs(change_pct) <= min_effect_pct:
        return None
    if sequential:
        # The t-mixture at the comparison's alpha: what the intersection with the robust
        # sequence gives under normal noise from about 20 rounds (pgdyno.stats.robust).
        return rounds_to_detect(sd, change_pct, alpha=alpha, min_effect_pct=min_effect_pct)
    # The paired difference of n rounds has standard error sd/sqrt(n) = (sd/sqrt 2)*sqrt(2/n):
    # the two-sample planning formula with sd/sqrt(2) (its t has 2n-2 degrees of freedom
    # where the paired one has n-1, which only matters below about 5 rounds).
    try:
        return repeats_needed(
            sd / math.sqrt(2.0), change_pct, min_effect_pct=min_effect_pct, alpha=alpha
        )
    except ValueError:  # the change rounds to the floor on the log scale
        return None
