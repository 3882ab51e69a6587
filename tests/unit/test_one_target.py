"""One target, dependence, looks and the error budget (issue 33), on the real functions.

The change printed is exp(mean difference) - 1 and the interval beside it is the mean's; the
robust centre is its own named figure with its own interval; the verdict rests on the two
intersected, and when they disagree the comparison says its runs are erratic instead of a
verdict. Clearly autocorrelated rounds widen the mean's interval and say so, and rounds alike
widen both intervals from 6 rounds on, before that is measurable; intervals are intersected
across looks; a verdict at an adaptive stop prints the estimate adjusted for the stop, the plain
mean kept beside it; "rounds left" does not use the change seen; the plan's error is split
between TPS and p99 on purpose, and said.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from pgdyno.records.health import RunHealth
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.analysis import Analysis, Judging, analyse
from pgdyno.stats.dependence import clearly_dependent, inflation, lag1
from pgdyno.stats.family import ErrorControl
from pgdyno.stats.paired import compare_rounds, sequential_interval
from pgdyno.stats.stop_bias import adjusted_mean, expected_at_stop
from pgdyno.stats.stopping import is_resolved, rounds_left
from pgdyno.stats.verdict import BETTER, SAME, WORSE


def rounds_of(diffs: list[float]) -> tuple[dict[int, float], dict[int, float]]:
    """A baseline at 1000 TPS and a candidate whose per-round log difference is ``diffs``."""
    base = {r: 1000.0 for r in range(1, len(diffs) + 1)}
    return base, {r: 1000.0 * math.exp(d) for r, d in enumerate(diffs, start=1)}


def analysed(diffs: list[float]) -> Analysis:
    """Sets a and b of one cell, b's per-round log difference ``diffs``, judged adaptively."""
    base, cand = rounds_of(diffs)
    runs = [
        RunOutcome(2 * r + s, name, "ok", "w", 1, 2, r + 1, tps, 1.0, None, RunHealth(), "18")
        for r in range(len(diffs))
        for s, (name, tps) in enumerate((("a", base[r + 1]), ("b", cand[r + 1])))
    ]
    return analyse(runs, ["a", "b"], "a", "sets", Judging(sequential=True))


def test_the_printed_change_is_the_mean_and_the_robust_centre_its_own_figure() -> None:
    # 40 rounds, 4 of them with the candidate 28% slower: the mean is about -3%, the typical
    # round about 0. The change printed is exp(mean) - 1 with the mean's interval around it
    # (main moved the printed change into the intersection with the robust half: a second
    # target under the same name); the robust centre is printed beside it, with its own.
    rng = np.random.default_rng(3)
    diffs = list(rng.normal(0.0, 0.04, 40))
    for r in (3, 11, 19, 31):
        diffs[r] = math.log(0.72)
    change = compare_rounds(*rounds_of(diffs), sequential=True)
    mean_pct = 100 * math.expm1(sum(diffs) / len(diffs))
    assert change.change_pct == pytest.approx(mean_pct)
    assert change.ci_low_pct is not None and change.ci_high_pct is not None
    assert change.ci_low_pct < mean_pct < change.ci_high_pct
    assert change.robust_pct is not None and abs(change.robust_pct) < 1.5
    assert change.robust_low_pct is not None and change.robust_high_pct is not None
    assert change.robust_low_pct < change.robust_pct < change.robust_high_pct
    assert not change.erratic and change.verdict == SAME
    result = analysed(diffs).results[1]
    assert result.tps_change is not None
    assert any(n.startswith("robust centre ") for n in result.warnings), result.warnings
    out = result.as_dict()["tps_change"]
    assert out["robust_pct"] == pytest.approx(change.robust_pct)


def test_disagreeing_intervals_are_erratic_not_a_verdict() -> None:
    # The candidate is 5% faster for 12 rounds, then 5% slower: each look's interval is narrow
    # and the looks cannot all be right (the rounds are also clearly dependent, so only the
    # mean's widened interval counts: the mean has left what the first looks allowed). No
    # "better" or "worse", and the notes say why.
    diffs = [0.05 + 0.002 * (-1) ** r for r in range(12)]
    diffs += [-0.05 + 0.002 * (-1) ** r for r in range(40)]
    change = compare_rounds(*rounds_of(diffs), sequential=True)
    assert change.erratic and change.verdict == SAME
    assert is_resolved(change, 0.1)  # more rounds cannot undo it: the rounds may stop
    found = analysed(diffs)
    notes = found.results[1].warnings
    assert any(n.startswith("runs of b are erratic: ") for n in notes), notes
    json.dumps(found.as_dict(), allow_nan=False)


def test_intervals_are_intersected_across_looks() -> None:
    # Each look's intervals lie inside the ones before (the running intersection), while the
    # spread is not widened for dependence: alternating differences, autocorrelation negative.
    # (A widening that grows from one look to the next widens every look's interval: issue 33.)
    rng = np.random.default_rng(7)
    diffs = [0.01 + (-1) ** r * abs(x) for r, x in enumerate(rng.normal(0.0, 0.04, 40))]
    before = [(-math.inf, math.inf)] * 3
    for n in range(2, 41):
        looks = sequential_interval(diffs[:n], 0.025)
        ends = [
            (looks.low, looks.high),
            (looks.robust_low, looks.robust_high),
            (looks.verdict_low, looks.verdict_high),
        ]
        for (low, high), (was_low, was_high) in zip(ends, before, strict=True):
            assert was_low <= low <= high <= was_high
        before = ends


def test_clearly_autocorrelated_rounds_widen_the_interval_and_say_so() -> None:
    rng = np.random.default_rng(5)
    e = np.zeros(60)
    for r in range(1, 60):
        e[r] = 0.8 * e[r - 1] + 0.6 * rng.normal(0.0, 0.03)
    change = compare_rounds(*rounds_of(list(e)), sequential=True)
    assert change.dependent and change.autocorrelation is not None
    assert change.autocorrelation > 0.5
    independent = compare_rounds(*rounds_of(list(rng.permutation(e))), sequential=True)
    assert not independent.dependent and independent.autocorrelation is not None
    assert change.ci_low_pct is not None and change.ci_high_pct is not None
    assert independent.ci_low_pct is not None and independent.ci_high_pct is not None
    assert change.ci_high_pct - change.ci_low_pct > independent.ci_high_pct - independent.ci_low_pct
    notes = analysed(list(e)).results[1].warnings
    assert any(n.startswith("rounds are dependent (lag-1 autocorrelation 0.") for n in notes)


def test_one_look_reports_the_autocorrelation_and_notes_it() -> None:
    # A fixed number of rounds: reported, and said when clearly positive, not handled.
    e = [0.03 * math.sin(r / 6.0) for r in range(30)]
    change = compare_rounds(*rounds_of(e))
    assert change.method == "paired" and change.autocorrelation is not None
    assert change.autocorrelation > 0.8 and not change.dependent
    runs = [
        RunOutcome(2 * r + s, name, "ok", "w", 1, 2, r + 1, tps, 1.0, None, RunHealth(), "18")
        for r, d in enumerate(e)
        for s, (name, tps) in enumerate((("a", 1000.0), ("b", 1000.0 * math.exp(d))))
    ]
    notes = analyse(runs, ["a", "b"], "a", "sets").results[1].warnings
    assert any(n.endswith("the interval assumes independent rounds and may be too narrow")
               for n in notes)  # fmt: skip


def test_rounds_left_does_not_use_the_change_seen() -> None:
    change = compare_rounds(
        *rounds_of([0.06, 0.01, 0.08, 0.03, 0.07, 0.02, 0.05, 0.04]), sequential=True
    )
    assert rounds_left(change, 2.0) == rounds_left(replace(change, change_pct=0.5), 2.0)


def test_a_verdict_at_an_adaptive_stop_is_labelled() -> None:
    result = analysed([-0.10 + 0.005 * (-1) ** r for r in range(10)]).results[1]
    change = result.tps_change
    assert change is not None and change.verdict == WORSE and change.stopped_early
    assert any(n.startswith("stopped early: the change shown is adjusted") for n in result.warnings)
    assert result.as_dict()["tps_change"]["stopped_early"] is True
    fixed = compare_rounds(*rounds_of([-0.10 + 0.005 * (-1) ** r for r in range(10)]))
    assert fixed.verdict == WORSE and not fixed.stopped_early  # one look: nothing to label


def test_heavy_tailed_rounds_resolve_on_the_robust_centre_and_say_so() -> None:
    # A real +3% with a few rounds 30% off either way: the mean's interval straddles 0, the
    # robust centre's does not; the verdict says which figure carried it.
    rng = np.random.default_rng(11)
    diffs = list(rng.normal(math.log(1.03), 0.02, 60))
    for r in range(2, 60, 9):
        diffs[r] += math.log(0.7) if r % 2 else -math.log(0.7)
    result = analysed(diffs).results[1]
    change = result.tps_change
    assert change is not None and change.verdict == BETTER
    assert change.ci_low_pct is not None and change.ci_low_pct < 0.0
    assert any(n.startswith("the verdict rests on the robust centre") for n in result.warnings)


def test_the_error_budget_is_split_between_tps_and_p99_and_said() -> None:
    tps = [("a", 100), ("b", 120), ("a", 101), ("b", 121), ("a", 99), ("b", 119)]
    runs = [RunOutcome(i, s, "ok", "w", 1, 2, 1 + i // 2, t, 1.0, None, RunHealth(), "18")
            for i, (s, t) in enumerate(tps)]  # fmt: skip
    found = analyse(runs, ["a", "b"], "a", "sets")
    control = found.error_control
    assert (control.alpha, control.p99_alpha) == pytest.approx((0.04, 0.01))
    result = found.results[1]
    assert result.tps_change is not None and result.tps_change.alpha == pytest.approx(0.04)
    assert result.p99_change is not None and result.p99_change.alpha == pytest.approx(0.01)
    assert "4% over 1 TPS comparison, which the stopping rule watches" in control.text
    assert control.as_dict()["p99_share"] == 0.2
    # The union bound still holds: the shares add up to the plan-wide 5%.
    plan = ErrorControl(24, p99=8)
    assert plan.alpha * plan.tps + plan.p99_alpha * plan.p99 == pytest.approx(0.05)


# --- Dependence before it is clear, and the estimate at a stop -----------------------------------

# Ten rounds whose differences drift together (lag-1 0.23): not "clearly" dependent (the
# null band at 10 rounds is 0.63), but an AR(1) estimate this short falls short by about
# (1 + 3 rho) / n, so the widening already applies.
DRIFTING = [0.02, 0.03, 0.01, 0.02, -0.01, -0.02, 0.0, -0.01, 0.03, 0.01]


def test_positive_autocorrelation_widens_before_it_is_clearly_measurable() -> None:
    rho = lag1(DRIFTING)
    assert rho is not None and 0.2 < rho < 0.25 and not clearly_dependent(rho, 10)
    corrected = rho + (1 + 3 * rho) / 10
    assert inflation(rho, 10) == pytest.approx(math.sqrt((1 + corrected) / (1 - corrected)))
    assert inflation(rho, 5) == 1.0  # below 6 rounds the estimate is noise: not used
    assert inflation(-0.3, 10) == 1.0  # never narrower than independent rounds
    widened = sequential_interval(DRIFTING, 0.025)
    # The same values alternating low and high (lag-1 -0.79): not widened.
    alternating = [-0.02, 0.03, -0.01, 0.03, -0.01, 0.02, 0.0, 0.02, 0.01, 0.01]
    assert sorted(alternating) == sorted(DRIFTING)
    plain = sequential_interval(alternating, 0.025)
    width = widened.high - widened.low
    assert width == pytest.approx(inflation(rho, 10) * (plain.high - plain.low))
    assert not widened.dependent  # said only when clearly positive; the widening is silent


def test_a_verdict_at_a_stop_prints_the_adjusted_estimate_and_keeps_the_plain_mean() -> None:
    diffs = list(np.random.default_rng(1).normal(0.04, 0.03, 12))
    change = compare_rounds(*rounds_of(diffs), sequential=True, horizon=40)
    plain = 100 * math.expm1(sum(diffs) / len(diffs))
    assert change.verdict == BETTER and change.stopped_early
    assert change.naive_change_pct == pytest.approx(plain)
    assert change.ci_low_pct is not None and change.ci_high_pct is not None
    assert change.ci_low_pct < change.change_pct < plain  # pulled towards zero, inside
    # The forecast of rounds left reads the spread only, never either estimate.
    assert rounds_left(change, 1.0) == rounds_left(replace(change, change_pct=plain), 1.0)
    fixed = compare_rounds(*rounds_of(diffs))  # one look: no stop to adjust for
    assert fixed.naive_change_pct is None and fixed.change_pct == pytest.approx(plain)


def test_the_plain_mean_is_in_the_json_and_the_note_says_the_estimate_is_adjusted() -> None:
    result = analysed(list(np.random.default_rng(1).normal(0.04, 0.03, 12))).results[1]
    change = result.tps_change
    assert change is not None and change.naive_change_pct is not None
    out = json.loads(json.dumps(result.as_dict(), allow_nan=False))["tps_change"]
    assert out["naive_change_pct"] == change.naive_change_pct
    assert out["change_pct"] == change.change_pct != change.naive_change_pct
    note = f"(the plain mean of the rounds: {change.naive_change_pct:+.1f}%)"
    assert any(n.startswith("stopped early: the change shown is adjusted") and note in n
               for n in result.warnings)  # fmt: skip


def test_the_adjustment_is_odd_and_shrinks_towards_zero() -> None:
    shifts, expected = expected_at_stop(40, 0.0125, 2.0)
    assert np.all(np.diff(expected) >= 0.0)  # the expected estimate grows with the true mean
    assert np.allclose(expected, -expected[::-1], atol=1e-9)  # a symmetric design
    assert np.all(np.abs(expected) >= np.abs(shifts) - 1e-9)  # the stop exaggerates
    for mean in (0.01, 0.03, 0.06):
        up = adjusted_mean(mean, 0.04, horizon=40, alpha=0.0125)
        assert 0.0 < up < mean
        assert adjusted_mean(-mean, 0.04, horizon=40, alpha=0.0125) == pytest.approx(-up)
