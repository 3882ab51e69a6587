"""Rounds: how many, in which order, and for how long (adaptive repeats).

A round runs every set (compare) or every cell (bench) once. With a fixed number of repeats the
rounds are counted; with ``precision`` / ``budget`` they go on until
`pgdyno.stats.stopping.decide` says stop. `run_rounds` is the loop and `judge_round` the look
after each round of a compare; `pgdyno.experiment.sets_runner` runs them with pgbench, and
tests/unit/test_plan_error_sim.py with simulated pgbench outcomes. Within a round the sets run
in the order the schedule's design gives (`pgdyno.experiment.schedule`): compare's `Balanced`
design runs every set first, second, ... equally often and right after every set equally
often, so neither a position effect (the first run after a restart is slower) nor the set that
ran before (a checkpoint it left) favours one set in the paired differences.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pgdyno.errors import UsageError
from pgdyno.experiment.schedule import Rotation, Schedule
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.analysis import SWITCHED, Analysis, Judging, analyse
from pgdyno.stats.levels import MAX_REPEATS
from pgdyno.stats.stopping import MIN_ROUNDS, Decision, decide
from pgdyno.stats.verdict import SAME, ChangeVerdict

DEFAULT_PRECISION_PCT: Final = 2.0
DEFAULT_BUDGET_S: Final = 20 * 60.0
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_budget(text: str, option: str = "--budget") -> float:
    """A machine-time budget such as 90s, 20m, 1h or 1h30m, in seconds.

    >>> parse_budget("20m"), parse_budget("1h30m"), parse_budget("45s")
    (1200.0, 5400.0, 45.0)
    >>> parse_budget("20")
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: --budget '20' is not a duration: write it like 90s, 20m or 1h30m.
    """
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise UsageError(f"{option} {text!r} is not a duration: write it like 90s, 20m or 1h30m.")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = hours * 3600.0 + minutes * 60.0 + seconds
    if total <= 0:
        raise UsageError(f"{option} {text!r} is no time at all: give at least a few minutes.")
    return total


@dataclass(frozen=True)
class Adaptive:
    """Rounds until every comparison is resolved to `precision_pct` or `budget_s` is spent."""

    precision_pct: float = DEFAULT_PRECISION_PCT
    budget_s: float = DEFAULT_BUDGET_S

    def most_rounds(self, round_s: float) -> int:
        """Rounds of about `round_s` seconds the budget could hold, for a progress bar (an upper
        bound: the rounds usually stop sooner; at least the MIN_ROUNDS always run).

        >>> Adaptive(2.0, 600.0).most_rounds(45.0), Adaptive(2.0, 60.0).most_rounds(45.0)
        (13, 2)
        """
        fits = math.floor(self.budget_s / round_s) if round_s > 0 else MAX_REPEATS
        return max(MIN_ROUNDS, min(MAX_REPEATS, fits))


@dataclass
class RoundLog:
    """What the rounds did, for the results: their orders and durations, and why they stopped."""

    adaptive: Adaptive | None
    clock: Callable[[], float] = time.monotonic
    orders: list[list[str]] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    decision: Decision | None = None
    design: str = "rotation"  # the schedule's design and seed (RoundLoop sets them)
    seed: int | None = None
    _started: float | None = None
    _round_start: float = 0.0

    def begin(self, order: Sequence[str]) -> None:
        if self._started is None:
            self._started = self.clock()
        self.orders.append(list(order))
        self._round_start = self.clock()

    def end(self) -> None:
        self.durations.append(self.clock() - self._round_start)

    @property
    def elapsed_s(self) -> float:
        return 0.0 if self._started is None else self.clock() - self._started

    @property
    def mixture_rounds(self) -> int | None:
        """The rounds the budget holds at the first round's duration, fixed when that round
        ends and never moved by the data: what the always-valid interval is tuned to (None for
        fixed rounds and before the first round ends)."""
        if self.adaptive is None or not self.durations:
            return None
        return self.adaptive.most_rounds(self.durations[0])

    @property
    def round_s(self) -> float:
        """Expected duration of the next round: the mean of those so far."""
        return sum(self.durations) / len(self.durations) if self.durations else 0.0

    def history(self) -> RoundHistory:
        """The rounds so far as a record (the store keeps it after every round)."""
        decision = self.decision
        unresolved = decision is not None and bool(decision.unresolved)
        more_seconds = decision.more_seconds if decision is not None and unresolved else None
        return RoundHistory(
            mode="adaptive" if self.adaptive else "fixed",
            rounds=len(self.durations),
            order=tuple(tuple(order) for order in self.orders),
            seconds=round(sum(self.durations), 1),
            stopped=decision.reason if decision else ("repeats" if self.durations else None),
            unresolved=decision.unresolved if decision else None,
            more_rounds=decision.more_rounds if decision is not None and unresolved else None,
            more_seconds=None if more_seconds is None else round(more_seconds, 1),
            precision_pct=self.adaptive.precision_pct if self.adaptive else None,
            budget_s=self.adaptive.budget_s if self.adaptive else None,
            design=self.design,
            seed=self.seed,
            mixture_rounds=self.mixture_rounds,
        )


class RoundLoop[T]:
    """The one run loop of bench, compare, noise and `tune --verify`, steppable: `run_round`
    runs the next round of the schedule (each unit through `run_one(unit, round_no)`), `judge`
    says whether the rounds end after it (`after(round_no)`, which judges what it holds in
    memory), `run` does both until they end. A tuning search can drive it one round (one trial)
    at a time; a design drawn per round, a set switched inside one pgbench run or a target per
    set change what `schedule` and `run_one` hold, not this loop.

    >>> seen = []
    >>> loop = RoundLoop(Schedule(("a", "b"), Rotation()), RoundLog(None),
    ...                  lambda x, r: seen.append(x), lambda r: r == 2, str)
    >>> loop.run_round(), loop.judge(), loop.run_round(), loop.judge()
    (['a', 'b'], False, ['b', 'a'], True)
    >>> loop.rounds_run, "".join(seen), loop.log.orders
    (2, 'abba', [['a', 'b'], ['b', 'a']])
    """

    def __init__(
        self,
        schedule: Schedule[T],
        log: RoundLog,
        run_one: Callable[[T, int], None],
        after: Callable[[int], bool],
        name: Callable[[T], str],
        *,
        done: int = 0,
    ) -> None:
        """`done`: rounds an earlier invocation ran (a resumed switched run goes on after
        them, with their round numbers left as they are)."""
        self.schedule = schedule
        self.log = log
        self.run_one = run_one
        self.after = after
        self.name = name
        self.rounds_run = done
        log.design, log.seed = schedule.design.name, schedule.design.seed

    def run_round(self) -> list[T]:
        """Run the next round; the units in the order they ran."""
        round_no = self.rounds_run + 1
        order = self.schedule.round(round_no)
        self.log.begin([self.name(unit) for unit in order])
        for unit in order:
            self.run_one(unit, round_no)
        self.log.end()
        self.rounds_run = round_no
        return order

    def judge(self) -> bool:
        """Whether the rounds end after the last one run."""
        return self.after(self.rounds_run)

    def run(self) -> int:
        """Rounds until `judge` says stop; the number of rounds run."""
        while True:
            self.run_round()
            if self.judge():
                return self.rounds_run


def run_rounds[T](
    items: Sequence[T],
    log: RoundLog,
    run_one: Callable[[T, int], None],
    after: Callable[[int], bool],
    name: Callable[[T], str],
) -> int:
    """Rounds of every item in rotated order until `after(round_no)` says stop; the rounds run.

    >>> seen = []
    >>> run_rounds("ab", RoundLog(None), lambda x, r: seen.append(x), lambda r: r == 3, str)
    3
    >>> "".join(seen)
    'abbaab'
    """
    return RoundLoop(Schedule(tuple(items), Rotation()), log, run_one, after, name).run()


# A set with no usable run yet in a cell (all failed or discarded): unresolved, time unknown.
NOTHING_YET = ChangeVerdict(0.0, None, None, SAME, False, None)


def watched(analysis: Analysis) -> list[ChangeVerdict]:
    """The comparisons adaptive rounds wait for: TPS of every set against the baseline, and of
    every ladder step against the step before (see pgdyno.stats.stopping)."""
    found = [
        r.tps_change or NOTHING_YET for r in analysis.results if r.set_name != analysis.baseline
    ]
    for _, lad in analysis.ladders:
        found.extend(s.step_gain for s in lad.steps if s.step_gain is not None)
    return found


@dataclass(frozen=True)
class RoundPlan:
    """What the look after a round judges: the sets in plan order, the baseline, the mode."""

    set_names: tuple[str, ...]
    baseline: str
    mode: str


def judge_round(
    runs: Sequence[RunOutcome], plan: RoundPlan, adaptive: Adaptive, log: RoundLog, round_no: int
) -> Analysis:
    """The look after round `round_no`: every comparison with its always-valid interval at its
    share of the plan-wide error, and whether to stop (set on `log.decision`)."""
    judging = Judging(
        sequential=True, mixture_rounds=log.mixture_rounds, switched=log.design == SWITCHED
    )
    analysis = analyse(runs, plan.set_names, plan.baseline, plan.mode, judging)
    log.decision = decide(
        watched(analysis), precision_pct=adaptive.precision_pct, rounds=round_no,
        elapsed_s=log.elapsed_s, round_s=log.round_s, budget_s=adaptive.budget_s,
    )  # fmt: skip
    return analysis
