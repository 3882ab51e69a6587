"""A plan's sets compared on capacity beside TPS (`[matrix] capacity_p99`): every set's
open-loop sweep (experiment/capacity.py `Sweep`, planned and judged by stats/capacity.py), the
sweeps' steps interleaved.

The sweeps run after the comparison's TPS rounds, in rounds of their own: each round takes the
next step of every set still sweeping, in the order the comparison's design draws for that
round (`Design.order`: balanced for the set that ran before), the step's set put in effect
first as `compare` puts it for a run (`SetInEffect.applied`: host settings, the switcher's
reload or restart, the values read back). Each set's planner sees its own steps only, so
interleaving changes nothing in what a sweep asks; it spreads a host's slow drift over all
sets' steps alike instead of over the set swept last. Each set starts from its closed-loop
rate as the comparison just measured it (the median TPS of its runs), else one closed-loop
step made first. The budget is split evenly: each set's sweep stops when its next step no
longer fits in its share. Every sweep is a session of its own (`sessions.capacity`, as
`pgdyno capacity` stores one; its runs carry the set's name and no comparison, so the TPS
verdicts never see an open-loop run), rewritten after each step.

On `compare --resume` a set whose sweep ended is not swept again, and a sweep that was cut off
(kept as `running`) goes on from its steps and closed-loop rate in a new session, which holds
the earlier steps too; the earlier steps count against the set's budget share at the planned
time a step takes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.experiment.bench import Connected
from pgdyno.experiment.capacity import MIN_STEPS, CapacityPlan, Sweep, plan_or_stop
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import BenchSpec, expand, seconds_per_run
from pgdyno.experiment.rounds import parse_budget
from pgdyno.experiment.schedule import Design
from pgdyno.experiment.session import recorded_session
from pgdyno.host.machine import HostFacts
from pgdyno.plan.check import CheckedSet
from pgdyno.plan.load import Plan
from pgdyno.records import RunCell
from pgdyno.records.capacity import FAILED, RUNNING, Capacity, CapacityStep
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.capacity import (
    NextStep,
    SweepPolicy,
    capacity_of,
    parse_latency_ms,
)

# Puts a set in effect and connects to its server for one step (sets_runner.SetInEffect).
type Apply = Callable[[CheckedSet], AbstractContextManager[Connected]]


def capacity_plan(plan: Plan, sets: int) -> CapacityPlan | None:
    """The plan's capacity sweep (`[matrix] capacity_p99` and its companions), None without
    one; a value that cannot be read, or a budget that cannot hold two steps a set, is refused
    in one sentence at its line."""
    m = plan.spec.matrix
    if m.capacity_p99 is None:
        return None
    where = plan.where(("matrix",))
    try:
        target = parse_latency_ms(m.capacity_p99, "capacity_p99")
        budget = parse_budget(m.capacity_budget, "capacity_budget")
    except PgdynoError as exc:
        raise UsageError(f"{where}: {exc}") from None
    per_step = m.capacity_step + seconds_per_run(_NO_RUN)
    if budget < MIN_STEPS * per_step * max(1, sets):
        raise UsageError(
            f"{where}: capacity_budget {m.capacity_budget} holds fewer than {MIN_STEPS} steps of "
            f"about {per_step:.0f} s for each of the {sets} sets: give at least "
            f"{MIN_STEPS * per_step * max(1, sets):.0f}s or shorter steps (capacity_step)."
        )
    policy = SweepPolicy(target, m.capacity_step, repeats=m.capacity_repeats)
    return CapacityPlan(policy, budget)


def step_spec(spec: BenchSpec, plan: CapacityPlan) -> BenchSpec:
    """The comparison's bench spec as one sweep step runs it: `capacity_step` seconds, no
    warm-up (as `pgdyno capacity`), one run, no rate, latency limit nor adaptive rounds."""
    return spec.model_copy(update={
        "duration_s": int(plan.policy.step_s), "warmup_s": 0, "repeats": 1, "rate": None,
        "latency_limit_ms": None, "precision_pct": None, "budget_s": None,
    })  # fmt: skip


_NO_RUN = BenchSpec.model_construct(duration_s=0, warmup_s=0)


def closed_rates(outcomes: Sequence[RunOutcome]) -> dict[str, float]:
    """Each set's closed-loop rate as the comparison measured it: the median TPS of its
    finished runs.

    >>> from pgdyno.records.health import RunHealth
    >>> def run(i, name, tps, status="ok"):
    ...     return RunOutcome(i, name, status, "select-only", 1, 2, i, tps, None, None,
    ...                       RunHealth(), "18")
    >>> closed_rates([run(1, "a", 100.0), run(2, "a", 300.0), run(3, "a", 120.0),
    ...               run(4, "b", 50.0, "failed"), run(5, "b", None)])
    {'a': 120.0}
    """
    per: dict[str, list[float]] = {}
    for o in outcomes:
        if o.set_name is not None and o.status == "ok" and o.tps is not None and o.tps > 0:
            per.setdefault(o.set_name, []).append(o.tps)
    return {name: statistics.median(tps) for name, tps in per.items()}


@dataclass(frozen=True)
class SetSweep:
    """One set's sweep: its session, its runs and what it found."""

    set_name: str
    session_id: int
    run_ids: tuple[int, ...]
    result: Capacity


@dataclass(frozen=True)
class SweepsJob:
    """What `sweep_sets` runs: the sets, the comparison's bench spec and scales, the sweep's
    plan, each set's closed-loop rate (from the comparison's runs), the design that orders each
    round's steps, and what the sessions record (the command, the comparison)."""

    sets: tuple[CheckedSet, ...]
    spec: BenchSpec
    scales: list[int]
    plan: CapacityPlan
    closed: Mapping[str, float]
    design: Design
    command: list[str]
    comparison: tuple[str, int]  # the plan's name and the comparison's id
    # The comparison's sweeps stored so far, newest per set (store `comparison_sweeps`): on
    # --resume, set name -> (session, sweep).
    earlier: Mapping[str, tuple[int, Capacity]] = field(default_factory=dict)


@dataclass
class _SetState:
    """A set's sweep in progress: its session, the sweep (made at its first step), its
    closed-loop rate and the machine time its steps took."""

    checked: CheckedSet
    session_id: int
    closed: float | None
    sweep: Sweep | None = None
    spent_s: float = 0.0
    stopped: str | None = field(default=None)
    before: tuple[CapacityStep, ...] = ()  # a cut-off sweep's steps, gone on with

    @property
    def steps(self) -> Sequence[CapacityStep]:
        return self.before if self.sweep is None else self.sweep.steps


def sweep_sets(
    job: SweepsJob, apply: Apply, host: HostFacts, ctx: RunContext,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[SetSweep, ...]:  # fmt: skip
    """Sweep every set, their steps interleaved round by round, until each has stopped."""
    spec = step_spec(job.spec, job.plan)
    (cell,) = expand(spec, job.scales, host.cpu_count)
    share = job.plan.budget_s / len(job.sets)
    name, comparison_id = job.comparison
    ctx.log(
        f"capacity at p99 <= {job.plan.policy.target_p99_ms:g} ms: every set swept, their "
        f"steps interleaved, {share:.0f} s of steps a set"
    )
    ended = {s.name: _ended(s.name, *job.earlier[s.name]) for s in job.sets
             if s.name in job.earlier and job.earlier[s.name][1].stopped != RUNNING}  # fmt: skip
    for done in ended.values():
        ctx.log(f"set {done.set_name}: its sweep ended before ({done.result.stopped}, session "
                f"{done.session_id}); not swept again")  # fmt: skip
    with ExitStack() as stack:
        states = [
            _resumed(_SetState(s, stack.enter_context(recorded_session(
                ctx, job.command, f"compare {name}: capacity of set {s.name}", host,
                {"plan": name, "comparison_id": comparison_id, "set": s.name},
            )), job.closed.get(s.name)), job.earlier.get(s.name), seconds_per_run(spec), ctx)
            for s in job.sets if s.name not in ended
        ]  # fmt: skip
        turn = _Turns(spec, job.plan, ctx, cell, apply, clock, share)
        round_no = 0
        while any(state.stopped is None for state in states):
            round_no += 1
            for state in job.design.order(states, round_no):
                if state.stopped is None:
                    state.stopped = turn.take(state)
        swept = {state.checked.name: turn.finished(state) for state in states}
    return tuple(ended.get(s.name) or swept[s.name] for s in job.sets)


def _ended(set_name: str, session_id: int, found: Capacity) -> SetSweep:
    run_ids = tuple(s.run_id for s in found.steps if s.run_id is not None)
    return SetSweep(set_name, session_id, run_ids, found)


def _resumed(
    state: _SetState, earlier: tuple[int, Capacity] | None, per_step_s: float, ctx: RunContext
) -> _SetState:
    """A set's state going on from its cut-off sweep (kept as running), if it has one: its
    steps, its closed-loop rate, and their planned time spent."""
    if earlier is None or not earlier[1].steps:
        return state
    session_id, found = earlier
    ctx.log(f"set {state.checked.name}: its sweep goes on after step {len(found.steps)} "
            f"(session {session_id}, cut off)")  # fmt: skip
    state.before = found.steps
    state.closed = found.closed_tps if found.closed_tps is not None else state.closed
    state.spent_s = len(found.steps) * per_step_s
    return state


@dataclass(frozen=True)
class _Turns:
    """Takes one set's turn: its next step run with the set in effect, or why it stops."""

    spec: BenchSpec
    plan: CapacityPlan
    ctx: RunContext
    cell: RunCell
    apply: Apply
    clock: Callable[[], float]
    share_s: float  # each set's machine time

    def take(self, state: _SetState) -> str | None:
        closed, plan = state.closed, None
        if closed is None and state.steps:
            return FAILED  # its closed-loop step failed: nothing to start from
        if closed is not None:
            planned = plan_or_stop(
                state.steps, closed, self.plan.policy, state.spent_s, self.share_s
            )
            if not isinstance(planned, NextStep):
                return planned
            plan = planned
        started = self.clock()
        with self.apply(state.checked) as ready:
            sweep = self._sweep_of(state, ready)
            self.ctx.progress.phase(
                f"set {state.checked.name}: capacity step {len(sweep.steps) + 1}"
            )
            if plan is None or closed is None:
                tps = sweep.closed_step()
                state.closed = tps if tps is not None and tps > 0 else None
            else:
                sweep.step(plan, closed)
        state.spent_s += self.clock() - started
        return None

    def finished(self, state: _SetState) -> SetSweep:
        """The set's sweep as it ended, kept with its session."""
        stopped = state.stopped or FAILED
        if state.sweep is None:  # stopped before its first step (a resumed one: its steps)
            found = capacity_of(state.before, state.closed, self.plan.policy, stopped)
            self.ctx.store.record_capacity(state.session_id, found)
        else:
            found = state.sweep.result(state.closed, stopped)
        return _ended(state.checked.name, state.session_id, found)

    def _sweep_of(self, state: _SetState, ready: Connected) -> Sweep:
        if state.sweep is None:
            state.sweep = Sweep(ready, self.spec, self.plan, self.ctx, self.cell,
                                state.session_id, state.checked.name)  # fmt: skip
            state.sweep.steps.extend(state.before)
        state.sweep.ready = ready
        return state.sweep
