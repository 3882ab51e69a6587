"""Switched rounds adjusted for their periods' interference (pgdyno.stats.covariates): the slope
is predictable, a comparison with no disturbed period is the plain one, and a switched adaptive
comparison keeps its disturbed periods and says what the adjustment did."""

from __future__ import annotations

import math

import numpy as np

from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.analysis import SWITCHED, Judging, analyse
from pgdyno.stats.covariates import MIN_EARLIER, adjust, predictable_slopes
from pgdyno.stats.paired import compare_adjusted, compare_rounds


def test_a_rounds_slope_depends_on_the_rounds_before_it_only() -> None:
    rng = np.random.default_rng(33)
    x = rng.choice([0.0, 0.3, -0.3], size=20)
    d = -0.8 * x + rng.normal(0.0, 0.01, size=20)
    slopes = predictable_slopes(d, x)
    for i in range(20):
        changed = d.copy()
        changed[i:] += rng.normal(0.0, 1.0, size=20 - i)  # round i + 1 and after, redrawn
        assert np.array_equal(predictable_slopes(changed, x)[: i + 1], slopes[: i + 1])
    assert np.all(slopes[:MIN_EARLIER] == 0.0)
    assert abs(slopes[-1] + 0.8) < 0.05


def test_no_slope_where_interference_does_not_move_the_figure() -> None:
    rng = np.random.default_rng(34)
    x = rng.choice([0.0, 0.3, -0.3], size=30)
    found = adjust(rng.normal(0.0, 0.01, size=30), x)
    assert found is not None and found.rounds <= 3  # |t| >= 2 by chance only, now and then


def test_without_a_disturbed_period_the_comparison_is_the_plain_one() -> None:
    base = {r: 100.0 + r % 3 for r in range(1, 11)}
    cand = {r: 103.0 - r % 2 for r in range(1, 11)}
    plain = compare_rounds(base, cand, sequential=True)
    assert compare_adjusted(base, cand, ({}, {})) == plain
    assert plain.adjusted_rounds == 0 and plain.narrowed_pct is None


def _periods(switched_rounds: int) -> list[RunOutcome]:
    """A/B periods where b is 3% better and a burst takes 30% of the machine from one period of
    every third round (a loss of 24%)."""
    rng = np.random.default_rng(35)
    runs = []
    for r in range(1, switched_rounds + 1):
        hit = ("a", "b")[r % 2] if r % 3 == 0 else None
        for name in ("a", "b"):
            log_tps = 7.0 + float(rng.normal(0.0, 0.005)) + (math.log1p(0.03) if name == "b" else 0)
            found = Interference(30.0, 0.0) if name == hit else None
            tps = math.exp(log_tps - (0.8 * 0.3 if found else 0.0))
            runs.append(RunOutcome(len(runs) + 1, name, "ok", "select-only", 1, 1, r, tps, 1.0,
                                   0.5, RunHealth(), "18", interference=found))  # fmt: skip
    return runs


def test_a_switched_adaptive_comparison_keeps_and_adjusts_its_disturbed_periods() -> None:
    runs = _periods(24)
    judging = Judging(sequential=True, mixture_rounds=40, switched=True)
    result = analyse(runs, ["a", "b"], "a", "sets", judging).results[1]
    change = result.tps_change
    assert change is not None and result.discarded == 0 and change.pairs == 24
    assert change.adjusted_rounds > 0 and change.adjusted_slope is not None
    assert abs(change.adjusted_slope + 0.8) < 0.1
    assert change.narrowed_pct is not None and change.narrowed_pct > 0
    low, high = change.ci_low_pct, change.ci_high_pct
    assert change.verdict == "better" and low is not None and high is not None
    assert low < 3.0 < high  # an early disturbed round, before the slope, is left as it was
    assert any("adjusted for interference" in w for w in result.warnings)
    assert any("disturbed" in w and "kept" in w for w in result.warnings)
    assert result.as_dict()["tps_change"]["adjusted_rounds"] == change.adjusted_rounds
    assert result.as_dict()["tps_change"]["covariates"] == ("foreign_cpu", "steal")  # named


def test_the_per_run_design_still_discards_disturbed_runs() -> None:
    runs = _periods(24)
    for judging in (Judging(sequential=True, mixture_rounds=40), Judging(switched=True)):
        result = analyse(runs, ["a", "b"], "a", "sets", judging).results[1]
        assert result.discarded == 4 and result.tps_change is not None  # b's own
        assert result.tps_change.pairs == 16 and result.tps_change.adjusted_rounds == 0
        assert result.tps_change.covariates == ()


def test_the_switched_design_is_named_as_its_orders_name_it() -> None:
    from pgdyno.experiment.switching import PairOrders

    assert PairOrders(1).name == SWITCHED
