"""The estimate at an adaptive stop, adjusted for the bias of stopping (pure).

Adaptive rounds stop as soon as the always-valid interval excludes zero, which tends to happen
at a look where the mean difference happens to be far out: the mean at such a stop is biased
away from zero (issue 33: a true +3% read +3.6% on average over the stops, +4.7% for stops
within 15 rounds). The interval is valid at any stop; the estimate is not.

pgdyno prints the **bias-adjusted estimate** of Whitehead (1986, "On the bias of maximum
likelihood estimation following a sequential test", Biometrika 73(3)): the value ``m~`` with
``m~ = m - b(m~)``, where ``m`` is the mean at the stop and ``b(mu)`` the bias of that mean
under the stopping rule when the true mean is ``mu``. ``b`` is computed numerically for the
design that ran, in units of the spread of a round's difference:

* the rounds stop at the first look ``k`` (from the second) whose t-mixture interval excludes
  zero, ``|S_k / k| > c_k`` (``c_k``: `pgdyno.stats.sequential.half_width` per unit of spread at
  the comparison's share of the error and mixture), or at the ``horizon`` (the rounds the budget
  holds), whatever the mean then;
* the joint law of the stopping look and the sum ``S`` is computed once per design under a zero
  mean (a direct convolution: no rounding noise in the far tails the reweighing below needs),
  by the classical recursion over looks (Armitage, McPherson and Rowe 1969, "Repeated
  significance tests on accumulating data", JRSS A 132): the sum's density on a grid, convolved
  with a round's normal law, the part beyond the boundary set aside as stopping there;
* a true mean ``mu`` reweighs that law by the likelihood ratio ``exp(mu S - k mu^2 / 2)`` (the
  stopping event depends on the path only), which gives ``E_mu[S_T / T]`` on a table of ``mu``;
  the adjusted estimate inverts it.

Approximations, stated: the spread is taken as known (the last look's, widened as the
interval is for dependence); the robust half of the verdict's interval, the 1% floor and the
stop on precision (which does not depend on the mean) are left out of the boundary. Over all
comparisons of a design the adjusted estimate is about unbiased (Whitehead 1986); among the
comparisons that stopped early it is still somewhat high, since being early selects large
means, and any estimate built on the stop alone keeps part of that
(tests/unit/test_stop_bias_sim.py measures both).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from pgdyno.stats.levels import COMPARE_ALPHA
from pgdyno.stats.sequential import MIXTURE_G, half_width_factors

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_HORIZON", "adjusted_mean", "expected_at_stop"]

GRID_STEP: Final = 0.1  # the sum's grid, in spreads of one round's difference
KERNEL_REACH: Final = 8.0  # a round's normal law, cut at this many spreads
SHIFT_REACH: Final = 3.0  # true means tabled, in spreads per round: +-3 (beyond: the edge's bias)
SHIFTS: Final = 241  # true means in the table
MAX_HORIZON: Final = 200  # designs longer than this are computed as this long (cost)


def adjusted_mean(
    mean: float,
    sd: float,
    *,
    horizon: int,
    alpha: float = COMPARE_ALPHA,
    g: float = MIXTURE_G,
) -> float:
    """Whitehead's bias-adjusted estimate for a mean per-round difference ``mean`` (spread
    ``sd``) at an adaptive stop of a design of at most ``horizon`` rounds, whose t-mixture is at
    ``alpha`` (its share: half the comparison's) with variance ``g``.

    >>> round(adjusted_mean(0.05, 0.04, horizon=40, alpha=0.0125), 4)  # 1.25 spreads a round
    0.0472
    >>> adjusted_mean(0.05, 0.0, horizon=40), adjusted_mean(-0.05, 0.04, horizon=40) < -0.04
    (0.05, True)
    """
    if not (sd > 0.0 and math.isfinite(sd) and math.isfinite(mean)):
        return mean
    import numpy as np  # on first use, as SciPy

    shifts, expected = expected_at_stop(max(2, min(horizon, MAX_HORIZON)), alpha, g)
    z = mean / sd
    bias = float(np.interp(z, expected, expected - shifts))  # constant beyond the table
    return sd * (z - bias)


@lru_cache(maxsize=32)
def expected_at_stop(horizon: int, alpha: float, g: float) -> tuple[np.ndarray, np.ndarray]:
    """The table of true means ``mu`` (per round, in spreads) and the expected mean at the stop
    ``E_mu[S_T / T]`` of the design (increasing in ``mu``).

    >>> mu, e = expected_at_stop(40, 0.0125, 2.0)
    >>> abs(round(float(e[120]), 6)), round(float(e[160] - mu[160]), 3)  # none at 0; at +1:
    (0.0, 0.074)
    """
    import numpy as np

    grid, stops = _stopping_law(horizon, alpha, g)
    shifts = np.linspace(-SHIFT_REACH, SHIFT_REACH, SHIFTS)
    looks = np.arange(1, horizon + 1, dtype=float)[:, None]
    with np.errstate(divide="ignore"):
        log_law = np.log(stops)
    expected = np.empty(SHIFTS)
    for i, mu in enumerate(shifts):
        exponent = log_law + mu * grid[None, :] - looks * mu * mu / 2.0
        weight = np.exp(exponent - exponent.max())
        expected[i] = float((weight * grid[None, :] / looks).sum() / weight.sum())
    return shifts, np.maximum.accumulate(expected)


def _stopping_law(horizon: int, alpha: float, g: float) -> tuple[np.ndarray, np.ndarray]:
    """The grid of sums and the probability that the rounds stop at look ``k`` (row ``k - 1``)
    with the sum in each grid cell, for a zero mean and a unit spread."""
    import numpy as np

    bounds = half_width_factors(horizon, alpha, g)  # c_k for k = 1 .. horizon
    looks = np.arange(1, horizon + 1)
    finite = np.isfinite(bounds)
    reach = float(np.max(np.where(finite, looks * bounds, 0.0))) + 2.0 * KERNEL_REACH
    reach = max(reach, KERNEL_REACH * math.sqrt(horizon))
    grid, steps = _symmetric(reach), _symmetric(KERNEL_REACH)
    kernel = np.exp(-(steps**2) / 2.0)
    kernel /= kernel.sum()
    density = np.exp(-(grid**2) / 2.0)
    density /= density.sum()
    stops = np.zeros((horizon, grid.size))
    for k in range(1, horizon + 1):
        if k > 1:
            density = np.convolve(density, kernel, mode="same")
        stop = np.abs(grid) > k * bounds[k - 1] if k >= 2 and finite[k - 1] else grid < -np.inf
        if k == horizon:
            stop = np.ones(grid.size, dtype=bool)
        stops[k - 1] = np.where(stop, density, 0.0)
        density = np.where(stop, 0.0, density)
    return grid, stops


def _symmetric(reach: float) -> np.ndarray:
    """Grid points ``GRID_STEP`` apart from ``-reach`` to ``reach``, exactly symmetric about 0."""
    import numpy as np

    half = GRID_STEP * np.arange(0, math.floor(reach / GRID_STEP) + 1)
    symmetric: np.ndarray = np.concatenate([-half[:0:-1], half])
    return symmetric
