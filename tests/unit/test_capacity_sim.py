"""The capacity sweep's interval on a queue model: the real planner (`next_step`), the real
judgement of each step (`judge_step`) and the real result (`capacity_of`) drive simulated
open-loop runs (issue 34).

The model: one FIFO server with exponential service times (an M/M/1 queue) fed by a Poisson
schedule, as pgbench `-R` makes one; each run starts empty and lasts STEP_S seconds; its p99
is over the transactions that completed within the run, measured from their scheduled start;
the achieved rate is those transactions per second. The server's speed varies from run to run
(log-normal, 3%), as runs on a shared 2-vCPU host do. Sessions run in lockstep so every step of
every session is one numpy batch. The true capacity C* (the rate at which the median run's p99
is the target) is found by bisection on the same model with 1,500 runs a rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
import pytest
from scipy.stats import binomtest

from pgdyno.experiment.schedule import Balanced
from pgdyno.records.capacity import (
    BRACKETED,
    BUDGET,
    LESS,
    MORE,
    SAME,
    UNSUSTAINED,
    Capacity,
    CapacityChange,
    CapacityStep,
)
from pgdyno.stats.capacity import (
    NextStep,
    SweepPolicy,
    capacity_of,
    compare_capacity,
    fits_budget,
    judge_step,
    lag_growth,
    next_step,
)

MU = 1000.0  # the server's mean service rate, transactions a second
STEP_S = 2.0
TARGET_MS = 20.0
SPEED_CV = 0.03


def simulate_runs(
    rates: np.ndarray,
    rng: np.random.Generator,
    speed: float | np.ndarray = 1.0,
    step_s: float = STEP_S,
) -> tuple[np.ndarray, np.ndarray]:
    """One run per rate: (p99 in ms, achieved rate), vectorised over the runs, on a server
    `speed` times as fast as MU."""
    p99, achieved, _ = queue_runs(rates, rng, speed, step_s, lags=False)
    return p99, achieved


def queue_runs(
    rates: np.ndarray,
    rng: np.random.Generator,
    speed: float | np.ndarray = 1.0,
    step_s: float = STEP_S,
    *,
    lags: bool = True,
) -> tuple[np.ndarray, np.ndarray, list[list[tuple[float, float]]]]:
    """`simulate_runs` and, with `lags`, per run the mean wait in the queue (pgbench's schedule
    lag) of each whole second's completed transactions, `(second, ms)`."""
    n = len(rates)
    most = int(rates.max() * step_s * 1.2 + 10 * np.sqrt(rates.max() * step_s) + 20)
    mu = speed * MU * np.exp(rng.normal(0.0, SPEED_CV, n))
    arrive = np.cumsum(rng.exponential(1.0, (n, most)) / rates[:, None], axis=1)
    service = rng.exponential(1.0, (n, most)) / mu[:, None]
    # Lindley's recursion in closed form: the wait is the walk of (service - next gap) above
    # its running minimum (with 0 at the start).
    step = np.zeros((n, most))
    step[:, 1:] = service[:, :-1] - np.diff(arrive, axis=1)
    walk = np.cumsum(step, axis=1)
    wait = walk - np.minimum(np.minimum.accumulate(walk, axis=1), 0.0)
    sojourn = wait + service
    done = arrive + sojourn <= step_s
    count = done.sum(axis=1)
    ranked = np.sort(np.where(done, sojourn, np.inf), axis=1)
    k = np.clip(np.ceil(0.99 * count).astype(int) - 1, 0, most - 1)
    p99 = np.take_along_axis(ranked, k[:, None], axis=1)[:, 0] * 1000.0
    second = np.where(done, np.floor(arrive), -1)
    per_second = [
        [(float(t), float(wait[i][second[i] == t].mean() * 1000.0))
         for t in range(int(step_s)) if (second[i] == t).any()]
        for i in range(n if lags else 0)
    ]  # fmt: skip
    return np.where(count > 0, p99, np.inf), count / step_s, per_second


@cache
def true_capacity(seed: int = 7, runs: int = 1500) -> float:
    """The rate at which the median run's p99 equals the target (bisection to 0.5 tx/s)."""
    rng = np.random.default_rng(seed)
    low, high = 0.5 * MU, MU
    for _ in range(10):
        mid = (low + high) / 2
        p99, _ = simulate_runs(np.full(runs, mid), rng)
        low, high = (mid, high) if np.median(p99) <= TARGET_MS else (low, mid)
    return (low + high) / 2


def _step(rate: float, p99: float, achieved: float, policy: SweepPolicy) -> CapacityStep:
    raw = CapacityStep(None, "sim", rate, achieved, None, None, p99 if np.isfinite(p99) else 1e9,
                       None, None, 0, None, None, "")  # fmt: skip
    return replace(raw, verdict=judge_step(raw, policy))


@cache
def sweeps(sessions: int, policy: SweepPolicy, seed: int, speed: float = 1.0) -> list[Capacity]:
    """Sweeps in lockstep on a server `speed` times as fast as MU (closed-loop rate MU *
    speed); each sweep's result."""
    rng = np.random.default_rng(seed)
    steps: list[list[CapacityStep]] = [[] for _ in range(sessions)]
    stopped: list[str | None] = [None] * sessions
    while True:
        asks: list[tuple[int, float]] = []
        for i in range(sessions):
            if stopped[i] is None:
                plan = next_step(steps[i], MU * speed, policy)
                if isinstance(plan, NextStep):
                    asks.append((i, plan.rate))
                else:
                    stopped[i] = plan
        if not asks:
            break
        p99, achieved = simulate_runs(np.array([r for _, r in asks]), rng, speed)
        for (i, rate), p, a in zip(asks, p99, achieved, strict=True):
            steps[i].append(_step(rate, float(p), float(a), policy))
    return [capacity_of(steps[i], MU * speed, policy, stopped[i] or "") for i in range(sessions)]


def run_sessions(sessions: int, policy: SweepPolicy, seed: int) -> list[tuple[object, ...]]:
    """Sweeps in lockstep: (capacity, over, stopped, steps) of each."""
    return [(c.capacity_tps, c.over_tps, c.stopped, len(c.steps))
            for c in sweeps(sessions, policy, seed)]  # fmt: skip


@pytest.mark.parametrize("repeats", [3, 5])
def test_interval_covers_the_true_capacity(repeats: int) -> None:
    """The interval [capacity, over] holds C* in at least the sign test's share of sweeps
    (1 - 2 * 2**-repeats: 75% for 3 repeats, 93.75% for 5).

    400 sweeps a case: the coverage's Monte Carlo standard error is at most 2.2 points (1.2
    at 95%); the assertion is that the exact binomial 99% interval of the measured coverage
    reaches the bound, so a planner that fell short of it by a few points would fail. Measured
    (seed 34, C* = 815 tx/s for a 1,000 tx/s server): 3 repeats 341/400 = 0.853 (99% CI
    0.80-0.90), 5 repeats 393/400 = 0.983 (0.96-0.99); every sweep bracketed; a median 15 and
    24 steps; the interval's median width 18% and 28% of C*.
    """
    policy = SweepPolicy(TARGET_MS, STEP_S, repeats=repeats)
    star = true_capacity()
    assert 0.6 * MU < star < 0.95 * MU  # the target sits where queueing matters
    found = run_sessions(400, policy, seed=34)
    bracketed = [f for f in found if f[2] == BRACKETED]
    assert len(bracketed) == len(found)
    covered = sum(1 for low, high, _, _ in found if low <= star <= high)  # type: ignore[operator]
    ci = binomtest(covered, len(found)).proportion_ci(0.99)
    assert ci.high >= policy.confidence, (covered, star)
    widths = [(high - low) / star for low, high, _, _ in found]  # type: ignore[operator]
    assert float(np.median(widths)) < 0.4  # a useful interval, not [0, inf]


def test_the_closed_form_queue_is_lindleys_recursion() -> None:
    """The vectorised waits equal the step-by-step recursion on a sample."""
    rng = np.random.default_rng(3)
    gaps = rng.exponential(1.0, 50) / 900.0
    service = rng.exponential(1.0, 50) / MU
    wait = [0.0]
    for n in range(1, 50):
        wait.append(max(0.0, wait[-1] + service[n - 1] - gaps[n]))
    arrive = np.cumsum(gaps)
    step = np.concatenate([[0.0], service[:-1] - np.diff(arrive)])
    walk = np.cumsum(step)
    closed = walk - np.minimum(np.minimum.accumulate(walk), 0.0)
    assert np.allclose(closed, wait)


def test_an_a_a_pair_of_sweeps_rarely_claims_a_difference() -> None:
    """Two sweeps of the same server judged against each other (the 400 sweeps of the coverage
    test at 5 repeats, in 200 pairs): a verdict of more or less needs one interval to miss its
    capacity, at most 2 x 6.25% = 12.5% by the sign-test bound. The assertion: the exact 99%
    interval of the false-verdict rate reaches below 12.5%. Measured (seed 34): 0 of 200 (99%
    CI 0-2.6%), the coverage being 98% a sweep."""
    policy = SweepPolicy(TARGET_MS, STEP_S, repeats=5)
    found = sweeps(400, policy, 34)
    verdicts = [compare_capacity(("A", a), ("A'", b)).verdict
                for a, b in zip(found[::2], found[1::2], strict=True)]  # fmt: skip
    false = sum(v in (MORE, LESS) for v in verdicts)
    assert binomtest(false, len(verdicts)).proportion_ci(0.99).low <= 1 - 2 * (1 - 0.9375)
    assert sum(v == SAME for v in verdicts) == len(verdicts) - false


def test_a_server_a_third_faster_is_found_to_carry_more() -> None:
    """B serves 1.33 times as fast as A (its capacity about 39% higher on this model): 200
    sweeps of each at 5 repeats, paired. Measured (seeds 34 and 35): 171 of 200 judged more
    (0.855, 99% CI 0.78-0.91), never less; median change +39%, median interval [+8, +79].
    With B 1.2 times as fast, 69 of 200 (0.35); 1.1 times, 10 of 200: two-second steps with
    5 repeats resolve large changes only (docs/capacity.md). The assertion (at least 75%)
    sits below the measured rate's 99% interval."""
    policy = SweepPolicy(TARGET_MS, STEP_S, repeats=5)
    a = sweeps(400, policy, 34)[:200]
    b = sweeps(200, policy, 35, speed=4 / 3)
    changes = [compare_capacity(("A", x), ("B", y)) for x, y in zip(a, b, strict=True)]
    more = sum(c.verdict == MORE for c in changes)
    assert not any(c.verdict == LESS for c in changes)
    assert more / len(changes) >= 0.75


def test_the_growing_lag_rule_never_overrules_a_run_under_the_target() -> None:
    """5 s steps (the lag rule needs 3 seconds) at 90% and 100% of that step length's C*
    (about 780 tx/s): 300 runs each through the real `lag_growth` and `judge_step`. A run
    whose p99 is under the target is never judged not sustained for its lag: below C* a stable
    queue's lag does not grow by half the target within a step, so the rule only adds 'over'
    verdicts above C* and leaves the interval's coverage as proved above. Measured (seed 5):
    0 of 600; above C* (850 and 900 tx/s) it fires in 1-7% of runs, all of them over anyway."""
    rng = np.random.default_rng(5)
    policy = SweepPolicy(TARGET_MS, 5.0)
    overruled = 0
    for rate in (700.0, 780.0):
        p99, achieved, lags = queue_runs(np.full(300, rate), rng, step_s=5.0)
        for p, a, lag in zip(p99, achieved, lags, strict=True):
            raw = CapacityStep(None, "sim", rate, float(a), None, None, float(p), None, None, 0,
                               None, None, "", lag_growth(lag))  # fmt: skip
            overruled += p <= TARGET_MS and judge_step(raw, policy) == UNSUSTAINED
    assert overruled == 0


# -- A plan's sets compared on capacity (`[matrix] capacity_p99`, experiment/capacity_sets.py) --

STEP_COST_S = STEP_S + 1.0  # a step's machine time: its run and its set put in effect
SET_BUDGET_S = 36 * STEP_COST_S  # each set's share of the budget: 36 steps


@dataclass
class _Pair:
    """Two identical sets swept as a plan sweeps them: interleaved (each round a step of each
    set still sweeping, in the order the real `Balanced` design draws for the round) or one
    after the other; each set's planner the real `next_step`, its budget the real
    `fits_budget`."""

    policy: SweepPolicy
    design: Balanced | None  # None: one set's sweep after the other's
    steps: tuple[list[CapacityStep], list[CapacityStep]] = field(default_factory=lambda: ([], []))
    stopped: list[str | None] = field(default_factory=lambda: [None, None])
    turns: list[int] = field(default_factory=list)
    round_no: int = 0
    slot: int = 0  # steps made so far by both sets: the time on the drifting host

    def ask(self) -> tuple[int, float] | None:
        while any(s is None for s in self.stopped):
            if not self.turns:
                self.round_no += 1
                self.turns = (
                    [0] if self.design is None else self.design.order([0, 1], self.round_no)
                )
            i = self.turns.pop(0)
            if self.design is None and self.stopped[0] is not None:
                i = 1
            if self.stopped[i] is not None:
                continue
            plan = next_step(self.steps[i], MU, self.policy)
            made = len(self.steps[i])
            if isinstance(plan, NextStep) and not fits_budget(
                made * STEP_COST_S, made, SET_BUDGET_S
            ):
                plan = BUDGET
            if isinstance(plan, NextStep):
                return i, plan.rate
            self.stopped[i] = plan
        return None

    def results(self) -> tuple[Capacity, Capacity]:
        a, b = (capacity_of(self.steps[i], MU, self.policy, self.stopped[i] or "")
                for i in (0, 1))  # fmt: skip
        return a, b


def set_pairs(pairs: int, seed: int, *, drift: float, interleaved: bool) -> list[CapacityChange]:
    """`pairs` A/A comparisons of two identical sets on capacity (5 repeats), on a host whose
    server slows by `drift` (a share of its speed) over the 48 steps a pair usually takes,
    then stays there; each pair judged by the real `compare_capacity`."""
    policy = SweepPolicy(TARGET_MS, STEP_S, repeats=5)
    rng = np.random.default_rng(seed)
    design = Balanced(seed) if interleaved else None
    runs = [_Pair(policy, design) for _ in range(pairs)]
    while True:
        asks = [(pair, ask) for pair in runs if (ask := pair.ask()) is not None]
        if not asks:
            break
        speed = np.array([1.0 - drift * min(pair.slot / 48, 1.0) for pair, _ in asks])
        p99, achieved = simulate_runs(np.array([rate for _, (_, rate) in asks]), rng, speed)
        for (pair, (i, rate)), p, a in zip(asks, p99, achieved, strict=True):
            pair.steps[i].append(_step(rate, float(p), float(a), policy))
            pair.slot += 1
    return [compare_capacity(("A", a), ("A'", b)) for a, b in (p.results() for p in runs)]


def test_a_plans_identical_sets_swept_interleaved_give_no_verdict() -> None:
    """Two identical sets of a plan swept on capacity as `compare` sweeps them (5 repeats,
    steps interleaved in the real `Balanced` design, each set within its half of the budget:
    36 steps), 200 pairs judged by the real `compare_capacity`, on a steady host and on one
    whose server slows by 20% over the sweeps. A verdict of more or less needs one interval
    to miss its capacity: at most 12.5% of pairs by the sign-test bound on a steady host. The
    assertions: the exact 99% interval of the false-verdict rate reaches below 12.5%, and the
    measured rate is at most 5% (its Monte Carlo standard error at 12.5% would be 2.3 points).
    Measured (seed 34): steady 0 of 200 (99% CI 0-2.6%), 10 unknown (not bracketed within the
    budget: no claim); drifting 20%, 6 of 200 (3%, 99% CI 0.8-7.6%), 101 unknown: a capacity
    that moves during the sweep leaves rates with runs on both sides, the sweeps widen their
    intervals and the budget runs out first."""
    for drift in (0.0, 0.2):
        changes = set_pairs(200, 34, drift=drift, interleaved=True)
        false = sum(c.verdict in (MORE, LESS) for c in changes)
        assert binomtest(false, len(changes)).proportion_ci(0.99).low <= 0.125, (drift, false)
        assert false <= 0.05 * len(changes), (drift, false)


def test_sweeping_sets_one_after_the_other_on_a_drifting_host_claims_a_difference() -> None:
    """Why the sweeps are interleaved: on the same host slowing by 20%, the same 200 pairs
    swept one set after the other judge the set swept second to carry less load in 30 of 200
    (15%, 99% CI 9-23%, above the 12.5% bound; never more; seed 34), against 6 of 200 either
    way interleaved. At a 10% drift both stay small (2 and 3 of 200): sequential sweeps are
    wrong only on a host that drifts a lot, interleaved ones stay within the bound. The
    assertion (at least 6%) sits below the measured rate's 99% interval."""
    changes = set_pairs(200, 34, drift=0.2, interleaved=False)
    less = sum(c.verdict == LESS for c in changes)
    assert not any(c.verdict == MORE for c in changes)
    assert less >= 0.06 * len(changes)
