"""Always-valid intervals for a mean: look after every round, stop whenever, stay honest.

The adaptive protocol (``precision`` / ``budget``) looks at the data after every round and stops
as soon as every comparison is resolved. A fixed-sample t-interval is only valid at one
pre-planned look: checked after every round, a 97.5% t-interval excludes zero in an A/A test
far more often than 2.5% of the time (optional stopping). pgdyno therefore uses a *confidence
sequence*: intervals CS_1, CS_2, ... that cover the true mean at every round at once with
probability 1 - alpha, so stopping at any round, for any reason, keeps the guarantee.

Which one, and why:

* The values are per-round differences of log TPS (or log p99), roughly normal with an unknown
  spread. The confidence sequence is Lai's (1976) t-mixture: for a hypothesised mean ``mu`` the
  Bayes factor of "the standardised mean is N(0, g)" against "it is 0", with the scale-invariant
  prior on sigma, is a non-negative martingale under ``mu`` (Lai 1976; Perez-Ortiz, Lardy,
  de Heide and Grunwald 2024, "E-statistics, group invariance and anytime-valid testing"; Wang
  and Ramdas 2023 on its use as a t confidence sequence). By Ville's inequality it exceeds
  ``1/alpha`` at some round with probability at most ``alpha``, so the set of ``mu`` where it
  stays below ``1/alpha`` is a (1 - alpha) confidence sequence. The set is an interval around the
  mean with a closed form (``half_width``): exact for normal data of unknown variance, with no
  need to know the number of looks in advance (a group-sequential design would need a maximum
  number of rounds, which a time budget and repeated rounds after interference do not give).
* The price is width: at the same number of rounds the interval is about 1.5-1.6 times as wide
  as a single-look t-interval (``MIXTURE_G`` is chosen for 5-50 rounds; the interval is
  unbounded below 5 rounds).
* When the budget is known before the data, the mixture is tuned to it: ``mixture_for_rounds``
  gives the ``g`` whose interval is narrowest at the number of rounds the budget holds
  (Howard, Ramdas, McAuliffe and Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
  confidence sequences", Annals of Statistics, choose a normal mixture's parameter so that its
  boundary is tightest at a target time; here the t-mixture's width is minimised numerically,
  since its factor has one degree of freedom less). The Bayes factor is a martingale for every
  fixed ``g > 0``, so a ``g`` fixed from the budget and the first round's duration, never from
  the differences, keeps the guarantee at every round; only where the interval is narrow
  moves. With ``g = 2`` the factor is at most ``(1 + n g)^((n-1)/2)`` (121 at 5 rounds), below
  ``1/alpha`` for any data when alpha is a plan's small share; tuned to 5 rounds at alpha =
  0.42%, ``g`` is about 22. Simulations in tests/unit/test_sequential_sim.py and
  tests/unit/test_budget_power.py check the A/A false-alarm rate (at most ``COMPARE_ALPHA``)
  under drift, heavy-tailed slow runs, bursts and order effects, and the power for a 3%
  change, and (the latter) the tuned sequences at every look and their power at 5-15 rounds.

All functions work on the log scale (``log(candidate) - log(baseline)`` per round); percentages
come from ``expm1``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from pgdyno.stats.levels import COMPARE_ALPHA, MAX_REPEATS

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "MIXTURE_G",
    "TUNED_ROUNDS",
    "half_width",
    "half_width_factors",
    "half_width_pct",
    "mixture_for_rounds",
    "rounds_for_precision",
    "rounds_to_detect",
]

# Prior variance of the standardised effect in the mixture. Larger g makes the sequence finite
# sooner (g=2: from 5 rounds; g=1: from 6) and a little wider later (1.59 vs 1.54 times the
# fixed t-interval at 20 rounds): g=2 suits runs of 5-30 rounds, where pgdyno's budgets land.
MIXTURE_G: Final = 2.0
# The rounds a budget may tune the mixture to: below 3 no g gives a useful interval at a plan's
# alpha (g in the hundreds); from 10-15 rounds the best g falls below MIXTURE_G, which is kept.
TUNED_ROUNDS: Final = (3, 100)
_LOG_G_RANGE: Final = (math.log(1e-3), math.log(1e4))  # where the narrowest g is sought
NORMAL_80: Final = 0.8416212335729143  # the 0.8 quantile of N(0, 1): power of rounds_to_detect


def half_width(n: int, sd: float, *, alpha: float = COMPARE_ALPHA, g: float = MIXTURE_G) -> float:
    """Half-width, on the scale of the values, of the confidence sequence after ``n`` values
    whose sample standard deviation is ``sd``; ``inf`` while it is still unbounded.

    With ``A = 1 + n g`` and ``t`` the one-sample t statistic for a hypothesised mean, the
    mixture Bayes factor is ``A^(-1/2) * ((1 + t^2/nu) / (1 + t^2/(A nu)))^(n/2)``, ``nu = n-1``.
    It stays below ``1/alpha`` exactly when ``t^2/nu < (R - 1) / (1 - R/A)`` with
    ``R = (sqrt(A)/alpha)^(2/n)``; unbounded when ``R >= A``.

    >>> half_width(4, 0.03), round(half_width(10, 0.03), 4), round(half_width(40, 0.03), 4)
    (inf, 0.0415, 0.0175)
    """
    if n < 2:
        return math.inf
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"sd must be a finite number >= 0, got {sd}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"need 0 < alpha < 1, got {alpha}")
    a = 1.0 + n * g
    r = math.exp((0.5 * math.log(a) - math.log(alpha)) * 2.0 / n)
    if r >= a:
        return math.inf
    t_squared_over_nu = (r - 1.0) / (1.0 - r / a)
    return sd * math.sqrt((n - 1) * t_squared_over_nu / n)


@lru_cache(maxsize=256)
def mixture_for_rounds(rounds: int, alpha: float = COMPARE_ALPHA) -> float:
    """The mixture variance ``g`` whose confidence sequence at level ``1 - alpha`` is narrowest
    after ``rounds`` rounds (clipped to ``TUNED_ROUNDS``), and never below ``MIXTURE_G``: the
    ``g`` to use when a budget says beforehand about how many rounds there will be. The width at
    ``n`` rounds is ``sd`` times a factor of ``n``, ``alpha`` and ``g`` only, so the best ``g``
    does not depend on the data. A ``g`` below 2 (budgets of more than 10-15 rounds) would
    narrow the interval there by 1-5% while it delays the first verdict a large change could
    have had (a smaller ``g`` stays unbounded for more rounds): MIXTURE_G is kept there.

    >>> round(mixture_for_rounds(5, 0.05 / 12), 1), round(mixture_for_rounds(10, 0.0125), 2)
    (22.0, 2.3)
    >>> mixture_for_rounds(15, 0.0125), mixture_for_rounds(1000, 0.0125)
    (2.0, 2.0)
    >>> g = mixture_for_rounds(5, 0.05 / 12)
    >>> half_width(5, 0.03, alpha=0.05 / 12), round(half_width(5, 0.03, alpha=0.05 / 12, g=g), 3)
    (inf, 0.141)
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"need 0 < alpha < 1, got {alpha}")
    from scipy.optimize import minimize_scalar  # on first use: SciPy is slow to import

    n = max(TUNED_ROUNDS[0], min(TUNED_ROUNDS[1], rounds))
    best = minimize_scalar(
        lambda log_g: min(half_width(n, 1.0, alpha=alpha, g=math.exp(log_g)), 1e9),
        bounds=_LOG_G_RANGE, method="bounded", options={"xatol": 1e-4},
    )  # fmt: skip
    return max(MIXTURE_G, float(math.exp(best.x)))


def half_width_factors(rounds: int, alpha: float, g: float = MIXTURE_G) -> np.ndarray:
    """``half_width(n, 1.0, alpha=alpha, g=g)`` for ``n = 1 .. rounds`` as an array (``inf``
    while unbounded): the simulations' vectorised form.

    >>> f = half_width_factors(10, 0.025)
    >>> bool(f[3] == half_width(4, 1.0)), round(float(f[9]), 12) == round(half_width(10, 1.0), 12)
    (True, True)
    """
    import numpy as np  # on first use, as SciPy

    n = np.arange(1, rounds + 1, dtype=float)
    a = 1.0 + n * g
    r = np.exp((0.5 * np.log(a) - math.log(alpha)) * 2.0 / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.sqrt((n - 1.0) * (r - 1.0) / (1.0 - r / a) / n)
    bounded: np.ndarray = np.where((r < a) & (n >= 2), factor, np.inf)
    return bounded


def half_width_pct(mean_log: float, half_log: float) -> float:
    """Half the width, in percentage points, of the interval ``exp(mean +- half) - 1``.

    >>> round(half_width_pct(0.0, 0.02), 3)
    2.0
    """
    if math.isinf(half_log):
        return math.inf
    return 50.0 * (math.exp(mean_log + half_log) - math.exp(mean_log - half_log))


def rounds_for_precision(
    sd: float, precision_pct: float, *, alpha: float = COMPARE_ALPHA, g: float = MIXTURE_G
) -> int:
    """Rounds after which the confidence sequence is at most ``precision_pct`` wide each way
    (around a change near zero), if the spread stays ``sd``; ``MAX_REPEATS`` means "that many
    or more".

    >>> rounds_for_precision(0.03, 2.0), rounds_for_precision(0.01, 2.0)
    (32, 7)
    """
    if not precision_pct > 0:
        raise ValueError(f"precision must be above 0%, got {precision_pct}")
    target = math.log1p(precision_pct / 100.0)
    return _smallest_n(lambda n: half_width(n, sd, alpha=alpha, g=g) <= target)


def rounds_to_detect(
    sd: float,
    effect_pct: float,
    *,
    alpha: float = COMPARE_ALPHA,
    g: float = MIXTURE_G,
    min_effect_pct: float = 0.0,
) -> int:
    """Rounds after which a true change of ``effect_pct`` is resolved (the sequence excludes 0
    and the change clears the ``min_effect_pct`` floor) with probability about 0.8, if the
    spread of the per-round differences is ``sd``: the smallest ``n`` with
    ``half_width(n) + z(0.8) * sd / sqrt(n) <= |log(1 + effect)|`` and
    ``z(0.8) * sd / sqrt(n) <= |log(1 + effect)| - |log(1 + floor)|``.

    >>> rounds_to_detect(0.03, 3.0), rounds_to_detect(0.03, 10.0)
    (23, 6)
    """
    if not (math.isfinite(effect_pct) and effect_pct > -100.0 and effect_pct != 0):
        raise ValueError(f"effect_pct must be a non-zero change above -100%, got {effect_pct}")
    effect = abs(math.log1p(effect_pct / 100.0))
    floor = abs(math.log1p(math.copysign(min_effect_pct, effect_pct) / 100.0))
    if effect <= floor:
        return MAX_REPEATS

    def enough(n: int) -> bool:
        spread = NORMAL_80 * sd / math.sqrt(n)
        return half_width(n, sd, alpha=alpha, g=g) + spread <= effect and spread <= effect - floor

    return _smallest_n(enough)


def _smallest_n(enough: Callable[[int], bool]) -> int:
    """The smallest n in [2, MAX_REPEATS] with ``enough(n)`` (monotone), else MAX_REPEATS."""
    if enough(2):
        return 2
    if not enough(MAX_REPEATS):
        return MAX_REPEATS
    low, high = 2, MAX_REPEATS  # enough(low) is False, enough(high) is True
    while high - low > 1:
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid
    return high
