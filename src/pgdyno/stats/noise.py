"""What this host can resolve: the figures of an A/A calibration (`pgdyno noise`), pure.

`pgdyno noise` runs one pgbench cell back to back and hands the runs here. From their start
times and TPS this module computes:

* the run-to-run spread: the standard deviation of log TPS, in % (for small spreads the same as
  the coefficient of variation of TPS);
* the spread the paired verdict sees: runs 1-2, 3-4, ... form rounds of a two-set comparison,
  and the standard deviation of their log differences is what `pgdyno.stats.sequential` needs.
  A two-set compare rotates the order each round (A B, then B A), so the difference of every
  second pair is taken the other way round: slow drift then shows as spread, as it would there;
* drift: the slope of log TPS against time, in % per minute, from ``scipy.stats.theilslopes``
  (the median of pairwise slopes: one slow run that escaped the interference flag does not
  tilt it, as it would a least-squares line), with its 95% interval;
* the machine time the adaptive method (``precision`` / ``budget``) needs here to resolve a
  change of 10%, 5% and 2% (`rounds_to_detect`, about 80% of the time) and to reach the default
  precision of +-2% (`rounds_for_precision`), times the seconds one round of two runs took,
  at the error share of the plan the forecast is for (``comparisons``: the plan-wide error split,
  `pgdyno.stats.family`, and the t-mixture's half of it, `pgdyno.stats.paired`);
* with each forecast, its 90% prediction interval, from a simulation of that procedure
  (`simulated_rounds`): comparisons whose per-round differences are the calibration's own,
  standardised, resampled with random signs (an A/A difference is symmetric; each simulated
  comparison first draws its own resample of the calibration, so its share of slow runs varies
  as the calibration's would) and scaled to each end of the spread's interval (`spread_ends`:
  the wider of the chi-square interval, ``(k - 1) s^2 / sigma^2`` having ``k - 1`` degrees of
  freedom for ``k`` normal differences, and the bootstrap one), shifted by the change, looked
  at after every round with the t-mixture at the plan's share until the verdict (or the
  precision). The interval runs from the 5th percentile of the rounds at the low end of the
  spread to the 95th at the high end: the uncertainty of the spread (two calibrations of a few
  minutes differ mostly by it: with 15 pairs the spread is known to about +-30%, the rounds,
  which go with its square, to a factor of two) and that of the stopping round itself, with
  the calibration's slow runs about as often as it saw them. The robust half of the real
  intersection can only bring a verdict sooner, so the upper end stays an upper bound where it
  decides (from about 12 rounds, under slow runs); tests/unit/test_noise_forecast.py measures
  the coverage.

Runs flagged for interference (other processes or the hypervisor took CPU time) are counted
and left out of every figure, as the verdicts leave them out; a pair with a flagged run forms
no round.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pgdyno.stats.dependence import MIN_PAIRS, RHO_CAP, RHO_Z
from pgdyno.stats.family import PLAN_ALPHA, ErrorControl
from pgdyno.stats.levels import MAX_REPEATS, MIN_EFFECT_PCT
from pgdyno.stats.sequential import (
    MIXTURE_G,
    half_width_factors,
    rounds_for_precision,
    rounds_to_detect,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DRIFT_METHOD",
    "EFFECTS_PCT",
    "NoiseReport",
    "NoiseRun",
    "Resolution",
    "about",
    "noise_report",
    "resolving_rounds",
    "simulated_rounds",
    "span",
    "spread_interval",
    "top_foreign",
]

EFFECTS_PCT: Final = (10.0, 5.0, 2.0)  # the changes the seeds measured range from 2% to 12%
PRECISION_PCT: Final = 2.0  # the adaptive method's default precision (experiment/rounds.py)
DRIFT_METHOD: Final = "scipy.stats.theilslopes"
TOP_COMMANDS: Final = 3
FORECAST_CONFIDENCE: Final = 0.90
PLAN_COMPARISONS: Final = 2  # the plan forecast for by default: two sets, one cell (TPS, p99)
FORECAST_TRIALS: Final = 400  # simulated comparisons per end of the spread's interval
FORECAST_SEED: Final = 33  # the forecast is reproducible: the same runs, the same interval
FIRST_HORIZON: Final = 32  # rounds simulated at first; doubled while some have not stopped


@dataclass(frozen=True, slots=True)
class NoiseRun:
    """One finished run of the calibration, in run order."""

    started_s: float  # epoch seconds
    tps: float
    flagged: bool = False  # interference: left out of the figures
    top: tuple[tuple[str, float], ...] = ()  # foreign commands and their % of CPU, if flagged


@dataclass(frozen=True, slots=True)
class Resolution:
    """Rounds (of two runs) and machine time the adaptive method needs for one target."""

    kind: Literal["change", "precision"]  # detect a change of pct, or reach +-pct
    pct: float
    rounds: int
    seconds: float
    capped: bool  # rounds reached MAX_REPEATS: "that many or more"
    # The 90% interval of the forecast, from that of the paired spread (FORECAST_CONFIDENCE).
    rounds_low: int | None = None
    rounds_high: int | None = None
    seconds_low: float | None = None
    seconds_high: float | None = None

    @property
    def target(self) -> str:
        """
        >>> Resolution("change", 5.0, 9, 90.0, False).target
        '5%'
        >>> Resolution("precision", 2.0, 9, 90.0, False).target
        '+-2%'
        """
        return f"{self.pct:g}%" if self.kind == "change" else f"+-{self.pct:g}%"

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, **asdict(self)}


@dataclass(frozen=True, slots=True)
class NoiseReport:
    runs: int  # runs with a TPS, flagged included
    flagged: int
    used: int  # runs behind the figures
    tps_median: float | None
    cv_pct: float | None  # sd of log TPS x 100
    cv_all_pct: float | None  # the same with the flagged runs: what interference did
    pairs: int  # rounds of two clean runs
    pair_sd_pct: float | None  # sd of the paired log differences x 100
    drift_pct_per_min: float | None
    drift_low_pct: float | None  # 95% interval of the slope
    drift_high_pct: float | None
    run_seconds: float  # mean wall time per run, overhead included
    round_seconds: float  # two runs
    resolve: tuple[Resolution, ...]  # one per EFFECTS_PCT, when there is a pair spread
    precision: Resolution | None
    top_foreign: tuple[tuple[str, float, int], ...]  # command, highest % of CPU, runs
    drift_method: str = DRIFT_METHOD

    @property
    def conclusion(self) -> str:
        return conclusion(self)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["resolve"] = [r.as_dict() for r in self.resolve]
        out["precision"] = self.precision.as_dict() if self.precision else None
        out["top_foreign"] = [
            {"command": c, "cpu_pct": p, "runs": n} for c, p, n in self.top_foreign
        ]
        out["conclusion"] = self.conclusion
        return out


def noise_report(
    runs: Sequence[NoiseRun],
    run_seconds: float,
    *,
    effects_pct: Sequence[float] = EFFECTS_PCT,
    precision_pct: float = PRECISION_PCT,
    comparisons: int = PLAN_COMPARISONS,
) -> NoiseReport:
    """The calibration's figures from its runs (in run order) and the mean seconds per run;
    the forecasts are for a plan of ``comparisons`` comparisons (its error split).

    >>> runs = [NoiseRun(60.0 * i, tps) for i, tps in enumerate([100, 103, 98, 101, 99, 102])]
    >>> r = noise_report(runs, 8.0)
    >>> r.used, r.pairs, round(r.cv_pct, 2), round(r.pair_sd_pct, 2), r.round_seconds
    (6, 3, 1.86, 3.46, 16.0)
    >>> [(x.target, x.rounds) for x in r.resolve]
    [('10%', 7), ('5%', 13), ('2%', 64)]
    >>> print(r.conclusion)  # doctest: +NORMALIZE_WHITESPACE
    this host resolves 10% in about 2 min (80 s to 18 min), 5% in about 3 min (80 s to 67 min);
    2% needs about 17 min (80 s to more than 4.4 h)
    """
    if not (math.isfinite(run_seconds) and run_seconds > 0):
        raise ValueError(f"run_seconds must be a positive number, got {run_seconds}")
    for run in runs:
        if not (math.isfinite(run.tps) and run.tps > 0 and math.isfinite(run.started_s)):
            raise ValueError(f"a run needs a finite start and a TPS above 0, got {run}")
    clean = [r for r in runs if not r.flagged]
    logs = [math.log(r.tps) for r in clean]
    diffs = paired_differences(runs)
    pair_sd = statistics.stdev(diffs) if len(diffs) >= 2 else None
    slope = drift(clean)
    round_s = 2.0 * run_seconds
    resolve: tuple[Resolution, ...] = ()
    precision = None
    if pair_sd is not None:
        spread = Spread(pair_sd, spread_ends(diffs), tuple(diffs))
        alpha = mixture_alpha(comparisons)
        resolve = tuple(_forecast("change", e, spread, alpha, round_s) for e in effects_pct)
        precision = _forecast("precision", precision_pct, spread, alpha, round_s)
    return NoiseReport(
        runs=len(runs),
        flagged=len(runs) - len(clean),
        used=len(clean),
        tps_median=statistics.median(r.tps for r in clean) if clean else None,
        cv_pct=_sd_pct(logs),
        cv_all_pct=_sd_pct([math.log(r.tps) for r in runs]),
        pairs=len(diffs),
        pair_sd_pct=None if pair_sd is None else 100.0 * pair_sd,
        drift_pct_per_min=slope[0] if slope else None,
        drift_low_pct=slope[1] if slope else None,
        drift_high_pct=slope[2] if slope else None,
        run_seconds=run_seconds,
        round_seconds=round_s,
        resolve=resolve,
        precision=precision,
        top_foreign=top_foreign(runs),
    )


def _sd_pct(values: Sequence[float]) -> float | None:
    return 100.0 * statistics.stdev(values) if len(values) >= 2 else None


@dataclass(frozen=True, slots=True)
class Spread:
    """The calibration's paired differences, their sd and the interval of the sd."""

    sd: float
    ends: tuple[float, float]
    diffs: tuple[float, ...]


def mixture_alpha(comparisons: int) -> float:
    """The t-mixture's error in a plan of ``comparisons``: its half
    (`pgdyno.stats.paired.sequential_interval`) of a TPS comparison's share, half of the
    comparisons being on p99 as in a plan of sets (`pgdyno.stats.family`; a ladder's steps add
    TPS comparisons, so its forecast is a little short).

    >>> round(mixture_alpha(2), 6), round(mixture_alpha(6), 6), round(mixture_alpha(1), 6)
    (0.02, 0.006667, 0.025)
    """
    return ErrorControl(comparisons, PLAN_ALPHA, p99=comparisons // 2).alpha / 2.0


def _forecast(
    kind: Literal["change", "precision"], pct: float, spread: Spread, alpha: float, round_s: float
) -> Resolution:
    """The rounds at the measured spread (the closed form, about 80% of the time for a
    change), and the prediction interval of the simulated procedure around them."""
    if kind == "change":
        mid = rounds_to_detect(spread.sd, pct, alpha=alpha, min_effect_pct=MIN_EFFECT_PCT)
    else:
        mid = rounds_for_precision(spread.sd, pct, alpha=alpha)
    tail = (1.0 - FORECAST_CONFIDENCE) / 2.0
    shape = standardised(spread.diffs)
    low_end, high_end = (simulated_rounds(shape, sd, kind, pct, alpha) for sd in spread.ends)
    low = min(mid, _quantile(low_end, tail))
    high = max(mid, _quantile(high_end, 1.0 - tail))
    return Resolution(
        kind, pct, mid, mid * round_s, mid >= MAX_REPEATS, low, high, low * round_s,
        high * round_s,
    )  # fmt: skip


def _quantile(rounds: np.ndarray, q: float) -> int:
    import numpy as np

    return int(np.quantile(rounds, q, method="inverted_cdf"))


def standardised(diffs: Sequence[float]) -> np.ndarray:
    """The differences centred and divided by their sd: the shape the simulation resamples
    (zeros when they do not vary).

    >>> [float(x) for x in standardised([1.0, 3.0])]
    [-0.7071067811865475, 0.7071067811865475]
    """
    import numpy as np

    values = np.asarray(diffs, dtype=float)
    sd = float(values.std(ddof=1)) if len(values) >= 2 else 0.0
    centred: np.ndarray = values - values.mean()
    return centred / sd if sd > 0 else np.zeros_like(values)


def simulated_rounds(
    shape: np.ndarray,
    sd: float,
    kind: Literal["change", "precision"],
    pct: float,
    alpha: float,
    *,
    trials: int = FORECAST_TRIALS,
    seed: int = FORECAST_SEED,
) -> np.ndarray:
    """Rounds each of ``trials`` simulated comparisons takes to its verdict on a change of
    ``pct`` (kind "change") or to an interval within +-``pct`` (kind "precision"), looking
    after every round with the t-mixture (``MIXTURE_G``) at ``alpha``: per-round differences
    drawn from ``shape`` with random signs, times ``sd``, plus the change; ``MAX_REPEATS`` for
    those that do not get there within it.

    >>> rounds = simulated_rounds(standardised([0.01, -0.02, 0.03, -0.01]), 0.03, "change",
    ...                           10.0, 0.0125)
    >>> 5 <= int(rounds.min()) <= int(rounds.max()) < 40
    True
    """
    import numpy as np

    shift = math.log1p(pct / 100.0) if kind == "change" else 0.0
    horizon = FIRST_HORIZON
    while True:
        rng = np.random.default_rng(seed)
        # Each comparison draws from its own resample of the calibration (its own share of
        # slow runs), then its rounds from that resample, with random signs.
        population = rng.choice(shape, size=(trials, len(shape)))
        picks = rng.integers(len(shape), size=(trials, horizon))
        signs = rng.choice([-1.0, 1.0], (trials, horizon))
        draws = np.take_along_axis(population, picks, axis=1) * signs
        stops = resolving_rounds(shift + sd * draws, kind, pct, alpha)
        if bool((stops <= horizon).all()) or horizon >= MAX_REPEATS:
            capped: np.ndarray = np.minimum(stops, MAX_REPEATS)
            return capped
        horizon = min(MAX_REPEATS, 2 * horizon)


def resolving_rounds(
    diffs: np.ndarray,
    kind: Literal["change", "precision"],
    pct: float,
    alpha: float,
    g: float = MIXTURE_G,
) -> np.ndarray:
    """Per row of per-round differences, the first round (from 2) whose always-valid interval
    (the t-mixture at ``alpha``, every look widened for rounds alike as
    `pgdyno.stats.dependence.inflation` says, intersected over the looks) resolves: a verdict
    on a change of ``pct`` (kind "change"), or the last look within +-``pct`` (kind
    "precision"); the number of columns + 1 when none does."""
    import numpy as np

    horizon = diffs.shape[1]
    n = np.arange(1, horizon + 1, dtype=float)
    mean = np.cumsum(diffs, axis=1) / n
    squares = np.cumsum((diffs - mean[:, :1]) ** 2, axis=1)  # around the first: no cancellation
    var = np.maximum(squares - n * (mean - mean[:, :1]) ** 2, 0.0) / np.maximum(n - 1.0, 1.0)
    with np.errstate(invalid="ignore"):  # inf x 0 while unbounded: no verdict there
        half = half_width_factors(horizon, alpha, g) * np.sqrt(var)
    half = np.where(np.isnan(half), np.inf, half)
    factor = _widening(diffs - diffs[:, :1], n)
    if kind == "precision":
        h = half * factor
        done = 50.0 * (np.exp(mean + h) - np.exp(mean - h)) <= pct
    else:
        done = _decided(mean, half, factor, pct)
    done &= n >= 2
    stops: np.ndarray = np.where(done.any(axis=1), done.argmax(axis=1) + 1, horizon + 1)
    return stops


def _decided(mean: np.ndarray, half: np.ndarray, factor: np.ndarray, pct: float) -> np.ndarray:
    """Whether the intersection over the looks so far of ``mean -+ factor * half`` (every look
    widened by the last look's factor) gives the verdict on a change of sign ``pct``
    (`pgdyno.stats.verdict.decide`: beyond 0, and reaching the floor), per row and look. For
    a better: some look's low end above 0, ``f < max_j mean_j / h_j``, and every look's high
    end at the floor or above, ``f >= max_j (floor - mean_j) / h_j``: running maxima."""
    import numpy as np

    sign = 1.0 if pct > 0 else -1.0
    floor = math.log1p(MIN_EFFECT_PCT / 100.0) if pct > 0 else -math.log1p(-MIN_EFFECT_PCT / 100.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        beyond = np.maximum.accumulate(np.nan_to_num(sign * mean / half, nan=0.0), axis=1)
        reach = np.maximum.accumulate(np.nan_to_num((floor - sign * mean) / half, nan=0.0), axis=1)
    decided: np.ndarray = (factor < beyond) & (factor >= reach)
    return decided


def _widening(diffs: np.ndarray, n: np.ndarray) -> np.ndarray:
    """`pgdyno.stats.dependence.inflation` of every prefix of every row of ``diffs`` (centred:
    the lag-1 autocorrelation does not depend on the level)."""
    import numpy as np

    total = np.cumsum(diffs, axis=1)
    mean = total / n
    square = np.cumsum(diffs**2, axis=1) - n * mean**2
    pairs = np.zeros_like(diffs)
    pairs[:, 1:] = np.cumsum(diffs[:, 1:] * diffs[:, :-1], axis=1)
    before = np.zeros_like(diffs)  # the sum of the first k - 1 values
    before[:, 1:] = total[:, :-1]
    lagged = pairs - mean * ((total - diffs[:, :1]) + before) + (n - 1.0) * mean**2
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(square > 1e-300, lagged / square, np.nan)
    rho = np.nan_to_num(rho, nan=-1.0)
    r = rho + (1.0 + 3.0 * rho) / n  # dependence.corrected
    clear = rho > RHO_Z / np.sqrt(n)
    r = np.minimum(RHO_CAP, np.where(clear, np.maximum(r, rho + 1.0 / np.sqrt(n)), r))
    r = np.where((n >= MIN_PAIRS) & (rho > -1.0), r, 0.0)
    r = np.maximum(r, 0.0)
    widening: np.ndarray = np.sqrt((1.0 + r) / (1.0 - r))
    return widening


def spread_interval(
    sd: float, k: int, confidence: float = FORECAST_CONFIDENCE
) -> tuple[float, float]:
    """The ``confidence`` interval of the standard deviation of normal values, from the sample
    sd of ``k`` of them (chi-square with ``k - 1`` degrees of freedom).

    >>> [round(x, 4) for x in spread_interval(0.03, 16)]
    [0.0232, 0.0431]
    """
    if k < 2:
        return sd, sd
    from scipy.stats import chi2  # on first use, as theilslopes

    tail = (1.0 - confidence) / 2.0
    df = k - 1
    low = sd * math.sqrt(df / float(chi2.ppf(1.0 - tail, df)))
    high = sd * math.sqrt(df / float(chi2.ppf(tail, df)))
    return low, high


def spread_ends(
    diffs: Sequence[float], confidence: float = FORECAST_CONFIDENCE
) -> tuple[float, float]:
    """The ends of the spread's interval the forecasts simulate at: the wider of the chi-square
    interval (exact for normal differences) and the percentile bootstrap interval of the sample
    sd (Efron and Tibshirani 1993, "An Introduction to the Bootstrap"), which slow runs widen as
    they widen the sd's own spread; ``FORECAST_TRIALS`` resamples, seeded.

    >>> low, high = spread_ends([0.01, -0.02, 0.03, -0.01, 0.0, 0.02, -0.03, 0.01])
    >>> bool(low < 0.021 < high)
    True
    """
    import numpy as np

    values = np.asarray(diffs, dtype=float)
    sd = float(values.std(ddof=1))
    chi_low, chi_high = spread_interval(sd, len(values), confidence)
    rng = np.random.default_rng(FORECAST_SEED)
    resampled = rng.choice(values, size=(FORECAST_TRIALS, len(values))).std(axis=1, ddof=1)
    tail = (1.0 - confidence) / 2.0
    boot_low, boot_high = np.quantile(resampled, [tail, 1.0 - tail])
    return min(chi_low, float(boot_low)), max(chi_high, float(boot_high))


def paired_differences(runs: Sequence[NoiseRun]) -> list[float]:
    """Log differences of runs 1-2, 3-4, ... as a rotated two-set compare sees them (the
    second of every other pair first); a pair with a flagged run, or an odd last run, is left out.

    >>> runs = [NoiseRun(0, 100), NoiseRun(1, 110), NoiseRun(2, 100), NoiseRun(3, 110)]
    >>> [round(d, 4) for d in paired_differences(runs)]
    [0.0953, -0.0953]
    >>> len(paired_differences([*runs[:2], NoiseRun(2, 100, flagged=True), runs[3]]))
    1
    """
    diffs = []
    for k in range(len(runs) // 2):
        first, second = runs[2 * k], runs[2 * k + 1]
        if first.flagged or second.flagged:
            continue
        diff = math.log(second.tps) - math.log(first.tps)
        diffs.append(diff if k % 2 == 0 else -diff)
    return diffs


def drift(runs: Sequence[NoiseRun]) -> tuple[float, float, float] | None:
    """Drift of TPS in % per minute with its 95% interval (Theil-Sen slope of log TPS against
    minutes); None with fewer than 3 runs or all started at once.

    >>> [round(x, 3) for x in drift([NoiseRun(60.0 * i, 100 * 0.99**i) for i in range(6)])]
    [-1.0, -1.0, -1.0]
    """
    if len(runs) < 3 or len({r.started_s for r in runs}) < 2:
        return None
    from scipy.stats import theilslopes  # on first use: SciPy takes about 0.5 s to import

    t0 = runs[0].started_s
    minutes = [(r.started_s - t0) / 60.0 for r in runs]
    fit = theilslopes([math.log(r.tps) for r in runs], minutes, alpha=0.95)
    pct = [100.0 * math.expm1(float(v)) for v in (fit.slope, fit.low_slope, fit.high_slope)]
    return pct[0], pct[1], pct[2]


def top_foreign(
    runs: Sequence[NoiseRun], n: int = TOP_COMMANDS
) -> tuple[tuple[str, float, int], ...]:
    """The foreign commands seen in flagged runs: the highest % of CPU each took in a run and
    in how many runs it was named, the busiest first.

    >>> top_foreign([NoiseRun(0, 1, True, (("stress", 90.0), ("cc1", 5.0))),
    ...              NoiseRun(1, 1, True, (("stress", 95.0),))])
    (('stress', 95.0, 2), ('cc1', 5.0, 1))
    """
    highest: dict[str, float] = {}
    seen: dict[str, int] = {}
    for run in runs:
        for command, pct in run.top:
            highest[command] = max(highest.get(command, 0.0), pct)
            seen[command] = seen.get(command, 0) + 1
    ranked = sorted(highest, key=lambda c: (-highest[c], c))[:n]
    return tuple((c, highest[c], seen[c]) for c in ranked)


def about(seconds: float) -> str:
    """A machine time as a person says it.

    >>> about(42), about(250), about(2400), about(5400), about(400000)
    ('40 s', '4 min', '40 min', '1.5 h', '111 h')
    """
    if seconds < 90:
        return f"{max(10, round(seconds, -1)):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    hours = seconds / 3600
    return f"{hours:.1f} h" if hours < 10 else f"{hours:.0f} h"


def _phrase(row: Resolution) -> str:
    text = f"{'more than' if row.capped else 'about'} {about(row.seconds)}"
    if not row.capped and row.seconds_low is not None:
        text += f" ({span(row)})"
    return text


def span(row: Resolution) -> str:
    """The forecast's interval in machine time, as a person says it.

    >>> span(Resolution("change", 5.0, 18, 288.0, False, 9, 40, 144.0, 640.0))
    '2 min to 11 min'
    >>> span(Resolution("change", 2.0, 258, 4128.0, False, 80, 1000, 1280.0, 16000.0))
    '21 min to more than 4.4 h'
    """
    if row.seconds_low is None or row.seconds_high is None:
        return "-"
    more = "more than " if row.rounds_high is not None and row.rounds_high >= MAX_REPEATS else ""
    return f"{about(row.seconds_low)} to {more}{about(row.seconds_high)}"


def conclusion(report: NoiseReport) -> str:
    """One line: which changes this host resolves, and in how much machine time."""
    if not report.resolve:
        return (
            f"too few clean runs to tell ({report.used} of {report.runs}, {report.pairs} clean "
            "pairs): quiet the host or give a longer --budget."
        )
    *easier, hardest = report.resolve
    text = f"{hardest.target} needs {_phrase(hardest)}"
    if easier:
        parts = ", ".join(f"{row.target} in {_phrase(row)}" for row in easier)
        text = f"this host resolves {parts}; {text}"
    if report.flagged:
        text += (
            f" ({report.flagged} of {report.runs} runs disturbed by other processes: quiet the "
            "host for better figures)"
        )
    return text
