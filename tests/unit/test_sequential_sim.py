"""The adaptive verdict on simulated comparisons: false alarms, power, flagged runs (issue 13).

Every case simulates the whole adaptive procedure (`simulate.py`): rounds of a baseline A and a
candidate B in rotated order, after every round the paired always-valid comparison of the runs
not flagged, and `decide` with a budget of ``max_rounds`` rounds. The noise models are those
seen on shared 2-vCPU hosts (log scale, 3% per run): quiet; a slow drift (a random walk, or a
-20% trend over the sequence); heavy-tailed slow runs; a burst of interference, flagged or not;
an order effect. The rates come from the numpy twin of the procedure, which
`test_twin_is_the_real_procedure` checks against the real `compare_rounds` and `decide` on a
sample of every case. Seeds are fixed: every rate is reproducible.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from scipy.stats import binomtest

from pgdyno.experiment.rounds import DEFAULT_PRECISION_PCT
from pgdyno.stats.levels import COMPARE_ALPHA, MIN_EFFECT_PCT
from pgdyno.stats.paired import compare_rounds
from pgdyno.stats.sequential import rounds_to_detect
from pgdyno.stats.verdict import BETTER, SAME, compare
from simulate import VERDICT_CODE, NoiseModel, Outcomes, Runs, run_procedure, simulate

MODELS = {
    "quiet": NoiseModel(),
    "random walk": NoiseModel(walk_pct=10.0),
    "drift -20%": NoiseModel(drift_pct=-20.0),
    "heavy-tailed slow runs": NoiseModel(slow_share=(0.05, 0.10)),
    "burst, flagged": NoiseModel(burst_runs=(8, 16)),
    "burst, not flagged": NoiseModel(burst_runs=(8, 16), burst_flagged=False),
    "order effect": NoiseModel(first_faster=(0.02, 0.03)),
}
# AR(1) per-round differences (issue 33): their A/A miss rates have their own tests below.
DEPENDENT = {"AR(1) rho 0.3": NoiseModel(ar1=0.3), "AR(1) rho 0.5": NoiseModel(ar1=0.5)}
ALL_MODELS = {**MODELS, **DEPENDENT}
# 10% of the candidate's own runs 15-40% slower: its mean TPS is 3.2% lower (issue 33).
SLOW_B = NoiseModel(slow_share=(0.10, 0.10), slow_b_only=True)
SLOW_B_SEED = 3300
SLOW_B_TRIALS = 1_000  # MC standard error of a rate near 13%: 1.1 points
SLOW_B_ROUNDS = 40  # the A/A budget: coverage
SLOW_B_BUDGET = 120  # a longer budget, with a real +3% on top: power
SEEDS = {name: 1300 + i for i, name in enumerate(ALL_MODELS)}  # A/A; +100 power, +200(+5) fixed
AA_TRIALS = 4_000  # MC standard error of a 2.5% rate: 0.25 points
AA_ROUNDS = 40  # the budget, in rounds, of the A/A procedures
POWER_TRIALS = 4_000
POWER_EFFECT_PCT = 3.0
TIGHT = 0.01  # "precision off": a comparison stops on a verdict or at the budget
FIXED_TRIALS = 2_000
FIXED_ROUNDS = 10


@cache
def aa_runs(name: str) -> Runs:
    return ALL_MODELS[name].draw(np.random.default_rng(SEEDS[name]), AA_TRIALS, AA_ROUNDS)


@cache
def aa(name: str, sequential: bool = True) -> Outcomes:
    return simulate(
        aa_runs(name), max_rounds=AA_ROUNDS, precision_pct=DEFAULT_PRECISION_PCT,
        sequential=sequential,
    )  # fmt: skip


def power_rounds(name: str) -> int:
    """The budget the method asks for: rounds to detect a 3% change at this spread."""
    sd = MODELS[name].sd_diff(AA_ROUNDS)  # the walk and drift steps barely depend on the length
    return rounds_to_detect(sd, POWER_EFFECT_PCT, min_effect_pct=MIN_EFFECT_PCT)


@cache
def power_runs(name: str) -> Runs:
    rng = np.random.default_rng(SEEDS[name] + 100)
    return MODELS[name].draw(rng, POWER_TRIALS, power_rounds(name), POWER_EFFECT_PCT)


@cache
def power(name: str) -> Outcomes:
    return simulate(power_runs(name), max_rounds=power_rounds(name), precision_pct=TIGHT)


# --- The twin is the procedure -------------------------------------------------------------------


def sample(outcomes: Outcomes, plain: int = 16, each: int = 8) -> list[int]:
    """Trials to replay with the real functions: the first few, and the first ones of every
    kind of ending (a verdict, a stop on precision, the budget)."""
    kinds = [outcomes.verdict != 0, outcomes.resolved & (outcomes.verdict == 0)]
    kinds.append(~outcomes.resolved)
    picked = set(range(plain))
    for kind in kinds:
        picked.update(np.flatnonzero(kind)[:each].tolist())
    return sorted(picked)


CASES = [(name, True) for name in ALL_MODELS] + [("quiet", False)]


@pytest.mark.parametrize(("name", "sequential"), CASES)
def test_twin_is_the_real_procedure(name: str, sequential: bool) -> None:
    cases = [(aa_runs(name), aa(name, sequential), AA_ROUNDS, DEFAULT_PRECISION_PCT)]
    if sequential and name in {"quiet", "drift -20%"}:
        cases.append((power_runs(name), power(name), power_rounds(name), TIGHT))
    if name == "heavy-tailed slow runs":  # where the robust sequence decides
        cases.append((heavy_runs(), heavy_power(), HEAVY_ROUNDS, TIGHT))
        cases.append((slow_b_runs(0.0), slow_b(0.0), SLOW_B_ROUNDS, DEFAULT_PRECISION_PCT))
    for runs, twin, rounds, precision in cases:
        for i in sample(twin, *((4, 4) if rounds == HEAVY_ROUNDS else ())):
            real = run_procedure(
                *runs.trial(i), max_rounds=rounds, precision_pct=precision, sequential=sequential
            )
            got = (VERDICT_CODE[real.verdict], real.rounds, real.reason == "resolved")
            assert got == (twin.verdict[i], twin.rounds[i], twin.resolved[i]), (name, i, real)
            assert (real.pairs, real.left_out) == (twin.pairs[i], twin.left_out[i])
            assert real.reason in {"resolved", "budget"}
            if sequential:  # the change printed: bias-adjusted at a verdict (issue 33)
                printed = 100.0 * math.expm1(float(twin.printed[i]))
                assert real.change_pct == pytest.approx(printed, rel=1e-6, abs=1e-9), (name, i)


# --- A/A: false alarms ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_aa_false_alarms_at_most_alpha_with_a_look_every_round(name: str) -> None:
    outcomes = aa(name)
    assert outcomes.rate() <= COMPARE_ALPHA  # better or worse, wherever the procedure stopped
    # Stronger: no look up to the budget calls it, even had the procedure not stopped early.
    assert float(np.mean(outcomes.ever)) <= COMPARE_ALPHA
    # The procedure ran: most comparisons used their 40 rounds (2% needs about 60 at 3% noise).
    assert float(np.mean(outcomes.rounds)) > 30


def test_peeking_at_a_fixed_t_interval_inflates_false_alarms() -> None:
    # The same rounds and stopping rule with the one-look t-interval: the test above can fail.
    naive = aa("quiet", sequential=False)
    assert naive.rate() > 2 * COMPARE_ALPHA
    assert aa("quiet").rate() < naive.rate() / 4


# --- Power ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["quiet", "random walk", "drift -20%"])
def test_three_percent_found_within_the_rounds_the_method_asks_for(name: str) -> None:
    """A true +3% (4000 comparisons; MC standard error 0.7 points): found in 77.3% (quiet),
    76.1% (random walk), 77.3% (drift -20%) within the 43-45 rounds `rounds_to_detect` asks
    for, after 29.3-30.9 rounds on average. Before the widening for dependence from the first
    looks (issue 33): 82.2%, 81.2%, 82.4% after 27.6 rounds; the assertion was 80%: the
    widening costs about 5 points within that budget, under 2 rounds on average."""
    outcomes = power(name)
    assert 30 <= power_rounds(name) <= 60  # 3% against about 4.3% per round
    assert outcomes.rate(VERDICT_CODE[BETTER]) >= 0.74
    assert outcomes.rate(VERDICT_CODE["worse"]) == 0.0
    # It stops as soon as it knows: on average well before the budget.
    assert float(np.mean(outcomes.rounds)) < 0.75 * power_rounds(name)


HEAVY_ROUNDS = 120  # the t-mixture alone needs about 450 here (issue 13's measurement)


@cache
def heavy_runs() -> Runs:
    name = "heavy-tailed slow runs"
    rng = np.random.default_rng(SEEDS[name] + 100)
    return MODELS[name].draw(rng, POWER_TRIALS // 2, HEAVY_ROUNDS, POWER_EFFECT_PCT)


@cache
def heavy_power() -> Outcomes:
    return simulate(heavy_runs(), max_rounds=HEAVY_ROUNDS, precision_pct=TIGHT)


def test_slow_runs_nobody_flagged_no_longer_need_hundreds_of_rounds() -> None:
    # 5-10% of runs 15-40% slower: the robust sequence clips them, so 3% is found in at most
    # 120 rounds 80% of the time (80.3% measured, 66 rounds on average; 81.5% at verdict method
    # 4), where the t-mixture's spread asked for 450. Before issue 33, 85.1%: a slow run that
    # moves the mean out of the interval the earlier looks left for it now makes the comparison
    # erratic (about 3.5%).
    sd = MODELS["heavy-tailed slow runs"].sd_diff(AA_ROUNDS)
    assert power_rounds("quiet") < HEAVY_ROUNDS < rounds_to_detect(0.13, POWER_EFFECT_PCT) / 3
    assert sd < 0.05  # the iid part alone; the slow runs bring the differences' sd to about 13%
    outcomes = heavy_power()
    assert outcomes.rate(VERDICT_CODE[BETTER]) >= 0.80
    assert outcomes.rate(VERDICT_CODE["worse"]) == 0.0


# --- One target: the mean's interval covers the mean printed (issue 33) --------------------------


@cache
def slow_b_runs(effect_pct: float) -> Runs:
    rounds = SLOW_B_ROUNDS if effect_pct == 0.0 else SLOW_B_BUDGET
    rng = np.random.default_rng(SLOW_B_SEED + int(effect_pct))
    return SLOW_B.draw(rng, SLOW_B_TRIALS, rounds, effect_pct)


@cache
def slow_b(effect_pct: float) -> Outcomes:
    """The candidate's own slow runs, with a real change of ``effect_pct`` on top; the A/A
    case with the default precision, the +3% one looked at up to its budget."""
    rounds = SLOW_B_ROUNDS if effect_pct == 0.0 else SLOW_B_BUDGET
    return simulate(
        slow_b_runs(effect_pct), max_rounds=rounds,
        precision_pct=DEFAULT_PRECISION_PCT if effect_pct == 0.0 else TIGHT,
        truth=SLOW_B.true_change() + math.log1p(effect_pct / 100.0),
    )  # fmt: skip


def test_one_sets_slow_runs_are_said_not_called() -> None:
    """10% of B's runs 15-40% slower: the mean change is -3.2% while the typical round shows
    none. Up to 40 rounds (1000 comparisons, MC standard error about 1 point): the mean's
    interval as printed misses the mean at some look in 13.5%, at the look that stopped in 8.1%
    (NOT the nominal 1.25% of its half: the t-mixture's normal model cannot know of slow runs it
    has not seen yet; issue 33 measured 29% for the interval printed then); a look says the
    runs are erratic in 7.8%; "worse" in 0.9%, the wrong way ("better") in 0.1% (verdict
    method 4: 14.2%, 9.1%, 10.6%, 1.2%, 0.1%)."""
    assert SLOW_B.true_change() == pytest.approx(math.log(1 - 0.032), abs=0.001)
    outcomes = slow_b(0.0)
    assert float(np.mean(outcomes.missed)) <= 0.16
    assert float(np.mean(outcomes.erratic)) >= 0.05
    assert outcomes.rate(VERDICT_CODE[BETTER]) <= 0.005


def test_one_sets_slow_runs_keep_the_power_for_a_real_change() -> None:
    """The same slow runs with a real +3% on top (the typical round +3%, the mean about -0.3%),
    up to 120 rounds: "better" in 46.2% of 1000 comparisons (MC standard error 1.6 points),
    "worse" in none; erratic at some look in 18.9%; the mean's interval as printed missed the
    mean at the stop in 9.3%. Where both sets have the slow runs (symmetric differences) the
    same +3% is found in 80.3% (the heavy-tailed power test above)."""
    outcomes = slow_b(3.0)
    assert outcomes.rate(VERDICT_CODE[BETTER]) >= 0.40
    assert outcomes.rate(VERDICT_CODE["worse"]) == 0.0


# --- Dependence between rounds -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "calls", "misses"), [("AR(1) rho 0.3", 0.045, 0.035), ("AR(1) rho 0.5", 0.095, 0.085)]
)
def test_autocorrelated_rounds_are_handled_from_the_first_looks(
    name: str, calls: float, misses: float
) -> None:
    """AR(1) per-round differences (4000 A/A comparisons of 40 rounds; MC standard error 0.3
    and 0.45 points): "better" or "worse" in 3.6% at rho 0.3 and 8.5% at rho 0.5, the mean's
    interval excluding the true change (0) at some look in 2.8% and 7.5%. Before (issue 33's
    widening only where the autocorrelation is clearly positive): 5.1% and 14.7%, missed 4.3%
    and 13.4% (the issue: 7.3% and 18.5%). Both intervals are now widened at every look from
    6 rounds by the long-run factor of the bias-corrected autocorrelation (stats/dependence.py).
    Nominal (2.5%) is out of reach at rho 0.5 without losing much more power: most of the
    remaining false verdicts come at 6-15 rounds, where an autocorrelation of 0.5 cannot be
    told from noise (docs/statistics.md has the trade-off measured)."""
    outcomes = aa(name)
    assert outcomes.rate() <= calls
    assert float(np.mean(outcomes.missed)) <= misses
    assert float(np.mean(outcomes.dependent)) >= 0.3  # it is seen, and said


# --- The estimate at an adaptive stop ------------------------------------------------------------


@pytest.mark.parametrize("name", ["quiet", "drift -20%"])
def test_the_estimate_at_a_stop_is_adjusted_for_the_stop(name: str) -> None:
    """A true +3% stopped by a verdict (about 3090 of 4000 comparisons; MC standard error of the
    mean change 0.016 points, 0.046 for the 520 stops within 15 rounds): the plain mean reads
    +3.62% (quiet; +4.80% for stops within 15 rounds; the issue: +3.6% and +4.7%), the change
    printed, Whitehead's bias-adjusted estimate (stats/stop_bias.py), +3.36% (+4.58%). Over
    all comparisons, stopped or not, +3.12% where the plain mean reads +3.32%. Early stops keep
    most of their bias: being early selects large means, which no estimate from the stop alone
    undoes."""
    outcomes = power(name)
    stopped = outcomes.verdict == VERDICT_CODE[BETTER]
    early = stopped & (outcomes.rounds <= 15)
    naive, printed = 100 * np.expm1(outcomes.naive), 100 * np.expm1(outcomes.printed)
    assert 3.45 <= float(np.mean(naive[stopped])) <= 3.8  # the bias the issue measured
    assert 3.2 <= float(np.mean(printed[stopped])) <= 3.5
    assert float(np.mean(naive[stopped] - printed[stopped])) >= 0.2
    assert float(np.mean(naive[early] - printed[early])) >= 0.15
    assert abs(float(np.mean(printed)) - POWER_EFFECT_PCT) < 0.2
    assert np.array_equal(naive[~stopped], printed[~stopped])  # no verdict: the plain mean


# --- Flagged runs --------------------------------------------------------------------------------


def test_flagged_runs_leave_their_round_by_hand() -> None:
    # Round 3: B's run flagged; round 4: both flagged; round 5 only B ran so far.
    a = {1: 1000.0, 2: 980.0, 3: 990.0, 5: 1010.0}
    b = {1: 1020.0, 2: 1000.0, 5: 1030.0}
    c = compare_rounds(a, b, sequential=False)
    assert (c.method, c.pairs, c.left_out) == ("paired", 3, 1)
    by_hand = [math.log(1020 / 1000), math.log(1000 / 980), math.log(1030 / 1010)]
    assert c.change_pct == pytest.approx(100 * math.expm1(sum(by_hand) / 3))
    c = compare_rounds(a, b, sequential=True)
    assert (c.method, c.pairs, c.left_out, c.verdict) == ("sequential", 3, 1, SAME)
    assert c.ci_low_pct is None  # three rounds: the confidence sequence is still unbounded


@pytest.mark.parametrize("flagged", [True, False])
def test_runs_are_left_out_exactly_when_flagged(flagged: bool) -> None:
    name = "burst, flagged" if flagged else "burst, not flagged"
    runs, twin = aa_runs(name), aa(name)
    slow_seen = 0
    for i in range(24):
        log_tps, flags = runs.trial(i)
        real = run_procedure(
            log_tps, flags, max_rounds=AA_ROUNDS, precision_pct=DEFAULT_PRECISION_PCT
        )
        done = flags[: real.rounds]
        assert real.excluded == int(done.sum())  # every flagged run, and only those
        assert real.pairs == int((~done.any(axis=1)).sum())
        assert real.left_out == int((done.sum(axis=1) == 1).sum())
        assert (real.pairs, real.left_out) == (twin.pairs[i], twin.left_out[i])
        slow = log_tps[: real.rounds] - np.median(log_tps) < math.log(0.8)
        slow_seen += int(slow.sum())
        if not flagged:
            assert real.excluded == 0 and real.pairs == real.rounds
    assert slow_seen >= 24 * 8 * 0.8  # the bursts (8-16 runs 30% slower) happened
    if flagged:  # and their rounds were left out in every trial
        assert int(np.min(twin.pairs)) < AA_ROUNDS - 3
        assert int(np.min(twin.left_out)) == 0 and int(np.max(twin.left_out)) == 2


# --- Fixed protocol: pairing removes drift -------------------------------------------------------


def fixed(name: str, effect_pct: float) -> tuple[int, int]:
    """Verdicts "better" or "worse" of the paired and of the unpaired analysis, one look at
    FIXED_ROUNDS complete rounds, over FIXED_TRIALS comparisons."""
    rng = np.random.default_rng(SEEDS[name] + 200 + int(effect_pct))
    runs = MODELS[name].draw(rng, FIXED_TRIALS, FIXED_ROUNDS, effect_pct)
    paired = unpaired = 0
    for log_tps in np.exp(runs.log_tps):
        a = {r: float(v) for r, v in enumerate(log_tps[:, 0], start=1)}
        b = {r: float(v) for r, v in enumerate(log_tps[:, 1], start=1)}
        paired += compare_rounds(a, b).verdict != SAME
        unpaired += compare(list(a.values()), list(b.values())).verdict != SAME
    return paired, unpaired


@pytest.mark.parametrize("name", ["random walk", "drift -20%"])
def test_fixed_protocol_keeps_alpha_and_power_under_drift(name: str) -> None:
    paired, _ = fixed(name, 0.0)
    # One look at a t-interval is exact for normal differences (2.5% under the walk, below under
    # the trend): the measured rate must not be significantly above it (a 2000-trial estimate
    # of exactly 2.5% is above 2.5% half the time).
    assert binomtest(paired, FIXED_TRIALS, COMPARE_ALPHA, alternative="greater").pvalue > 0.01
    paired, unpaired = fixed(name, 5.0)
    assert paired / FIXED_TRIALS >= 0.65
    assert paired >= 1.5 * unpaired and (paired - unpaired) / FIXED_TRIALS >= 0.2


def table() -> None:
    """docs/statistics.md's tables: PYTHONPATH=tests python tests/unit/test_sequential_sim.py"""
    for name in ALL_MODELS:
        outcomes, naive = aa(name), aa(name, sequential=False)
        print(
            f"| {name} | {100 * outcomes.rate():.2f}% (any look: "
            f"{100 * float(np.mean(outcomes.ever)):.2f}%) | "
            f"{100 * float(np.mean(outcomes.missed)):.2f}% | "
            f"{100 * float(np.mean(outcomes.erratic)):.2f}% | "
            f"{100 * float(np.mean(outcomes.dependent)):.1f}% | {100 * naive.rate():.1f}% |"
        )
    for name in ("quiet", "random walk", "drift -20%"):
        found = power(name)
        print(f"power {name}: {100 * found.rate(1):.1f}% within {power_rounds(name)} rounds, "
              f"mean {float(np.mean(found.rounds)):.1f}")  # fmt: skip
        for label, rows in (
            ("stops", found.verdict == 1),
            ("stops within 15", (found.verdict == 1) & (found.rounds <= 15)),
        ):
            naive, printed = (100 * np.expm1(x[rows]) for x in (found.naive, found.printed))
            se = float(np.std(printed)) / math.sqrt(max(1, int(rows.sum())))
            print(f"  {label} ({int(rows.sum())}): plain mean {float(np.mean(naive)):+.2f}%, "
                  f"printed {float(np.mean(printed)):+.2f}% (MC se {se:.3f})")  # fmt: skip
    large = simulate(
        NoiseModel().draw(np.random.default_rng(77), 2_000, 20, 10.0), max_rounds=20,
        precision_pct=TIGHT,
    )  # fmt: skip
    print(f"a +10% change (quiet): found {100 * large.rate(1):.1f}% within 20 rounds, after "
          f"{float(np.mean(large.rounds)):.2f} on average")  # fmt: skip
    heavy = heavy_power()
    print(f"power heavy-tailed: {100 * heavy.rate(1):.1f}% within {HEAVY_ROUNDS} rounds, "
          f"mean {float(np.mean(heavy.rounds)):.1f}")  # fmt: skip
    for effect in (0.0, 3.0):
        slow = slow_b(effect)
        rates = [float(np.mean(slow.missed)), float(np.mean(slow.missed_at_stop))]
        rates += [float(np.mean(slow.erratic))]
        rates += [slow.rate(-1), slow.rate(1)]
        print(
            f"B's own slow runs, +{effect:g}%: mean missed (any look, at the stop), erratic, "
            "worse, better "
            f"{', '.join(f'{100 * r:.1f}%' for r in rates)}, "
            f"mean rounds {float(np.mean(slow.rounds)):.1f}"
        )


if __name__ == "__main__":
    table()
