"""When adaptive rounds stop: every comparison resolved, or the budget spent (pure).

After each round the runner analyses what it has and asks `decide`. A comparison is resolved
when its always-valid interval (`pgdyno.stats.sequential`) gives a verdict (it lies on one side
of zero and the change clears the floor), or when it is at most ``precision`` wide each way
(no change that large either way). The rounds go on while a comparison is unresolved and the
next round fits in the budget. Since the interval is valid at every round, stopping as soon as
it says so costs no false alarms.

What is watched: the TPS comparisons (every set against the baseline, and a ladder's steps
against the step before). p99 latency is judged with the same kind of interval at the same
rounds, and is as valid there, but it does not hold the rounds open: its spread is often several
times that of TPS and would spend any budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pgdyno.stats.dependence import inflation
from pgdyno.stats.levels import MAX_REPEATS
from pgdyno.stats.sequential import half_width, rounds_for_precision
from pgdyno.stats.summary import require_positive
from pgdyno.stats.verdict import SAME, ChangeVerdict

__all__ = ["MIN_ROUNDS", "Decision", "decide", "is_resolved", "level_interval", "rounds_left"]

MIN_ROUNDS = 2  # the fewest rounds with a spread to judge by


@dataclass(frozen=True, slots=True)
class Decision:
    stop: bool
    reason: str  # resolved / budget / max rounds; "" while going on
    unresolved: int  # watched comparisons not yet resolved
    more_rounds: int | None  # estimated rounds still needed to resolve them all
    more_seconds: float | None  # the same in machine time, at the rounds' mean duration


def is_resolved(change: ChangeVerdict, precision_pct: float) -> bool:
    """A verdict; an interval (the one the verdict rests on: `ChangeVerdict.verdict_interval`)
    at most `precision_pct` wide each way; or an erratic comparison (its intervals disagree,
    which more rounds cannot undo: they are intersected over the looks).

    >>> from pgdyno.stats.verdict import ChangeVerdict
    >>> is_resolved(ChangeVerdict(0.5, -1.0, 2.0, "no detectable difference", False, None), 2.0)
    True
    >>> is_resolved(ChangeVerdict(0.5, -3.0, 4.0, "no detectable difference", False, None), 2.0)
    False
    """
    if change.verdict != SAME or change.erratic:
        return True
    low, high = change.verdict_interval
    if low is None or high is None:
        return False
    return (high - low) / 2.0 <= precision_pct


def level_interval(values: Sequence[float]) -> ChangeVerdict:
    """The always-valid interval of a cell's level (`bench --repeats auto`): the geometric mean
    of its runs' figures, as a change of 0% relative to itself with the interval around it.

    >>> c = level_interval([100.0, 101.0, 99.0, 100.5, 99.5, 100.2])
    >>> c.pairs, round(c.ci_low_pct, 1), round(c.ci_high_pct, 1)
    (6, -1.7, 1.7)
    """
    if values:
        require_positive(values, "level")
    logs = [math.log(v) for v in values]
    n = len(logs)
    if n < 2:  # nothing to judge by yet: unresolved
        return ChangeVerdict(0.0, None, None, SAME, False, None, "sequential", n, 0, None)
    mean = math.fsum(logs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1))
    half = half_width(n, sd)
    if not math.isfinite(half):
        return ChangeVerdict(0.0, None, None, SAME, False, None, "sequential", n, 0, sd)
    low, high = 100.0 * math.expm1(-half), 100.0 * math.expm1(half)
    return ChangeVerdict(0.0, low, high, SAME, False, None, "sequential", n, 0, sd)


def rounds_left(change: ChangeVerdict, precision_pct: float) -> int | None:
    """Further rounds the comparison needs, if its spread stays as measured: until the mean's
    interval is at most ``precision_pct`` wide each way, which resolves it whatever the change
    (the t-mixture at its half of the comparison's error, widened for clearly dependent
    rounds); None without a spread.

    The change seen is not used: at an adaptive look it is biased away from zero (the rounds
    go on while it is small and stop when it happens to be far out), so a forecast from it would
    promise too few rounds (issue 33). The spread and the precision target are not selected
    that way.

    >>> from dataclasses import replace
    >>> c = ChangeVerdict(9.0, -1.0, 20.0, "no detectable difference", False, None,
    ...                   "sequential", 6, 0, 0.03, 0.025)
    >>> rounds_left(c, 2.0) == rounds_left(replace(c, change_pct=0.1), 2.0)
    True
    """
    if change.sd_log is None or not change.pairs:
        return None
    sd = change.sd_log * inflation(change.autocorrelation, change.pairs)
    needed = rounds_for_precision(sd, precision_pct, alpha=change.alpha / 2.0)
    return max(1, needed - change.pairs)


def decide(
    watched: Sequence[ChangeVerdict],
    *,
    precision_pct: float,
    rounds: int,
    elapsed_s: float,
    round_s: float,
    budget_s: float,
) -> Decision:
    """Whether to run another round after `rounds` rounds taking `elapsed_s` in all.

    `round_s` is the expected duration of the next round (the mean so far).

    >>> ok = ChangeVerdict(5.0, 2.0, 8.0, "better", False, None, "sequential", 6, 0, 0.02)
    >>> open_ = ChangeVerdict(1.0, -5.0, 7.0, "no detectable difference", False, None,
    ...                    "sequential", 6, 0, 0.04)
    >>> decide([ok], precision_pct=2, rounds=6, elapsed_s=60, round_s=10, budget_s=600).reason
    'resolved'
    >>> d = decide([ok, open_], precision_pct=2, rounds=6, elapsed_s=595, round_s=10, budget_s=600)
    >>> d.reason, d.unresolved, d.more_rounds
    ('budget', 1, 56)
    """
    unresolved = [c for c in watched if not is_resolved(c, precision_pct)]
    left = [rounds_left(c, precision_pct) for c in unresolved]
    more = max((n for n in left if n is not None), default=None) if unresolved else 0
    more_s = more * round_s if more is not None else None
    if rounds < MIN_ROUNDS:
        return Decision(False, "", len(unresolved), more, more_s)
    if not unresolved:
        return Decision(True, "resolved", 0, 0, 0.0)
    if rounds >= MAX_REPEATS:
        return Decision(True, "max rounds", len(unresolved), more, more_s)
    if elapsed_s + round_s > budget_s or not math.isfinite(round_s):
        return Decision(True, "budget", len(unresolved), more, more_s)
    return Decision(False, "", len(unresolved), more, more_s)
