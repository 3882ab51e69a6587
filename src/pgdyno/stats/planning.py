"""How many repeats per set it takes to resolve a change of a given size."""

from __future__ import annotations

import math
import statistics

from pgdyno.stats.levels import COMPARE_ALPHA, MAX_REPEATS, MIN_EFFECT_PCT, POWER
from pgdyno.stats.student_t import t_quantile

__all__ = ["repeats_needed"]


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
