"""Repeat statistics and verdicts for comparing configuration sets: pure functions.

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

The verdict is "better" or "worse" only when the whole 97.5% interval (``COMPARE_CONFIDENCE``)
lies on one side of zero (the change is detectable) *and* the observed change is at least
``MIN_EFFECT_PCT`` (it matters). An A/A comparison (two sets of the same configuration) then
says "no detectable difference" in about 97.5% of cases by construction of the interval, and
more where the floor bites. The
floor exists because the interval only accounts for random run-to-run noise: on a quiet host
(CV of 1% or less) it becomes narrow enough to call changes of a few tenths of a percent, which
small systematic effects the interleaving does not remove (data placement, the order of runs)
can produce, and which no configuration change is worth acting on anyway. There it also cuts
the interval's A/A false alarms further, since they are all small. At ordinary noise (CV
around 3%) the interval is wider than the floor and decides alone; pgbench's skewed noise (a
shared machine makes some runs slow, never fast) does not push the false alarms above the
nominal 2.5% there. The unit tests simulate such noise.

How many repeats? ``repeats_needed`` answers the planning question: with this noise, how many
repeats per set would resolve a change of a given size, 90% of the time? ``compare`` fills it in
for the change it observed, so a "no detectable difference" can come with "it would take 12
repeats to tell".

Student t quantiles are computed here (no SciPy): exact closed forms for 1 and 2 degrees of
freedom, otherwise a Cornish-Fisher expansion around the normal quantile polished by Newton's
method on the exact t distribution (through the regularized incomplete beta function; from
1000 degrees of freedom on, the expansion alone is as exact), so they are exact to about 1e-12
for any real degrees of freedom, as Welch's interval needs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "ALPHA",
    "BETTER",
    "COMPARE_ALPHA",
    "COMPARE_CONFIDENCE",
    "CONFIDENCE",
    "MAX_REPEATS",
    "MIN_EFFECT_PCT",
    "NOISY_CV_PCT",
    "POWER",
    "SAME",
    "WORSE",
    "CellStats",
    "Comparison",
    "Ladder",
    "LadderStep",
    "Verdict",
    "compare",
    "describe",
    "ladder",
    "repeats_needed",
    "t_cdf",
    "t_quantile",
]

Verdict = Literal["better", "worse", "no detectable difference"]
BETTER: Final = "better"
WORSE: Final = "worse"
SAME: Final = "no detectable difference"

# Confidence level of a cell's interval (two-sided), and the matching significance level.
CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE
# Confidence level of a comparison's interval, on which the verdict rests. Higher than 95%:
# a plan compares several sets with the baseline for TPS and latency in every cell, so at 95%
# one false "better" in twenty comparisons would be routine; at 97.5% an A/A comparison says
# "no detectable difference" about 97.5% of the time, with margin over the 95% promised.
COMPARE_CONFIDENCE = 0.975
COMPARE_ALPHA = 1.0 - COMPARE_CONFIDENCE
# Smallest change, in %, reported as better/worse (see the module docstring).
MIN_EFFECT_PCT = 1.0
# Repeat-to-repeat coefficient of variation, in %, above which a set is flagged as noisy.
# Interleaved pgbench repeats of one cell on a quiet host typically differ by 1-3% (checkpoint
# timing, autovacuum, CPU frequency, page cache); a shared or busy host gives 3-5%. Above 5%
# something varies between runs that the comparison does not control, and differences of a
# few % are then out of reach of a handful of repeats.
NOISY_CV_PCT = 5.0
# Probability of detecting a true change that ``repeats_needed`` plans for.
POWER = 0.9
# ``repeats_needed`` stops counting here: this many repeats or more is "not worth it".
MAX_REPEATS = 1000


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


@dataclass(frozen=True, slots=True)
class Comparison:
    """A candidate set against a baseline set, for one figure."""

    change_pct: float  # candidate vs baseline, from the ratio of geometric means, in %
    ci_low_pct: float | None  # 95% interval of change_pct; None when a side has n < 2
    ci_high_pct: float | None
    verdict: Verdict
    noisy: bool  # a side's coefficient of variation is above NOISY_CV_PCT
    repeats_needed: int | None  # per set, to resolve a change of this size (see repeats_needed)


@dataclass(frozen=True, slots=True)
class LadderStep:
    name: str
    stats: CellStats
    step_gain: Comparison | None  # against the previous step; None for step 0
    cumulative: Comparison | None  # against step 0; None for step 0
    # This step relative to step 0, in % (step 0 is 100), from the ratio of geometric means:
    # the estimator of the gains, so a waterfall's bar and its interval agree.
    level_pct: float


@dataclass(frozen=True, slots=True)
class Ladder:
    steps: tuple[LadderStep, ...]
    total: Comparison | None  # last step against step 0; None with a single step


# --- Student t distribution -------------------------------------------------------------------


def _betainc_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz evaluation).

    Converges fast for ``x < (a + 1) / (a + b + 2)``; the caller arranges that.
    """
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        # Two partial numerators per m: an even one, then an odd one.
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta ``I_x(a, b)``; ``y`` is ``1 - x``, passed to keep precision."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, y, x)
    log_front = (
        a * math.log(x)
        + b * math.log(y)
        - math.log(a)
        - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    )
    return math.exp(log_front) * _betainc_cf(a, b, x)


def _t_upper(t: float, df: float) -> float:
    """P(T > t) for ``t >= 0``: half the incomplete beta at ``df / (df + t^2)``."""
    t2 = t * t
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


def _t_pdf(t: float, df: float) -> float:
    log_norm = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (> 0, real) degrees of freedom.

    Accurate to about 1e-13 up to a million degrees of freedom; beyond, the error grows with
    ``df`` (log-gamma cancellation) but stays far below any use here.

    >>> t_cdf(0.0, 7)
    0.5
    >>> round(t_cdf(2.228, 10), 4)
    0.975
    """
    if not df > 0 or math.isinf(df):
        raise ValueError(f"degrees of freedom must be positive and finite, got {df}")
    upper = _t_upper(abs(t), df)
    return 1.0 - upper if t >= 0 else upper


# From here on the Cornish-Fisher expansion is as good as exact (relative error below 1e-13 for
# the usual p, 1e-11 even at p = 1 - 1e-10), while the incomplete beta loses digits to
# cancellation between large log-gamma values.
_CF_EXACT_DF = 1000.0


def _cornish_fisher(z: float, df: float) -> float:
    """Expansion of the t quantile in powers of 1/df around the normal quantile ``z``."""
    z2 = z * z
    g1 = z * (z2 + 1.0) / 4.0
    g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0
    g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0
    g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (> 0, real) degrees of freedom.

    >>> round(t_quantile(0.975, 1), 3), round(t_quantile(0.975, 2), 3)
    (12.706, 4.303)
    >>> round(t_quantile(0.975, 10), 3), round(t_quantile(0.05, 5), 3)
    (2.228, -2.015)
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p}")
    if not df > 0 or math.isinf(df):
        raise ValueError(f"degrees of freedom must be positive and finite, got {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    z = statistics.NormalDist().inv_cdf(p)
    if df >= _CF_EXACT_DF:
        return _cornish_fisher(z, df)
    q = 1.0 - p
    # Solve P(T > t) = q with Newton's method. The upper tail is convex and decreasing for
    # t > 0, so from below the root Newton climbs to it without overshooting, and from above
    # a single step lands below it. The normal quantile is always below the t quantile, hence
    # a safe floor when the expansion (poor for df < 3) lands far off.
    t = max(z, _cornish_fisher(z, df))
    for _ in range(200):
        step = (_t_upper(t, df) - q) / _t_pdf(t, df)
        t_next = max(z, t + step)
        if abs(t_next - t) <= 1e-13 * t_next:
            return t_next
        t = t_next
    return t


# --- One cell ---------------------------------------------------------------------------------


def _check_finite(values: Sequence[float], what: str) -> None:
    if len(values) == 0:
        raise ValueError(f"{what}: no values")
    for v in values:
        if not math.isfinite(v):
            raise ValueError(f"{what}: values must be finite numbers, got {v!r}")


def _check_positive(values: Sequence[float], what: str) -> None:
    _check_finite(values, what)
    for v in values:
        if v <= 0:
            raise ValueError(
                f"{what}: values must be positive (the comparison works on their logarithms), "
                f"got {v!r}"
            )


def describe(values: Sequence[float]) -> CellStats:
    """Median, mean, spread and the 95% interval of the mean of one cell's repeats.

    >>> s = describe([10.0, 12.0, 14.0])
    >>> s.median, s.mean, s.sd, round(s.ci_low or 0, 2), round(s.ci_high or 0, 2)
    (12.0, 12.0, 2.0, 7.03, 16.97)
    >>> describe([5.0]).sd is None
    True
    """
    _check_finite(values, "describe")
    n = len(values)
    mean = statistics.fmean(values)
    median = float(statistics.median(values))
    if n < 2:
        return CellStats(n, median, mean, None, None, None, None)
    sd = statistics.stdev(values, mean)
    cv = 100.0 * sd / mean if mean > 0 else None
    half = t_quantile(1.0 - ALPHA / 2.0, n - 1) * sd / math.sqrt(n)
    return CellStats(n, median, mean, sd, cv, mean - half, mean + half)


# --- Planning ---------------------------------------------------------------------------------


def _log_floor(effect_pct: float, min_effect_pct: float) -> float:
    """The floor as a distance on the log scale, in the direction of the effect."""
    if effect_pct > 0:
        return math.log1p(min_effect_pct / 100.0)
    if min_effect_pct >= 100.0:
        return math.inf  # no decrease reaches -100%
    return -math.log1p(-min_effect_pct / 100.0)


def repeats_needed(
    sd_log: float,
    effect_pct: float,
    *,
    alpha: float = COMPARE_ALPHA,
    power: float = POWER,
    min_effect_pct: float = MIN_EFFECT_PCT,
) -> int:
    """Repeats per set to detect a true change of ``effect_pct`` with probability ``power``.

    Two sets of ``n`` repeats each, whose logarithms have standard deviation ``sd_log`` (for
    small noise about the coefficient of variation as a fraction), compared by a two-sided test
    at level ``alpha``. The difference of mean logs then has standard error
    ``se = sd_log * sqrt(2 / n)``, and ``n`` is the smallest count with

    * ``(t(1 - alpha/2, 2n-2) + t(power, 2n-2)) * se <= |log(1 + effect/100)|``: the interval
      excludes zero (the usual sample-size formula with t instead of normal quantiles, counted
      up from the normal-quantile answer since the t quantiles depend on ``n``), and
    * ``t(power, 2n-2) * se <= |log(1 + effect/100)| - |log(1 +/- min_effect/100)|``: the
      observed change also clears the ``min_effect_pct`` floor of the verdict with that
      probability. This only binds when the effect is within a few tenths of the floor; an
      effect at or below the floor is never reported with probability above one half, so it
      raises ``ValueError``, as does a zero effect.

    The answer is at least 2 and at most ``MAX_REPEATS``, which means "that many or more".
    Without noise (``sd_log == 0``) 2 repeats suffice.

    >>> repeats_needed(0.03, 5.0)
    11
    >>> repeats_needed(0.03, -5.0), repeats_needed(0.01, 5.0), repeats_needed(0.0, 5.0)
    (10, 3, 2)
    """
    if not (math.isfinite(sd_log) and sd_log >= 0):
        raise ValueError(f"sd_log must be a finite number >= 0, got {sd_log}")
    if not (0.0 < alpha < 1.0 and 0.0 < power < 1.0):
        raise ValueError(f"need 0 < alpha < 1 and 0 < power < 1, got {alpha} and {power}")
    if not (math.isfinite(effect_pct) and effect_pct > -100.0):
        raise ValueError(f"effect_pct must be a finite change above -100%, got {effect_pct}")
    if min_effect_pct < 0:
        raise ValueError(f"min_effect_pct must be >= 0, got {min_effect_pct}")
    effect = abs(math.log1p(effect_pct / 100.0))
    margin = effect - _log_floor(effect_pct, min_effect_pct)
    if effect == 0 or margin <= 0:
        raise ValueError(
            f"a change of {effect_pct:g}% cannot be resolved: it must be non-zero and larger "
            f"than the {min_effect_pct:g}% floor of the verdict"
        )
    if sd_log == 0:
        return 2

    def enough(n: int) -> bool:
        se = sd_log * math.sqrt(2.0 / n)
        t_power = t_quantile(power, 2 * n - 2)
        t_alpha = t_quantile(1.0 - alpha / 2.0, 2 * n - 2)
        return (t_alpha + t_power) * se <= effect and t_power * se <= margin

    normal = statistics.NormalDist()
    z_alpha, z_power = normal.inv_cdf(1.0 - alpha / 2.0), normal.inv_cdf(power)
    # The same two conditions with normal quantiles give a lower bound for n.
    guess = max(
        2.0 * ((z_alpha + z_power) * sd_log / effect) ** 2,
        2.0 * (max(z_power, 0.0) * sd_log / margin) ** 2,
    )
    n = max(2, min(MAX_REPEATS, math.ceil(guess)))
    while n < MAX_REPEATS and not enough(n):
        n += 1
    return n


# --- Two sets ---------------------------------------------------------------------------------


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
) -> Comparison:
    """The candidate's repeats against the baseline's (one figure, positive values).

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
    _check_positive(baseline, "baseline")
    _check_positive(candidate, "candidate")
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
    if spreads:
        sd_log = math.sqrt(sum(k * v for k, v in spreads) / sum(k for k, _ in spreads))
        if sd_log > 0 and abs(change_pct) > min_effect_pct:
            try:
                needed = repeats_needed(sd_log, change_pct, min_effect_pct=min_effect_pct)
            except ValueError:  # the change rounds to zero or to the floor on the log scale
                needed = None

    if var_b is None or var_c is None:
        return Comparison(change_pct, None, None, SAME, noisy, needed)

    a_b, a_c = var_b / n_b, var_c / n_c  # squared standard errors of the two mean logs
    se = math.sqrt(a_b + a_c)
    if se == 0:
        half = 0.0  # both sets perfectly steady: the difference is what it is
    else:
        # Welch-Satterthwaite degrees of freedom (between min(n)-1 and n_b+n_c-2).
        df = (a_b + a_c) ** 2 / (a_b**2 / (n_b - 1) + a_c**2 / (n_c - 1))
        half = t_quantile(1.0 - COMPARE_ALPHA / 2.0, df) * se
    ci_low_pct = 100.0 * math.expm1(diff - half)
    ci_high_pct = 100.0 * math.expm1(diff + half)

    verdict: Verdict = SAME
    if abs(change_pct) >= min_effect_pct:
        if ci_low_pct > 0:
            verdict = BETTER if higher_is_better else WORSE
        elif ci_high_pct < 0:
            verdict = WORSE if higher_is_better else BETTER
    return Comparison(change_pct, ci_low_pct, ci_high_pct, verdict, noisy, needed)


# --- Tuning ladder ----------------------------------------------------------------------------


def ladder(
    steps: Sequence[tuple[str, Sequence[float]]], *, higher_is_better: bool = True
) -> Ladder:
    """The cumulative tuning ladder: each step applied on top of the previous one.

    Step 0 is the starting point. Each later step is compared with the step before (its own
    gain) and with step 0 (the gain so far); ``level_pct`` is 100 plus the gain so far, for a
    waterfall chart.

    >>> lad = ladder([("default", [100, 101, 99]), ("tuned", [120, 121, 119])])
    >>> [round(s.level_pct) for s in lad.steps], lad.total is not None and lad.total.verdict
    ([100, 120], 'better')
    """
    if not steps:
        raise ValueError("ladder: no steps")
    out: list[LadderStep] = []
    first_name, first = steps[0]
    _check_positive(first, f"ladder step {first_name!r}")
    first_stats = describe(first)
    out.append(LadderStep(first_name, first_stats, None, None, 100.0))
    previous = first
    for name, values in steps[1:]:
        _check_positive(values, f"ladder step {name!r}")
        so_far = compare(first, values, higher_is_better=higher_is_better)
        out.append(
            LadderStep(
                name,
                describe(values),
                compare(previous, values, higher_is_better=higher_is_better),
                so_far,
                100.0 + so_far.change_pct,
            )
        )
        previous = values
    total = out[-1].cumulative if len(out) > 1 else None
    return Ladder(tuple(out), total)
