"""A capacity sweep (`pgdyno capacity`): its open-loop steps and what they say about the load
the server carries while its p99 latency stays under a target (stats/capacity.py judges)."""

from __future__ import annotations

from dataclasses import dataclass

# How one step is judged (stats/capacity.py `judge_step`).
UNDER = "under"  # the rate was carried and the p99 stayed at or under the target
OVER = "over"  # the p99 went over the target
UNSUSTAINED = "unsustained"  # pgbench could not start the transactions at the asked rate
CLIENT_BOUND = "client-bound"  # pgbench itself was the limit (its CPU): the step says nothing
FAILED = "failed"  # the run failed
INTERFERED = "interfered"  # other processes took CPU from the run: not judged, run again
CLOSED = "closed"  # the closed-loop run that sizes the sweep, not judged

# Why a sweep stopped.
BRACKETED = "bracketed"  # a rate confirmed under and the next confirmed over
BUDGET = "budget"
CLIENT_LIMIT = "client-limit"  # the load generator could not keep up: not the server's limit
NEVER_OVER = "never-over"  # the highest rate tried still stayed under
NEVER_UNDER = "never-under"  # even the lowest rate tried went over
STEP_LIMIT = "step-limit"  # the most steps a sweep makes
# Not stopped: the sweep as kept after each step; one interrupted stays so (compare --resume
# goes on with it).
RUNNING = "running"


@dataclass(frozen=True, slots=True)
class CapacityStep:
    """One run of a sweep: the rate asked of pgbench (`-R`; None for the closed-loop run), what
    it achieved, the latency percentiles measured from each transaction's scheduled start, the
    schedule lag, and pgbench's own CPU (to tell a load generator that could not keep up)."""

    run_id: int | None
    phase: str  # closed, sweep, bisect, repeat
    asked_tps: float | None
    achieved_tps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    lag_avg_ms: float | None
    lag_max_ms: float | None
    skipped: int
    client_cpu_pct: float | None  # pgbench's CPU, % of one core
    client_capacity_pct: float | None  # the CPU its threads could use
    verdict: str  # UNDER, OVER, ... (judged when the step is made)
    # How much the schedule lag grew over the step (least-squares line through its per-second
    # means, end minus start); None with fewer than 3 seconds.
    lag_growth_ms: float | None = None
    p95_ms: float | None = None  # absent in the sweeps stored before it was measured


@dataclass(frozen=True, slots=True)
class Knee:
    """The knee of the latency-throughput curve (Kneedle on the p99 against achieved rate)."""

    asked_tps: float
    achieved_tps: float
    p99_ms: float


@dataclass(frozen=True, slots=True)
class Capacity:
    """What a sweep found. `capacity_tps` is the highest asked rate confirmed under the target
    (every one of its `repeats` runs under); `over_tps` the lowest rate above it confirmed over
    (every run over or not sustained). The rate at which the p99 crosses the target lies in
    [capacity_tps, over_tps] with at least `confidence` (stats/capacity.py)."""

    target_p99_ms: float
    steps: tuple[CapacityStep, ...]
    closed_tps: float | None  # the closed-loop rate the sweep started from
    capacity_tps: float | None  # None: no rate confirmed under
    over_tps: float | None  # None: no rate confirmed over
    confidence: float
    knee: Knee | None
    stopped: str  # BRACKETED, BUDGET, ...
    repeats: int
    notes: tuple[str, ...] = ()


# A comparison of two sweeps' capacities (stats/capacity.py `compare_capacity`).
MORE = "more"  # the candidate carries more load at the target
LESS = "less"
SAME = "no detectable difference"
UNKNOWN = "unknown"  # a sweep did not bracket its capacity


@dataclass(frozen=True, slots=True)
class CapacityChange:
    """The candidate's capacity against the baseline's at one p99 target: the change in %
    (from the middles of the two intervals) and the interval it lies in with at least
    `confidence` (both sweeps' intervals covering their capacities)."""

    baseline: str
    candidate: str
    target_p99_ms: float
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    confidence: float
    verdict: str
    reason: str = ""  # why the verdict is unknown
