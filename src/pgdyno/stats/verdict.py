"""The verdict of a candidate set against a baseline set, one figure: pure functions.

pgdyno runs the same pgbench cell several times per configuration set (repeats, interleaved
between the sets so that drift of the machine hits every set alike) and turns the per-repeat
figures (TPS, a latency) into a verdict: better, worse, or no detectable difference.

Method. The comparison works on the logarithms of the figures:

* a change between configurations is multiplicative (a tuning gains "8%", not "800 TPS"), and
  run-to-run noise is too: its spread grows with the level. On the log scale both become
  additive, so the difference of the mean logs is the log of the ratio of the geometric means,
  and a +10% and a -9.1% change are mirror images (a change and its undo cancel);
* the interval for that difference is Welch's t-interval (unequal variances, Welch-Satterthwaite
  degrees of freedom): the two sets need not be equally noisy (a setting can make the server
  more or less stable), and with 3-10 repeats the t quantile, not the normal one, sets the
  width. The interval is converted back with ``exp(x) - 1`` into a relative change in %.

The verdict is "better" or "worse" only when the whole interval (at the plan's share of the plan-
wide error, `pgdyno.stats.family`; 97.5% for one set and one cell) lies on one side of zero (the
change is detectable) *and* it reaches a change of at least ``MIN_EFFECT_PCT`` that way (the change
may matter). An interval wholly inside +-``MIN_EFFECT_PCT`` is "practically equal": no detectable
difference, said so in the notes. The floor is judged on the interval, not on the observed change:
at an adaptive stop the observed change is biased away from zero, the interval is valid at any
stop. An A/A comparison then says "no detectable difference" in at least 97.5% of cases by
construction of the interval. The floor exists because the interval only accounts for random run-
to-run noise: on a quiet host (CV of 1% or less) it becomes narrow enough to call changes of a few
tenths of a percent, which small systematic effects the interleaving does not remove (data
placement, the order of runs) can produce, and which no configuration change is worth acting on
anyway. pgbench's skewed noise (a shared machine makes some runs slow, never fast) does not push
the false alarms above the nominal rate; the unit tests simulate such noise.

How many repeats? ``repeats_needed`` (``pgdyno.stats.planning``) answers the planning
question: with this noise, how many repeats per set would resolve a change of a given size, 90%
of the time? ``compare`` fills it in for the change it observed, so a "no detectable
difference" can come with "it would take 12 repeats to tell".

The numbers behind the verdict (confidence levels, floor, noise threshold) are in
``pgdyno.stats.levels``; the t distribution comes from SciPy (``pgdyno.stats.student_t``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from pgdyno.stats.levels import COMPARE_ALPHA, MIN_EFFECT_PCT, NOISY_CV_PCT
from pgdyno.stats.planning import repeats_needed
from pgdyno.stats.student_t import t_quantile
from pgdyno.stats.summary import describe, require_positive

__all__ = [
    "BETTER",
    "SAME",
    "WORSE",
    "ChangeVerdict",
    "Verdict",
    "compare",
    "decide",
    "practically_equal",
]

Verdict = Literal["better", "worse", "no detectable difference"]
BETTER: Final = "better"
WORSE: Final = "worse"
SAME: Final = "no detectable difference"


@dataclass(frozen=True, slots=True)
class ChangeVerdict:
    """A candidate set's change against a baseline set, for one figure: the change, its
    interval and the verdict."""

    change_pct: float  # candidate vs baseline, from the ratio of geometric means, in %
    ci_low_pct: float | None  # 95% interval of change_pct; None when a side has n < 2
    ci_high_pct: float | None
    verdict: Verdict
    noisy: bool  # the run-to-run spread is above NOISY_CV_PCT (paired: of the differences)
    # Per set (or rounds, when paired), to resolve a change of this size (see repeats_needed).
    repeats_needed: int | None
    # How the interval was made: "unpaired" (Welch), "paired" (within-round differences, one
    # look) or "sequential" (paired, always-valid: see pgdyno.stats.sequential).
    method: str = "unpaired"
    pairs: int | None = None  # complete rounds behind a paired interval
    left_out: int = 0  # runs without a partner in their round, not in a paired interval
    sd_log: float | None = None  # spread of the log figures (paired: of the differences)
    alpha: float = COMPARE_ALPHA  # the interval is at 1 - alpha: the plan-wide error's share
    # Sequential only but `autocorrelation` (paired; pgdyno.stats.paired.sequential_interval).
    # The interval above is the mean's, about change_pct = exp(mean) - 1; the robust centre (the
    # typical round) is its own figure with its own interval; the verdict rests on the two
    # intersected (`verdict_interval`).
    robust_pct: float | None = None
    robust_low_pct: float | None = None
    robust_high_pct: float | None = None
    erratic: bool = False  # the two intervals (or the looks) disagree: no verdict
    autocorrelation: float | None = None  # lag-1, of the per-round differences (3 pairs or more)
    dependent: bool = False  # clearly positive: the mean's interval widened for it
    stopped_early: bool = False  # a verdict at an adaptive look: change_pct is bias-adjusted
    # At an adaptive stop: the plain exp(mean) - 1, in %, where change_pct is the estimate
    # adjusted for the stop's bias (pgdyno.stats.stop_bias); None elsewhere.
    naive_change_pct: float | None = None
    # Switched rounds adjusted for their periods' interference (pgdyno.stats.covariates): the
    # rounds moved, the slope (log figure per fraction of the machine) and how much narrower
    # the verdict's interval is than the unadjusted one, in % of its width (negative: wider).
    adjusted_rounds: int = 0
    adjusted_slope: float | None = None
    narrowed_pct: float | None = None
    # The covariates the adjustment used (`pgdyno.stats.covariates.COVARIATES`); () when none
    covariates: tuple[str, ...] = ()

    @property
    def verdict_interval(self) -> tuple[float | None, float | None]:
        """The interval the verdict rests on: the mean's, intersected with the robust
        centre's where that one counts (sequential, rounds not clearly dependent).

        >>> ChangeVerdict(1.0, -2.0, 4.0, "no detectable difference", False, None,
        ...               robust_low_pct=-1.0, robust_high_pct=5.0).verdict_interval
        (-1.0, 4.0)
        """
        low, high = self.ci_low_pct, self.ci_high_pct
        if self.dependent:
            return low, high
        if self.robust_low_pct is not None:
            low = self.robust_low_pct if low is None else max(low, self.robust_low_pct)
        if self.robust_high_pct is not None:
            high = self.robust_high_pct if high is None else min(high, self.robust_high_pct)
        return low, high


def _log_moments(values: Sequence[float]) -> tuple[int, float, float | None]:
    logs = [math.log(v) for v in values]
    n = len(logs)
    mean = statistics.fmean(logs)
    return n, mean, (statistics.variance(logs, mean) if n >= 2 else None)


def compare(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    higher_is_better: bool = True,
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = COMPARE_ALPHA,
) -> ChangeVerdict:
    """The candidate's repeats against the baseline's (one figure, positive values), the
    interval at level ``1 - alpha``.

    ``change_pct`` is the ratio of geometric means minus one, in %. Its 95% interval is Welch's
    t-interval on the difference of mean logs. The verdict is ``BETTER``/``WORSE`` when the
    whole interval is on one side of zero and the change is at least ``min_effect_pct``,
    ``SAME`` otherwise, and always ``SAME`` when a side has fewer than 2 repeats (no spread
    to judge by). For a latency, pass ``higher_is_better=False``: a decrease is then better.

    >>> c = compare([100.0, 101.0, 99.0], [110.0, 111.0, 109.0])
    >>> round(c.change_pct, 1), c.verdict, c.noisy
    (10.0, 'better', False)
    >>> compare([100.0, 101.0, 99.0], [110.0, 111.0, 109.0], higher_is_better=False).verdict
    'worse'
    """
    require_positive(baseline, "baseline")
    require_positive(candidate, "candidate")
    if not (math.isfinite(min_effect_pct) and min_effect_pct >= 0):
        raise ValueError(f"min_effect_pct must be a finite number >= 0, got {min_effect_pct}")
    n_b, mean_b, var_b = _log_moments(baseline)
    n_c, mean_c, var_c = _log_moments(candidate)
    diff = mean_c - mean_b
    change_pct = 100.0 * math.expm1(diff)
    noisy = any(
        s.cv_pct is not None and s.cv_pct > NOISY_CV_PCT
        for s in (describe(baseline), describe(candidate))
    )

    # Planning figure: the log spread pooled over the sides that have one.
    spreads = [(n - 1, v) for n, v in ((n_b, var_b), (n_c, var_c)) if v is not None]
    needed: int | None = None
    sd_log: float | None = None
    if spreads:
        sd_log = math.sqrt(sum(k * v for k, v in spreads) / sum(k for k, _ in spreads))
        if sd_log > 0 and abs(change_pct) > min_effect_pct:
            try:
                needed = repeats_needed(
                    sd_log, change_pct, min_effect_pct=min_effect_pct, alpha=alpha
                )
            except ValueError:  # the change rounds to zero or to the floor on the log scale
                needed = None

    if var_b is None or var_c is None:
        return ChangeVerdict(
            change_pct, None, None, SAME, noisy, needed, sd_log=sd_log, alpha=alpha
        )

    a_b, a_c = var_b / n_b, var_c / n_c  # squared standard errors of the two mean logs
    se = math.sqrt(a_b + a_c)
    if se == 0:
        half = 0.0  # both sets perfectly steady: the difference is what it is
    else:
        # Welch-Satterthwaite degrees of freedom (between min(n)-1 and n_b+n_c-2).
        df = (a_b + a_c) ** 2 / (a_b**2 / (n_b - 1) + a_c**2 / (n_c - 1))
        half = t_quantile(1.0 - alpha / 2.0, df) * se
    ci_low_pct = 100.0 * math.expm1(diff - half)
    ci_high_pct = 100.0 * math.expm1(diff + half)

    verdict = decide(change_pct, ci_low_pct, ci_high_pct, higher_is_better, min_effect_pct)
    return ChangeVerdict(
        change_pct, ci_low_pct, ci_high_pct, verdict, noisy, needed, sd_log=sd_log, alpha=alpha
    )


def practically_equal(low_pct: float | None, high_pct: float | None, floor_pct: float) -> bool:
    """The whole interval lies inside ``(-floor, +floor)``: whatever the change, it is smaller
    than the floor.

    >>> practically_equal(-0.4, 0.7, 1.0), practically_equal(-0.4, 1.2, 1.0)
    (True, False)
    """
    if low_pct is None or high_pct is None:
        return False
    return -floor_pct < low_pct and high_pct < floor_pct


def decide(
    change_pct: float, low_pct: float, high_pct: float, higher_is_better: bool, floor_pct: float
) -> Verdict:
    """Better or worse when the whole interval is on one side of zero and it reaches a change
    of at least ``floor_pct`` that way; no detectable difference otherwise. An interval wholly
    inside ``(-floor, +floor)`` is practically equal (see `practically_equal`), even when it
    excludes zero. The point estimate does not decide: at an adaptive stop it is biased away
    from zero (the rounds stop when it happens to be far out); the interval is valid there.
    ``change_pct`` is kept for the callers' records.

    >>> decide(5.0, 1.0, 9.0, True, 1.0), decide(-5.0, -9.0, -1.0, False, 1.0)
    ('better', 'better')
    >>> decide(0.5, 0.1, 0.9, True, 1.0), decide(0.9, 0.2, 1.6, True, 1.0)
    ('no detectable difference', 'better')
    """
    del change_pct  # judged on the interval alone
    if low_pct > 0 and high_pct >= floor_pct:
        return BETTER if higher_is_better else WORSE
    if high_pct < 0 and low_pct <= -floor_pct:
        return WORSE if higher_is_better else BETTER
    return SAME
