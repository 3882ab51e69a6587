"""Capacity at a latency target: the open-loop sweep's plan, each step's judgement, the knee of
the latency-throughput curve and the capacity with its interval (pure; issue 34).

The sweep runs pgbench with `-R RATE` (a Poisson schedule; pgbench measures each latency from
the transaction's scheduled start, so the time spent queued behind a busy server counts and
coordinated omission does not hide it). `next_step` plans it from the steps made so far:

1. *ladder*: rates at `LADDER` fractions of the closed-loop rate, upwards, until a step is not
   under the target (over it, or the rate not sustained); downwards by halves when the first
   one already is not;
2. *bisection* between the highest rate judged under and the lowest judged otherwise, until they
   are within `precision_pct` of each other;
3. *repeats at the boundary*: both rates again until each has `repeats` runs. A rate is
   *confirmed under* when every one of its runs was under, *confirmed over* when none was; a
   rate with both kinds is inside the interval, and the search moves out to the next rate.

The capacity is the highest rate confirmed under; the interval is [capacity, the lowest rate
above it confirmed over]. Its guarantee, in the sign test's terms: call C* the rate at which
the median over runs of a step's p99 equals the target (the p99 of a run rises with the rate).
The interval misses C* only when a rate above C* had all its `repeats` runs under (each run
under with probability <= 1/2 there) or a rate below C* had all of them over, so it covers C*
with probability at least 1 - 2 * 2**-repeats when one rate on each side reaches its repeats
(96.9% for 6 repeats, 93.8% for 5). tests/unit/test_capacity_sim.py measures the coverage on
a queue model with this very planner.

The knee is Kneedle's (Satopaa, Albrecht, Irwin and Raghavan, 2011, "Finding a 'Kneedle' in a
Haystack: Detecting Knee Points in System Behavior"), offline: the p99 against the achieved
rate (its running maximum, as measured latencies zigzag), both scaled to [0, 1]; for an
increasing convex curve the knee is the point farthest below the chord, where x - y is
largest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from pgdyno.errors import UsageError
from pgdyno.records import RunRecord
from pgdyno.records.capacity import (
    BRACKETED,
    BUDGET,
    CLIENT_BOUND,
    CLIENT_LIMIT,
    CLOSED,
    FAILED,
    INTERFERED,
    LESS,
    MORE,
    NEVER_OVER,
    NEVER_UNDER,
    OVER,
    SAME,
    STEP_LIMIT,
    UNDER,
    UNKNOWN,
    UNSUSTAINED,
    Capacity,
    CapacityChange,
    CapacityStep,
    Knee,
)

# Fractions of the closed-loop rate the ladder asks, in order; past the last it grows by
# LADDER_GROWTH a step up to MOST_FRACTION (a server still under there is reported as such).
LADDER = (0.25, 0.5, 0.7, 0.85, 1.0)
LADDER_GROWTH = 1.25
MOST_FRACTION = 3.0
LOWEST_FRACTION = 1 / 64  # the ladder halves down to this when even its first rate is over
# pgbench's CPU at or above this share of what its threads can use: the load generator was the
# limit (its lag then says nothing about the server).
CLIENT_BOUND_SHARE = 0.9
MOST_STEPS = 60


@dataclass(frozen=True)
class SweepPolicy:
    """How a sweep searches and judges.

    `sustain_ratio`: a step whose achieved rate is under this share of the asked one (and
    short of it by more than 3 Poisson standard deviations of the step's count) is not
    sustained; `precision_pct`: the bisection stops when the bracket's width is at most this
    share of its lower end; `repeats`: runs each boundary rate needs to be confirmed."""

    target_p99_ms: float
    step_s: float
    sustain_ratio: float = 0.97
    precision_pct: float = 5.0
    repeats: int = 5

    @property
    def confidence(self) -> float:
        """The interval's coverage by the sign test's bound.

        >>> SweepPolicy(2.0, 2.0, repeats=5).confidence, SweepPolicy(2.0, 2.0, repeats=6).confidence
        (0.9375, 0.96875)
        """
        return 1.0 - 2.0 * 0.5**self.repeats


@dataclass(frozen=True)
class NextStep:
    """The next run of a sweep: its rate and why (sweep, bisect, repeat)."""

    rate: float
    phase: str


def sustained(asked: float, achieved: float, policy: SweepPolicy) -> bool:
    """Whether pgbench started transactions at the asked rate, allowing for the Poisson count.

    >>> p = SweepPolicy(2.0, 10.0)
    >>> sustained(1000, 985, p), sustained(1000, 900, p), sustained(10, 8, p)
    (True, False, True)
    """
    expected = asked * policy.step_s
    allowed = max(expected * (1 - policy.sustain_ratio), 3 * math.sqrt(expected))
    return achieved * policy.step_s >= expected - allowed


def lag_growth(seconds: Sequence[tuple[float, float]]) -> float | None:
    """How much the schedule lag grew over a step: the least-squares line through its
    per-second means `(t, lag ms)`, end minus start; None with fewer than 3 seconds.

    >>> lag_growth([(0, 0.1), (1, 0.1), (2, 0.1)]), lag_growth([(0, 1.0), (1, 3.0), (2, 5.0)])
    (0.0, 4.0)
    """
    if len(seconds) < 3:
        return None
    t = np.array([s[0] for s in seconds], dtype=float)
    lag = np.array([s[1] for s in seconds], dtype=float)
    slope = float(np.polyfit(t, lag, 1)[0])
    return round(slope * float(t[-1] - t[0]), 6)


def judge_step(step: CapacityStep, policy: SweepPolicy) -> str:
    """One step's verdict: failed, client-bound (pgbench could not keep up), not sustained,
    over or under the target.

    Not sustained: the achieved rate fell short (`sustained`), or the schedule lag grew over
    the step by more than half the target: the queue was building, and a longer run at this
    rate would miss the target however the step's own p99 came out.

    >>> s = CapacityStep(1, "sweep", 1000, 998, 0.4, 0.7, 1.5, 0.1, 2.0, 0, 40.0, 200.0, "")
    >>> p = SweepPolicy(2.0, 10.0)
    >>> judge_step(s, p), judge_step(s, SweepPolicy(1.0, 10.0))
    ('under', 'over')
    >>> from dataclasses import replace
    >>> judge_step(replace(s, client_cpu_pct=195.0), p), judge_step(replace(s, achieved_tps=700), p)
    ('client-bound', 'unsustained')
    """
    if step.asked_tps is None:
        return CLOSED
    if step.p99_ms is None:
        return FAILED
    if client_bound(step):
        return CLIENT_BOUND
    if not sustained(step.asked_tps, step.achieved_tps, policy):
        return UNSUSTAINED
    if step.lag_growth_ms is not None and step.lag_growth_ms > policy.target_p99_ms / 2:
        return UNSUSTAINED
    return UNDER if step.p99_ms <= policy.target_p99_ms else OVER


def client_bound(step: CapacityStep) -> bool:
    """pgbench used nearly all the CPU its threads could, or skipped transactions (-L): the
    load generator, not the server, set the pace."""
    if step.skipped > 0:
        return True
    cpu, most = step.client_cpu_pct, step.client_capacity_pct
    return cpu is not None and most is not None and cpu >= CLIENT_BOUND_SHARE * most


def step_of(run_id: int, record: RunRecord, phase: str, policy: SweepPolicy) -> CapacityStep:
    """A stored run as a step of the sweep, judged."""
    summary, latency, health = record.summary, record.latency, record.health
    ok = record.status == "ok" and summary is not None and latency is not None
    step = CapacityStep(
        run_id=run_id, phase=phase, asked_tps=record.rate,
        achieved_tps=summary.tps if summary is not None else 0.0,
        p50_ms=latency.p50_ms if ok and latency else None,
        p90_ms=latency.p90_ms if ok and latency else None,
        p95_ms=latency.p95_ms if ok and latency else None,
        p99_ms=latency.p99_ms if ok and latency else None,
        lag_avg_ms=summary.rate_lag_avg_ms if summary else None,
        lag_max_ms=summary.rate_lag_max_ms if summary else None,
        skipped=(summary.skipped_transactions or 0) if summary else 0,
        client_cpu_pct=health.client_cpu_pct, client_capacity_pct=health.client_capacity_pct,
        verdict="",
        lag_growth_ms=lag_growth(
            [(r.t, r.lag_avg_ms) for r in record.seconds if r.lag_avg_ms is not None]
        ),
    )  # fmt: skip
    if not ok and record.rate is not None:
        return replace(step, verdict=FAILED)
    if record.interference is not None and record.rate is not None:
        return replace(step, verdict=INTERFERED)  # a disturbed measurement: run again
    return replace(step, verdict=judge_step(step, policy))


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "": 1.0}
_LATENCY = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|)\s*")


def parse_latency_ms(text: str, option: str = "--p99") -> float:
    """A latency target such as 2ms, 500us, 0.5 or 1s, in milliseconds (a bare number: ms).

    >>> parse_latency_ms("2ms"), parse_latency_ms("500us"), parse_latency_ms("1.5")
    (2.0, 0.5, 1.5)
    >>> parse_latency_ms("abc")
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: --p99 'abc' is not a latency: write it like 2ms, 500us or 0.5s.
    """
    match = _LATENCY.fullmatch(text)
    value = float(match.group(1)) * _UNITS_MS[match.group(2)] if match else 0.0
    if not match or not math.isfinite(value):
        raise UsageError(f"{option} {text!r} is not a latency: write it like 2ms, 500us or 0.5s.")
    if value <= 0:
        raise UsageError(f"{option} {text!r} is no time at all: give a latency above 0.")
    return value


# -- The plan -----------------------------------------------------------------------------------


def _by_rate(steps: Sequence[CapacityStep]) -> dict[float, list[bool]]:
    """Per asked rate, whether each judged run was under (client-bound, disturbed and failed
    runs say nothing and are left out)."""
    found: dict[float, list[bool]] = {}
    for s in steps:
        if s.asked_tps is not None and s.verdict in (UNDER, OVER, UNSUSTAINED):
            found.setdefault(s.asked_tps, []).append(s.verdict == UNDER)
    return found


@dataclass(frozen=True)
class _Bracket:
    under: float | None  # the highest rate all under, below `other`
    other: float | None  # the lowest rate with a run not under
    over: float | None  # the lowest rate above `under` with every run not under


def _bracket(runs: dict[float, list[bool]]) -> _Bracket:
    not_good = [r for r, v in runs.items() if not all(v)]
    other = min(not_good, default=None)
    good = [r for r, v in runs.items() if all(v) and (other is None or r < other)]
    under = max(good, default=None)
    bad = [r for r, v in runs.items() if not any(v) and (under is None or r > under)]
    return _Bracket(under, other, min(bad, default=None))


def fits_budget(spent_s: float, steps_made: int, budget_s: float) -> bool:
    """Whether another step starts: the mean step so far still fits in what is left of the
    budget (the first step always starts).

    >>> fits_budget(0.0, 0, 10.0), fits_budget(8.0, 2, 12.0), fits_budget(9.0, 2, 12.0)
    (True, True, False)
    """
    return steps_made == 0 or spent_s + spent_s / steps_made <= budget_s


def next_step(
    steps: Sequence[CapacityStep], closed_tps: float, policy: SweepPolicy
) -> NextStep | str:
    """The next rate to run, or why the sweep is over (a stop word of records/capacity.py).

    >>> p = SweepPolicy(2.0, 2.0, repeats=2)
    >>> def s(rate, verdict): return CapacityStep(None, "", rate, rate, 1, 1, 1, 0, 0, 0,
    ...                                           None, None, verdict)
    >>> next_step([], 1000, p)
    NextStep(rate=250.0, phase='sweep')
    >>> next_step([s(250, "under"), s(500, "over")], 1000, p)
    NextStep(rate=375.0, phase='bisect')
    >>> done = [s(250, "under"), s(250, "under"), s(260, "over"), s(260, "over")]
    >>> next_step(done, 1000, p)
    'bracketed'
    """
    if len(steps) >= MOST_STEPS:
        return STEP_LIMIT
    if any(s.verdict == CLIENT_BOUND for s in steps):
        return CLIENT_LIMIT
    runs = _by_rate(steps)
    b = _bracket(runs)
    if b.other is None:
        return _up(runs, closed_tps)
    if b.under is None:
        return _down(b.other, closed_tps)
    if b.other > b.under * (1 + policy.precision_pct / 100):
        return NextStep(_round_rate((b.under + b.other) / 2), "bisect")
    if len(runs[b.under]) < policy.repeats:
        return NextStep(b.under, "repeat")
    if b.over is None:
        return _up(runs, closed_tps)
    if len(runs[b.over]) < policy.repeats:
        return NextStep(b.over, "repeat")
    return BRACKETED


def _up(runs: dict[float, list[bool]], closed_tps: float) -> NextStep | str:
    top = max(runs, default=None)
    for fraction in LADDER:
        rate = _round_rate(fraction * closed_tps)
        if top is None or rate > top:
            return NextStep(rate, "sweep")
    assert top is not None  # the ladder's first rate is always tried
    rate = _round_rate(top * LADDER_GROWTH)
    if rate > MOST_FRACTION * closed_tps:
        return NEVER_OVER
    return NextStep(rate, "sweep")


def _down(lowest: float, closed_tps: float) -> NextStep | str:
    rate = _round_rate(lowest / 2)
    if rate < LOWEST_FRACTION * closed_tps or rate < 1:
        return NEVER_UNDER
    return NextStep(rate, "sweep")


def _round_rate(rate: float) -> float:
    """A rate to three significant figures (pgbench takes -R as written).

    >>> _round_rate(12345.6), _round_rate(0.123456), _round_rate(375.0)
    (12300.0, 0.123, 375.0)
    """
    if rate <= 0:
        return 0.0
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, digits)


# -- The result ---------------------------------------------------------------------------------


def kneedle(x: Sequence[float], y: Sequence[float]) -> int | None:
    """Index of the knee of an increasing convex curve (offline Kneedle), None without one.

    Measured latencies zigzag (a noisy p99 can fall between two rates), so the curve Kneedle
    reads is the running maximum of `y` along `x`: the latency seen so far at or below each
    rate. The knee is never an end point.

    >>> kneedle([100, 200, 300, 400, 500], [1.0, 1.1, 1.3, 2.0, 8.0])
    3
    >>> kneedle([100, 200, 300, 400, 500], [1.0, 1.1, 9.0, 2.0, 8.0])  # running max: a step
    1
    >>> kneedle([1, 2, 3], [1, 2, 3]) is None, kneedle([1, 2, 3], [3, 1, 1]) is None
    (True, True)
    """
    if len(x) < 3:
        return None
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], np.maximum.accumulate(ys[order])
    span_x, span_y = xs[-1] - xs[0], ys[-1] - ys[0]
    if span_x <= 0 or span_y <= 0:
        return None
    diff = (xs - xs[0]) / span_x - (ys - ys[0]) / span_y
    best = int(np.argmax(diff))
    if diff[best] <= 1e-9 or best in (0, len(xs) - 1):
        return None
    return int(order[best])


@dataclass(frozen=True)
class CurvePoint:
    """One asked rate of the latency-throughput curve: medians over its sustained runs (p95
    None when a run of a sweep stored before p95 was kept has none)."""

    asked_tps: float
    achieved_tps: float
    p50_ms: float
    p95_ms: float | None
    p99_ms: float


def curve_of(steps: Sequence[CapacityStep]) -> list[CurvePoint]:
    """The latency-throughput curve: per asked rate, in order, the medians of the achieved rate
    and percentiles of its sustained runs (judged under or over: a step not sustained or
    client-bound measured the load generator's queue, not the server's latency).

    >>> s = [CapacityStep(1, "", 100, 99, 0.2, 0.3, 0.5, 0, 0, 0, None, None, "under",
    ...                   p95_ms=0.4),
    ...      CapacityStep(2, "", 100, 101, 0.5, 0.5, 0.9, 0, 0, 0, None, None, "under",
    ...                   p95_ms=0.6)]
    >>> curve_of(s)
    [CurvePoint(asked_tps=100, achieved_tps=100.0, p50_ms=0.35, p95_ms=0.5, p99_ms=0.7)]
    """
    per: dict[float, list[CapacityStep]] = {}
    for s in steps:
        if s.asked_tps is not None and s.p99_ms is not None and s.verdict in (UNDER, OVER):
            per.setdefault(s.asked_tps, []).append(s)
    points = []
    for rate in sorted(per):
        runs = per[rate]
        p95 = [s.p95_ms for s in runs if s.p95_ms is not None]
        points.append(CurvePoint(
            rate, _median([s.achieved_tps for s in runs]),
            _median([s.p50_ms or 0.0 for s in runs]),
            _median(p95) if len(p95) == len(runs) else None,
            _median([s.p99_ms or 0.0 for s in runs]),
        ))  # fmt: skip
    return points


def _median(values: Sequence[float]) -> float:
    return float(np.median(values))


def knee_of(steps: Sequence[CapacityStep]) -> Knee | None:
    """The knee of the sweep's curve (`curve_of`), by Kneedle on the p99 against the achieved
    rate."""
    curve = curve_of(steps)
    at = kneedle([c.achieved_tps for c in curve], [c.p99_ms for c in curve])
    if at is None:
        return None
    return Knee(curve[at].asked_tps, curve[at].achieved_tps, curve[at].p99_ms)


def capacity_of(
    steps: Sequence[CapacityStep],
    closed_tps: float | None,
    policy: SweepPolicy,
    stopped: str,
) -> Capacity:
    """The sweep's result: the rates confirmed under and over, the knee, and notes on what
    limits what it says."""
    runs = _by_rate(steps)
    b = _bracket(runs)
    under = b.under if b.under is not None and len(runs[b.under]) >= policy.repeats else None
    over = b.over if b.over is not None and len(runs[b.over]) >= policy.repeats else None
    return Capacity(
        target_p99_ms=policy.target_p99_ms, steps=tuple(steps), closed_tps=closed_tps,
        capacity_tps=under, over_tps=over if under is not None else None,
        confidence=policy.confidence, knee=knee_of(steps), stopped=stopped,
        repeats=policy.repeats, notes=tuple(_notes(steps, stopped, policy)),
    )  # fmt: skip


def compare_capacity(
    baseline: tuple[str, Capacity], candidate: tuple[str, Capacity]
) -> CapacityChange:
    """The candidate's capacity against the baseline's, at the same p99 target.

    Each sweep's interval covers its capacity with at least its confidence, so both do with at
    least 1 - (1 - c_A) - (1 - c_B) (Bonferroni), and then the ratio of the capacities lies in
    [low_B / high_A, high_B / low_A]. The verdict says *more* or *less* only when that whole
    interval is above or below 1; tests/unit/test_capacity_sim.py measures the false verdicts
    of an A/A pair and the power against a faster server.

    >>> a = Capacity(5.0, (), None, 1000.0, 1050.0, 0.9375, None, "bracketed", 5)
    >>> b = Capacity(5.0, (), None, 1200.0, 1250.0, 0.9375, None, "bracketed", 5)
    >>> c = compare_capacity(("A", a), ("B", b))
    >>> c.verdict, round(c.change_pct, 1), round(c.low_pct, 1), round(c.high_pct, 1), c.confidence
    ('more', 19.5, 14.3, 25.0, 0.875)
    >>> compare_capacity(("A", a), ("A again", a)).verdict
    'no detectable difference'
    >>> one = Capacity(5.0, (), None, 1000.0, 1050.0, 0.0, None, "bracketed", 1)
    >>> compare_capacity(("A", one), ("B", b)).verdict
    'unknown'
    """
    (name_a, a), (name_b, b) = baseline, candidate
    if a.target_p99_ms != b.target_p99_ms:
        raise UsageError(
            f"{name_a} was swept at p99 <= {a.target_p99_ms:g} ms and {name_b} at "
            f"{b.target_p99_ms:g} ms: capacities compare at one target only."
        )
    confidence = max(0.0, 1.0 - (1.0 - a.confidence) - (1.0 - b.confidence))
    ends = (a.capacity_tps, a.over_tps, b.capacity_tps, b.over_tps)
    if any(e is None for e in ends):
        missing = ", ".join(n for n, c in ((name_a, a), (name_b, b))
                            if c.capacity_tps is None or c.over_tps is None)  # fmt: skip
        return CapacityChange(name_a, name_b, a.target_p99_ms, None, None, None, confidence,
                              UNKNOWN, f"not bracketed: {missing}")  # fmt: skip
    if confidence <= 0:
        return CapacityChange(name_a, name_b, a.target_p99_ms, None, None, None, confidence,
                              UNKNOWN, "too few runs at the ends of the intervals for a "
                              "stated confidence: sweep with --repeats (in a plan, "
                              "capacity_repeats) 3 or more")  # fmt: skip
    low_a, high_a, low_b, high_b = (float(e) for e in ends)  # type: ignore[arg-type]
    low, high = low_b / high_a - 1.0, high_b / low_a - 1.0
    change = (low_b + high_b) / (low_a + high_a) - 1.0
    verdict = MORE if low > 0 else LESS if high < 0 else SAME
    return CapacityChange(name_a, name_b, a.target_p99_ms, 100 * change, 100 * low, 100 * high,
                          confidence, verdict)  # fmt: skip


def against_baseline(sweeps: Sequence[tuple[str, Capacity]], baseline: str) -> list[CapacityChange]:
    """Every set's sweep judged against the baseline set's (a plan's sets compared on
    capacity), in the sets' order.

    >>> a = Capacity(5.0, (), None, 1000.0, 1050.0, 0.9375, None, "bracketed", 5)
    >>> b = Capacity(5.0, (), None, 1200.0, 1250.0, 0.9375, None, "bracketed", 5)
    >>> [(c.candidate, c.verdict) for c in against_baseline([("a", a), ("b", b), ("c", a)], "a")]
    [('b', 'more'), ('c', 'no detectable difference')]
    >>> against_baseline([("b", b)], "a")
    []
    """
    found = dict(sweeps)
    if baseline not in found:
        return []
    return [compare_capacity((baseline, found[baseline]), (name, sweep))
            for name, sweep in sweeps if name != baseline]  # fmt: skip


def change_line(change: CapacityChange) -> str:
    """
    >>> change_line(CapacityChange("A", "B", 5.0, 18.0, 9.0, 27.0, 0.875, "more"))
    'B carries +18% [+9, +27] more load than A at p99 <= 5 ms (>= 87.5% confidence)'
    >>> change_line(CapacityChange("A", "B", 5.0, -1.0, -6.0, 4.0, 0.875, SAME))
    'B against A at p99 <= 5 ms: -1% [-6, +4], no detectable difference (>= 87.5% confidence)'
    """
    at = f"at p99 <= {change.target_p99_ms:g} ms"
    if change.change_pct is None or change.low_pct is None or change.high_pct is None:
        return f"{change.candidate} against {change.baseline} {at}: unknown ({change.reason})"
    figures = f"{change.change_pct:+.0f}% [{change.low_pct:+.0f}, {change.high_pct:+.0f}]"
    level = f"(>= {100 * change.confidence:.1f}% confidence)"
    if change.verdict == MORE:
        return f"{change.candidate} carries {figures} more load than {change.baseline} {at} {level}"
    if change.verdict == LESS:
        return f"{change.candidate} carries {figures} less load than {change.baseline} {at} {level}"
    return f"{change.candidate} against {change.baseline} {at}: {figures}, {change.verdict} {level}"


def _notes(steps: Sequence[CapacityStep], stopped: str, policy: SweepPolicy) -> list[str]:
    notes = []
    bound = [s for s in steps if s.verdict == CLIENT_BOUND]
    if bound:
        s = bound[0]
        notes.append(
            f"the load generator could not keep up at {s.asked_tps:g} tx/s (pgbench "
            f"{_cpu(s)}): the server's limit is not measured there; run pgbench with more "
            "threads (--jobs) or from another host"
        )
    if stopped == NEVER_OVER:
        notes.append(f"the p99 stayed under {policy.target_p99_ms:g} ms up to the highest rate "
                     "tried: the capacity is at least that")  # fmt: skip
    if stopped == NEVER_UNDER:
        notes.append(f"the p99 was over {policy.target_p99_ms:g} ms even at the lowest rate "
                     "tried")  # fmt: skip
    if stopped in (BUDGET, STEP_LIMIT):
        notes.append("the budget ran out before both ends of the interval were confirmed: "
                     "give a larger --budget")  # fmt: skip
    disturbed = sum(1 for s in steps if s.verdict == INTERFERED)
    if disturbed:
        notes.append(f"{disturbed} steps were disturbed by other processes (pgdyno's "
                     "interference check) and not judged: each was run again")  # fmt: skip
    if any(s.verdict == FAILED for s in steps):
        notes.append("some steps failed: see `pgdyno runs show ID`")
    return notes


def _cpu(step: CapacityStep) -> str:
    if step.skipped:
        return f"skipped {step.skipped} transactions"
    return f"used {step.client_cpu_pct or 0:.0f}% CPU of {step.client_capacity_pct or 0:.0f}%"


__all__ = [
    "BRACKETED",
    "BUDGET",
    "CurvePoint",
    "NextStep",
    "SweepPolicy",
    "against_baseline",
    "capacity_of",
    "change_line",
    "compare_capacity",
    "curve_of",
    "fits_budget",
    "judge_step",
    "kneedle",
    "lag_growth",
    "next_step",
    "parse_latency_ms",
    "step_of",
]
