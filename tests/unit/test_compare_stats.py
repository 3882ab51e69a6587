"""Repeat statistics and verdicts: t quantiles, cell summaries, A/A and power by simulation."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from pgdyno.stats.ladder import ladder
from pgdyno.stats.levels import MAX_REPEATS, NOISY_CV_PCT
from pgdyno.stats.planning import repeats_needed
from pgdyno.stats.student_t import t_cdf, t_quantile
from pgdyno.stats.summary import describe
from pgdyno.stats.verdict import BETTER, SAME, WORSE, compare

# --- Noise model of pgbench repeats ------------------------------------------------------------
# Multiplicative (lognormal) noise with a 3% coefficient of variation, plus, in 10% of the runs,
# a slow run 5-10% worse (another tenant on a shared machine): skewed, not normal.
CV = 0.03
SLOW_SHARE = 0.10
SIGMA = math.sqrt(math.log1p(CV * CV))


def run_figure(rng: random.Random, center: float, *, higher_is_better: bool = True) -> float:
    v = center * math.exp(rng.gauss(-SIGMA * SIGMA / 2, SIGMA))
    if rng.random() < SLOW_SHARE:
        hit = rng.uniform(0.05, 0.10)
        v = v * (1 - hit) if higher_is_better else v / (1 - hit)
    return v


def repeats(
    rng: random.Random, center: float, n: int, *, higher_is_better: bool = True
) -> list[float]:
    return [run_figure(rng, center, higher_is_better=higher_is_better) for _ in range(n)]


def noise_sd_log() -> float:
    """The log-sd of the noise model, measured on a large sample (what the tool would see)."""
    rng = random.Random(7)
    return statistics.stdev(math.log(run_figure(rng, 1.0)) for _ in range(200_000))


# --- t quantiles -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "table"),
    [(0.975, 3, 3.182), (0.975, 4, 2.776), (0.975, 10, 2.228), (0.975, 30, 2.042),
     (0.95, 5, 2.015), (0.995, 3, 5.841), (0.9, 20, 1.325), (0.975, 120, 1.980)],
)  # fmt: skip
def test_t_quantile_matches_tables(p: float, df: float, table: float) -> None:
    assert t_quantile(p, df) == pytest.approx(table, rel=5e-4)
    assert t_quantile(1 - p, df) == pytest.approx(-table, rel=5e-4)


def test_t_quantile_exact_for_one_and_two_degrees_of_freedom() -> None:
    # df=1 is the Cauchy distribution: tan(pi (p - 1/2)); df=2: (2p-1) / sqrt(2p(1-p)).
    assert t_quantile(0.975, 1) == pytest.approx(12.7062047, rel=1e-8)
    assert t_quantile(0.75, 1) == pytest.approx(1.0, rel=1e-12)
    assert t_quantile(0.975, 2) == pytest.approx(4.3026527, rel=1e-8)
    assert t_quantile(0.995, 2) == pytest.approx(9.9248432, rel=1e-8)
    assert t_quantile(0.5, 2) == 0.0


def test_t_quantile_non_integer_df_is_consistent() -> None:
    # Welch gives real degrees of freedom: the quantile falls with df and inverts the CDF.
    dfs = [1.0, 1.3, 2.0, 2.5, 3.0, 4.7, 9.2, 30.0, 999.0, 1000.0, 1e6]
    qs = [t_quantile(0.975, df) for df in dfs]
    assert qs == sorted(qs, reverse=True)
    assert qs[-1] == pytest.approx(1.959964, rel=1e-5)
    for df in dfs[:-1]:
        for p in (0.6, 0.9, 0.975, 0.9995):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-12)
    # Continuous at the integer closed forms.
    assert t_quantile(0.975, 1 + 1e-9) == pytest.approx(t_quantile(0.975, 1), rel=1e-6)
    assert t_quantile(0.975, 2 + 1e-9) == pytest.approx(t_quantile(0.975, 2), rel=1e-6)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.5, 0), (0.5, -1), (0.5, math.inf)])
def test_t_quantile_rejects_bad_arguments(p: float, df: float) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, df)


# --- describe ----------------------------------------------------------------------------------


def test_describe_by_hand() -> None:
    # 9, 10, 11, 14: mean 44/4 = 11, median (10+11)/2 = 10.5,
    # squared deviations 4 + 1 + 0 + 9 = 14, variance 14/3, sd = 2.1602469,
    # cv = 2.1602469 / 11 = 19.638608%, se = sd / 2 = 1.0801234,
    # t(0.975, 3) = 3.1824463, half width 3.4374350: CI [7.5625650, 14.4374350].
    s = describe([9.0, 10.0, 11.0, 14.0])
    assert (s.n, s.median, s.mean) == (4, 10.5, 11.0)
    assert s.sd == pytest.approx(2.1602469, rel=1e-7)
    assert s.cv_pct == pytest.approx(19.638608, rel=1e-6)
    assert s.ci_low == pytest.approx(7.5625650, rel=1e-7)
    assert s.ci_high == pytest.approx(14.4374350, rel=1e-7)


def test_describe_single_value_and_errors() -> None:
    s = describe([42.0])
    assert (s.n, s.median, s.mean) == (1, 42.0, 42.0)
    assert s.sd is s.cv_pct is s.ci_low is s.ci_high is None
    with pytest.raises(ValueError, match="no values"):
        describe([])
    with pytest.raises(ValueError, match="finite"):
        describe([1.0, math.nan])


# --- compare: simulated properties ---------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 5, 10])
def test_aa_comparison_rarely_finds_a_difference(n: int) -> None:
    rng = random.Random(20240601 + n)
    trials = 2000
    same = sum(
        compare(repeats(rng, 10_000, n), repeats(rng, 10_000, n)).verdict == SAME
        for _ in range(trials)
    )
    assert same / trials >= 0.95


def test_recommended_repeats_detect_a_true_five_percent_gain() -> None:
    n = repeats_needed(noise_sd_log(), 5.0)
    assert 5 <= n <= 30  # sanity: a handful to a few dozen repeats, not 2 nor 1000
    rng = random.Random(99)
    trials = 1000
    better = sum(
        compare(repeats(rng, 10_000, n), repeats(rng, 10_500, n)).verdict == BETTER
        for _ in range(trials)
    )
    assert better / trials >= 0.80


def test_recommended_repeats_detect_a_five_percent_latency_drop() -> None:
    n = repeats_needed(noise_sd_log(), -5.0)
    rng = random.Random(100)
    trials = 1000
    verdicts = [
        compare(
            repeats(rng, 2.0, n, higher_is_better=False),
            repeats(rng, 1.9, n, higher_is_better=False),
            higher_is_better=False,
        ).verdict
        for _ in range(trials)
    ]
    assert verdicts.count(BETTER) / trials >= 0.80
    assert WORSE not in verdicts


# --- compare: direct cases -----------------------------------------------------------------------


def test_compare_change_is_the_ratio_of_geometric_means() -> None:
    c = compare([100.0, 400.0], [200.0, 800.0])  # geometric means 200 and 400
    assert c.change_pct == pytest.approx(100.0)
    # The interval is symmetric on the log scale around log 2, and far too wide to tell.
    assert c.ci_low_pct is not None and c.ci_high_pct is not None
    lo, hi = math.log1p(c.ci_low_pct / 100), math.log1p(c.ci_high_pct / 100)
    assert (lo + hi) / 2 == pytest.approx(math.log(2))
    # By hand: log sd of each side ln(4)/sqrt(2), se = ln(4)/sqrt(2), df = 2, and the
    # 97.5% interval's t(0.9875, 2) = 6.2053...
    assert (hi - lo) / 2 == pytest.approx(t_quantile(0.9875, 2) * math.log(4) / math.sqrt(2))
    assert t_quantile(0.9875, 2) == pytest.approx(6.2053, abs=1e-3)
    assert c.verdict == SAME


def test_latency_decrease_is_better_and_increase_worse() -> None:
    base = [2.00, 2.02, 1.98, 2.01, 1.99]
    lower = [v * 0.95 for v in base]
    assert compare(base, lower, higher_is_better=False).verdict == BETTER
    assert compare(base, lower).verdict == WORSE
    assert compare(lower, base, higher_is_better=False).verdict == WORSE


def test_small_change_below_the_floor_is_same() -> None:
    base = [1000.0, 1000.5, 999.5, 1000.2, 999.8]
    cand = [v * 1.005 for v in base]  # +0.5%, very clearly outside noise
    c = compare(base, cand)
    assert c.ci_low_pct is not None and c.ci_low_pct > 0
    assert c.verdict == SAME
    assert c.repeats_needed is None  # no number of repeats makes 0.5% clear a 1% floor
    assert compare(base, cand, min_effect_pct=0.0).verdict == BETTER


def test_single_repeat_side_cannot_tell() -> None:
    c = compare([100.0], [150.0, 151.0, 149.0])
    assert c.verdict == SAME
    assert c.ci_low_pct is None and c.ci_high_pct is None
    assert c.change_pct == pytest.approx(100 * (math.exp(statistics.fmean(
        [math.log(150.0), math.log(151.0), math.log(149.0)])) / 100 - 1))  # fmt: skip
    assert c.repeats_needed == 2  # a 50% change against a 0.7% spread needs no more
    c = compare([100.0], [150.0])
    assert (c.verdict, c.ci_low_pct, c.ci_high_pct, c.repeats_needed) == (SAME, None, None, None)


def test_no_spread_gives_a_point_interval_and_no_plan() -> None:
    c = compare([100.0, 100.0, 100.0], [110.0, 110.0, 110.0])
    assert c.ci_low_pct == pytest.approx(10.0) and c.ci_high_pct == pytest.approx(10.0)
    assert c.verdict == BETTER
    assert c.repeats_needed is None
    c = compare([100.0, 100.0], [100.0, 100.0])
    assert (c.change_pct, c.verdict, c.repeats_needed) == (0.0, SAME, None)


def test_noisy_flag() -> None:
    steady = [1000.0, 1010.0, 990.0, 1005.0]
    assert not compare(steady, steady).noisy
    jumpy = [1000.0, 1150.0, 880.0, 1060.0]
    cv = describe(jumpy).cv_pct
    assert cv is not None and cv > NOISY_CV_PCT
    assert compare(steady, jumpy).noisy
    assert compare(jumpy, steady).noisy
    assert not compare([1000.0], [1500.0]).noisy  # no spread to judge with one repeat


def test_repeats_needed_reported_for_an_unresolved_change() -> None:
    rng = random.Random(5)
    base = repeats(rng, 10_000, 3)
    cand = [v * 1.03 for v in repeats(rng, 10_000, 3)]
    c = compare(base, cand)
    assert c.repeats_needed is not None and c.repeats_needed >= 2


@pytest.mark.parametrize("bad", [0.0, -5.0])
def test_non_positive_values_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match=r"positive.*logarithms"):
        compare([100.0, bad], [100.0, 101.0])
    with pytest.raises(ValueError, match="candidate"):
        compare([100.0, 101.0], [bad])
    with pytest.raises(ValueError, match="positive"):
        ladder([("a", [1.0]), ("b", [bad])])


def test_empty_and_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="no values"):
        compare([], [1.0])
    with pytest.raises(ValueError, match="min_effect_pct"):
        compare([1.0], [1.0], min_effect_pct=-1)
    with pytest.raises(ValueError, match="no steps"):
        ladder([])


# --- repeats_needed ------------------------------------------------------------------------------


def test_repeats_needed_grows_with_noise_and_shrinks_with_effect() -> None:
    assert repeats_needed(0.0, 5.0) == 2
    assert repeats_needed(0.01, 20.0) == 2
    by_noise = [repeats_needed(sd, 5.0) for sd in (0.01, 0.02, 0.03, 0.05)]
    assert by_noise == sorted(by_noise) and by_noise[0] < by_noise[-1]
    by_effect = [repeats_needed(0.03, e) for e in (2.0, 3.0, 5.0, 10.0)]
    assert by_effect == sorted(by_effect, reverse=True) and by_effect[0] > by_effect[-1]
    assert repeats_needed(0.03, 1.01) == MAX_REPEATS  # just above the floor: hopeless


def test_repeats_needed_is_the_smallest_n_meeting_the_t_criterion() -> None:
    sd, effect = 0.03, 5.0
    n = repeats_needed(sd, effect, min_effect_pct=0.0)

    def width(k: int) -> float:
        return (t_quantile(0.9875, 2 * k - 2) + t_quantile(0.9, 2 * k - 2)) * sd * math.sqrt(2 / k)

    assert width(n) <= math.log(1.05) < width(n - 1)


def test_repeats_needed_accounts_for_the_floor() -> None:
    # Near the floor, clearing it 90% of the time takes more repeats than excluding zero.
    assert repeats_needed(0.01, 1.5) > repeats_needed(0.01, 1.5, min_effect_pct=0.0)
    # Far from it, the floor changes nothing.
    assert repeats_needed(0.03, 10.0) == repeats_needed(0.03, 10.0, min_effect_pct=0.0)
    with pytest.raises(ValueError, match="floor"):
        repeats_needed(0.03, 0.8)
    with pytest.raises(ValueError, match="non-zero"):
        repeats_needed(0.03, 0.0, min_effect_pct=0.0)
    with pytest.raises(ValueError):
        repeats_needed(-0.1, 5.0)


# --- ladder --------------------------------------------------------------------------------------


def test_ladder_levels_gains_and_total() -> None:
    rng = random.Random(11)

    def step(center: float) -> list[float]:
        return [center * math.exp(rng.gauss(0, 0.005)) for _ in range(5)]

    lad = ladder(
        [("default", step(100)), ("shared_buffers", step(120)), ("huge pages", step(145)),
         ("wal_compression", step(145))]
    )  # fmt: skip
    assert [s.name for s in lad.steps] == [
        "default", "shared_buffers", "huge pages", "wal_compression"
    ]  # fmt: skip
    first, *rest = lad.steps
    assert first.level_pct == 100.0
    assert first.step_gain is None and first.cumulative is None
    assert [s.level_pct for s in rest] == pytest.approx([120, 145, 145], rel=0.02)
    gains = [s.step_gain for s in rest]
    assert [g.verdict for g in gains if g is not None] == [BETTER, BETTER, SAME]
    assert gains[0] is not None and gains[0].change_pct == pytest.approx(20, abs=1.5)
    assert gains[1] is not None and gains[1].change_pct == pytest.approx(20.8, abs=1.5)
    assert lad.total is not None
    assert lad.total.verdict == BETTER
    assert lad.total.change_pct == pytest.approx(45, abs=2)
    assert lad.total == rest[-1].cumulative


def test_ladder_for_latency_and_single_step() -> None:
    lad = ladder([("a", [10.0, 10.1, 9.9]), ("b", [8.0, 8.1, 7.9])], higher_is_better=False)
    assert lad.steps[1].level_pct == pytest.approx(80.0, rel=1e-3)  # geometric means
    assert lad.total is not None and lad.total.verdict == BETTER
    only = ladder([("start", [5.0, 5.1])])
    assert only.total is None and len(only.steps) == 1
