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

import bisect
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pgdyno.stats.covariates import COVARIATES, adjust
from pgdyno.stats.dependence import clearly_dependent, inflation, lag1
from pgdyno.stats.levels import COMPARE_ALPHA, MIN_EFFECT_PCT, NOISY_CV_PCT
from pgdyno.stats.planning import repeats_needed
from pgdyno.stats.robust import prefix_intervals
from pgdyno.stats.sequential import MIXTURE_G, half_width, rounds_to_detect
from pgdyno.stats.stop_bias import adjusted_mean
from pgdyno.stats.student_t import t_quantile
from pgdyno.stats.summary import require_positive, sample_sd
from pgdyno.stats.verdict import SAME, ChangeVerdict, Verdict, compare, decide

__all__ = ["Looks", "compare_adjusted", "compare_rounds", "noisy_pairs", "sequential_interval"]

Rounds = Mapping[int, float]  # round number -> the figure of that round's run


def compare_rounds(
    baseline: Rounds,
    candidate: Rounds,
    *,
    higher_is_better: bool = True,
    sequential: bool = False,
    alpha: float = COMPARE_ALPHA,
    g: float = MIXTURE_G,
    horizon: int | None = None,
) -> ChangeVerdict:
    """The candidate's runs against the baseline's, paired by round (positive values); the
    interval at level ``1 - alpha`` (the plan-wide error split over its comparisons:
    `pgdyno.stats.family`), the floor ``MIN_EFFECT_PCT``; ``g`` is the t-mixture's variance
    when ``sequential`` (`pgdyno.stats.sequential.mixture_for_rounds`), ``horizon`` the rounds
    the budget holds (None: the rounds so far), which the estimate at an adaptive stop is
    adjusted for (`pgdyno.stats.stop_bias`).

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
            higher_is_better=higher_is_better, min_effect_pct=MIN_EFFECT_PCT, alpha=alpha,
        )  # fmt: skip
        if sequential:  # Welch's interval is not valid under a look after every round
            unpaired = replace(unpaired, verdict=SAME, ci_low_pct=None, ci_high_pct=None)
        return replace(unpaired, pairs=len(rounds), left_out=left_out)
    diffs = [math.log(candidate[r]) - math.log(baseline[r]) for r in rounds]
    n = len(diffs)
    mean = statistics.fmean(diffs)
    sd = sample_sd(diffs, mean)
    change_pct = 100.0 * math.expm1(mean)
    fixed = ChangeVerdict(
        change_pct, None, None, SAME, noisy_pairs(sd),
        _needed(sd, change_pct, sequential=sequential, min_effect_pct=MIN_EFFECT_PCT,
                alpha=alpha),
        method="sequential" if sequential else "paired", pairs=n, left_out=left_out, sd_log=sd,
        alpha=alpha,
    )  # fmt: skip
    if sequential:
        looks = sequential_interval(diffs, alpha, g=g)
        design = (alpha / 2.0, g, max(n, horizon or n))
        return _judged(fixed, looks, higher_is_better, MIN_EFFECT_PCT, design)
    half = t_quantile(1.0 - alpha / 2.0, n - 1) * sd / math.sqrt(n)
    low, high = _pct(mean - half), _pct(mean + half)
    verdict: Verdict = SAME
    if low is not None and high is not None:
        verdict = decide(change_pct, low, high, higher_is_better, MIN_EFFECT_PCT)
    # One look: the autocorrelation is reported (and noted when clearly positive), not handled.
    return replace(
        fixed, ci_low_pct=low, ci_high_pct=high, verdict=verdict, autocorrelation=lag1(diffs)
    )


def compare_adjusted(
    baseline: Rounds,
    candidate: Rounds,
    covariates: tuple[Rounds, Rounds],
    *,
    higher_is_better: bool = True,
    alpha: float = COMPARE_ALPHA,
    g: float = MIXTURE_G,
    horizon: int | None = None,
) -> ChangeVerdict:
    """`compare_rounds` with looks after every round, on the per-round differences adjusted for
    ``covariates`` (the baseline's and the candidate's period's interference per round, as a
    fraction of the machine; `pgdyno.stats.covariates`): the plain comparison when the
    covariate never moved or no slope was clear enough to use, else the adjusted one with the
    rounds it moved, its slope and how much it narrowed the verdict's interval.

    >>> base = {r: 100.0 for r in range(1, 9)}
    >>> cand = {1: 101.0, 2: 80.0, 3: 99.5, 4: 100.5, 5: 120.0, 6: 99.0, 7: 81.0, 8: 100.2}
    >>> load = {2: 0.25, 5: -0.25, 7: 0.25}  # the candidate's period minus the baseline's
    >>> compare_adjusted(base, cand, ({}, {})).adjusted_rounds  # no period disturbed
    0
    >>> c = compare_adjusted(base, cand, ({}, load))
    >>> c.adjusted_rounds, round(c.adjusted_slope, 2), round(c.narrowed_pct), c.covariates
    (2, -0.81, 41, ('foreign_cpu', 'steal'))
    """
    plain = compare_rounds(
        baseline, candidate, higher_is_better=higher_is_better, sequential=True, alpha=alpha,
        g=g, horizon=horizon,
    )  # fmt: skip
    rounds = sorted(baseline.keys() & candidate.keys())
    if len(rounds) < 2:
        return plain
    diffs = [math.log(candidate[r]) - math.log(baseline[r]) for r in rounds]
    base_x, cand_x = covariates
    found = adjust(diffs, [cand_x.get(r, 0.0) - base_x.get(r, 0.0) for r in rounds])
    if found is None or found.rounds == 0:
        return plain
    looks = sequential_interval(diffs, alpha, g=g)
    adjusted = sequential_interval(found.diffs, alpha, g=g)
    mean = statistics.fmean(found.diffs)
    change = replace(
        plain, change_pct=100.0 * math.expm1(mean), sd_log=sample_sd(found.diffs, mean),
        verdict=SAME, stopped_early=False, naive_change_pct=None, adjusted_rounds=found.rounds,
        adjusted_slope=found.slope, narrowed_pct=_narrowed(looks, adjusted),
        covariates=COVARIATES,
    )  # fmt: skip
    design = (alpha / 2.0, g, max(len(rounds), horizon or len(rounds)))
    return _judged(change, adjusted, higher_is_better, MIN_EFFECT_PCT, design)


def _narrowed(before: Looks, after: Looks) -> float | None:
    """How much narrower the verdict's interval is after than before, in % of its width."""
    width, narrow = before.verdict_high - before.verdict_low, after.verdict_high - after.verdict_low
    if not (math.isfinite(width) and math.isfinite(narrow)) or width <= 0.0 or narrow < 0.0:
        return None
    return 100.0 * (1.0 - narrow / width)


def _pct(end_log: float) -> float | None:
    """An end of an interval on the log scale, in %; None while unbounded."""
    return 100.0 * math.expm1(end_log) if math.isfinite(end_log) else None


def _judged(
    fixed: ChangeVerdict,
    looks: Looks,
    higher_is_better: bool,
    floor_pct: float,
    design: tuple[float, float, int],
) -> ChangeVerdict:
    """The sequential comparison: the mean's and the robust centre's intervals, and the verdict
    on the two intersected (none when they disagree); at a verdict (an adaptive stop) the
    change is the estimate adjusted for the stop (`_stop_adjusted`), with ``design`` the
    t-mixture's alpha, g and horizon."""
    change = replace(
        fixed, ci_low_pct=_pct(looks.low), ci_high_pct=_pct(looks.high),
        robust_pct=100.0 * math.expm1(looks.robust), robust_low_pct=_pct(looks.robust_low),
        robust_high_pct=_pct(looks.robust_high), erratic=looks.erratic,
        autocorrelation=looks.autocorrelation, dependent=looks.dependent,
    )  # fmt: skip
    low, high = _pct(looks.verdict_low), _pct(looks.verdict_high)
    if looks.erratic or low is None or high is None:
        return change
    verdict = decide(change.change_pct, low, high, higher_is_better, floor_pct)
    if verdict == SAME:
        return replace(change, verdict=verdict)
    return replace(
        change, verdict=verdict, stopped_early=True, naive_change_pct=change.change_pct,
        change_pct=_stop_adjusted(looks, change, design),
    )  # fmt: skip


def _stop_adjusted(looks: Looks, change: ChangeVerdict, design: tuple[float, float, int]) -> float:
    """The change at an adaptive stop, in %: Whitehead's bias-adjusted mean
    (`pgdyno.stats.stop_bias`) at the spread the interval used (widened for dependence), kept
    inside the mean's interval.

    >>> diffs = [0.05, 0.06, 0.04, 0.05, 0.055, 0.045]
    >>> looks = sequential_interval(diffs, 0.025)
    >>> c = ChangeVerdict(5.1, None, None, SAME, False, None, pairs=6, sd_log=0.05)
    >>> naive = 100 * math.expm1(looks.mean)
    >>> round(_stop_adjusted(looks, c, (0.0125, 2.0, 40)), 2), round(naive, 2)
    (4.74, 5.13)
    """
    alpha, g, horizon = design
    mean = looks.mean
    if change.sd_log is not None:
        sd = change.sd_log * inflation(change.autocorrelation, change.pairs or 0)
        mean = adjusted_mean(mean, sd, horizon=horizon, alpha=alpha, g=g)
    return 100.0 * math.expm1(min(max(mean, looks.low), looks.high))


def noisy_pairs(sd_diff: float) -> bool:
    """Whether the paired spread is "noisy": the sd of the per-round log differences, divided
    by sqrt(2) to be the spread of one run (the differences add two runs' noise), above
    ``NOISY_CV_PCT``. Drift between rounds, which pairing removes, does not count.

    >>> noisy_pairs(0.05), noisy_pairs(0.08)
    (False, True)
    """
    return 100.0 * sd_diff / math.sqrt(2.0) > NOISY_CV_PCT


@dataclass(frozen=True, slots=True)
class Looks:
    """An adaptive comparison's always-valid intervals after every look so far, on the log
    scale (``-inf`` / ``inf`` ends while unbounded; `sequential_interval`)."""

    mean: float  # the mean per-round difference: the change printed is exp(mean) - 1
    low: float  # the mean's interval (the t-mixture, intersected over the looks)
    high: float
    robust: float  # the robust centre (the median, moved into its interval if outside)
    robust_low: float  # its interval (the betting sequence, intersected over the looks)
    robust_high: float
    verdict_low: float  # the interval the verdict rests on: the two intersected
    verdict_high: float
    erratic: bool  # the looks or the two sequences disagree: an assumption is broken
    autocorrelation: float | None  # lag-1, of the differences so far
    dependent: bool  # clearly positive: the robust half left out (both widened from 6 rounds)


def sequential_interval(diffs: Sequence[float], alpha: float, *, g: float = MIXTURE_G) -> Looks:
    """The always-valid intervals for the per-round log differences ``diffs`` (in round order),
    after every look: each prefix of two or more differences is a look.

    * The mean's interval: the t-mixture (`pgdyno.stats.sequential`, exact for normal
      differences) at ``alpha / 2`` with variance ``g``, at every look; intersected over the
      looks (the running intersection: on the event that every look covers the true mean, so
      does their intersection, so it is free).
    * The robust centre's interval: the betting sequence on Huber-clipped differences
      (`pgdyno.stats.robust`) at ``alpha / 2``, intersected over the looks. A slow run moves it by
      one bounded bet, where it moves the t-mixture's spread without bound.
    * The verdict's interval: the two intersected. Where the differences are symmetric about
      one centre (an A/A comparison in random orders; a change that moves every run alike) the
      mean and the robust centre are the same number, and by the union bound both intervals
      cover it at every look at once with probability at least ``1 - alpha``.
    * When they cannot both be right (the intersection is empty), or the mean has left the
      interval the earlier looks left for it, the differences are not one steady, symmetric
      distribution (a set with slow runs of its own, a change of level in the middle):
      ``erratic``, and no verdict; the last look's intervals are reported.
    * Rounds that are alike (`pgdyno.stats.dependence.inflation`, from 6 rounds on): every
      look's t-mixture spread, and every look's robust interval about its centre (the median
      of that look's differences), are widened by the AR(1) long-run factor of the
      bias-corrected lag-1 autocorrelation of all the differences so far; so a look's
      intervals can be wider than the last look's when the rounds turn out more alike. Where
      the autocorrelation is clearly positive, the robust half is left out of the verdict's
      interval (its widening is a plug-in, the t-mixture's is the long-run variance).

    >>> looks = sequential_interval([0.05, 0.06, 0.04, 0.05, 0.055, 0.045], 0.025)
    >>> round(looks.mean, 3), round(looks.low, 3), round(looks.high, 3), looks.erratic
    (0.05, 0.028, 0.072, False)
    >>> looks.robust_low, looks.verdict_low == looks.low  # too few rounds for the robust half
    (-inf, True)
    """
    n = len(diffs)
    rho = lag1(diffs)
    factor, dependent = inflation(rho, n), clearly_dependent(rho, n)
    t_ends = []
    for k, mean_k, sd_k in _prefix_moments(diffs):
        half = half_width(k, sd_k * factor, alpha=alpha / 2.0, g=g)
        t_ends.append((mean_k - half, mean_k + half))
    r_ends = _widened(_robust_looks(tuple(diffs), alpha / 2.0), diffs, factor)
    low, high = _meet(t_ends)
    robust_low, robust_high = _meet(r_ends)
    verdict_low, verdict_high = (low, high) if dependent else _meet(t_ends + r_ends)
    mean = statistics.fmean(diffs)
    erratic = verdict_low > verdict_high or not low <= mean <= high
    if erratic:  # no verdict: the last look's intervals, as they are
        (low, high), (robust_low, robust_high) = t_ends[-1], r_ends[-1]
        verdict_low, verdict_high = min(low, robust_low), max(high, robust_high)
    centre = statistics.median(diffs)
    if robust_low <= robust_high:
        centre = min(max(centre, robust_low), robust_high)
    return Looks(
        mean, low, high, centre, robust_low, robust_high,
        verdict_low, verdict_high, erratic, rho, dependent,
    )  # fmt: skip


def _prefix_moments(diffs: Sequence[float]) -> list[tuple[int, float, float]]:
    """(k, mean, sample sd) of every prefix of two or more ``diffs`` (Welford's updates)."""
    out, mean, square = [], 0.0, 0.0
    for k, d in enumerate(diffs, start=1):
        step = d - mean
        mean += step / k
        square += step * (d - mean)
        if k >= 2:
            out.append((k, mean, math.sqrt(max(square, 0.0) / (k - 1))))
    return out


def _widened(
    ends: list[tuple[float, float]], diffs: Sequence[float], factor: float
) -> list[tuple[float, float]]:
    """The robust ends of every look (a prefix of two or more ``diffs``) widened by ``factor``
    about that look's centre (the median of its differences), as the t-mixture's spread is.

    >>> _widened([(-1.0, 3.0)], [0.0, 2.0], 2.0), _widened([(-1.0, 3.0)], [0.0, 2.0], 1.0)
    ([(-3.0, 5.0)], [(-1.0, 3.0)])
    """
    if factor == 1.0:
        return ends
    centres: list[float] = []
    seen: list[float] = []
    for k, d in enumerate(diffs, start=1):
        bisect.insort(seen, d)  # the medians of the prefixes, as statistics.median gives them
        if k >= 2:
            centres.append((seen[(k - 1) // 2] + seen[k // 2]) / 2.0)
    return [
        (c + factor * (low - c), c + factor * (high - c))
        for c, (low, high) in zip(centres, ends, strict=True)
    ]


def _meet(ends: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The intersection of intervals (low > high when empty)."""
    return max(low for low, _ in ends), min(high for _, high in ends)


# The robust ends of every look of the comparisons judged lately: the next look of the same
# comparison only adds its own (the runner looks after every round). Bounded; a memo, like
# functools.lru_cache, which cannot tell whether the previous look is known without computing it.
_LOOKS_SEEN: dict[tuple[tuple[float, ...], float], list[tuple[float, float]]] = {}
_LOOKS_KEPT = 512


def _robust_looks(diffs: tuple[float, ...], alpha: float) -> list[tuple[float, float]]:
    """`pgdyno.stats.robust.prefix_intervals` of ``diffs``, reusing the previous look's."""
    known = _LOOKS_SEEN.get((diffs, alpha))
    if known is not None:
        return known
    before = _LOOKS_SEEN.get((diffs[:-1], alpha))
    if before is not None:
        ends = before + prefix_intervals(diffs, alpha=alpha, first=len(diffs))
    else:
        ends = prefix_intervals(diffs, alpha=alpha)
    if len(_LOOKS_SEEN) >= _LOOKS_KEPT:
        _LOOKS_SEEN.clear()
    _LOOKS_SEEN[(diffs, alpha)] = ends
    return ends


def _needed(
    sd: float, change_pct: float, *, sequential: bool, min_effect_pct: float, alpha: float
) -> int | None:
    """Rounds that would resolve a change of this size with this spread of differences."""
    if sd <= 0 or abs(change_pct) <= min_effect_pct:
        return None
    if sequential:
        # The t-mixture at its half of the comparison's alpha: the mean's interval.
        return rounds_to_detect(sd, change_pct, alpha=alpha / 2.0, min_effect_pct=min_effect_pct)
    # The paired difference of n rounds has standard error sd/sqrt(n) = (sd/sqrt 2)*sqrt(2/n):
    # the two-sample planning formula with sd/sqrt(2) (its t has 2n-2 degrees of freedom
    # where the paired one has n-1, which only matters below about 5 rounds).
    try:
        return repeats_needed(
            sd / math.sqrt(2.0), change_pct, min_effect_pct=min_effect_pct, alpha=alpha
        )
    except ValueError:  # the change rounds to the floor on the log scale
        return None
