"""`pgdyno capacity`: an open-loop sweep of one pgbench cell at rising arrival rates (`-R`) until
the p99 target is missed, a bisection near the boundary and repeats there (stats/capacity.py
plans and judges; this module runs).

Every step is an ordinary run of the bench runner (`connected`, `run_cells`): stored as it
finishes with its timeline, in one session whose `capacity` column keeps the sweep's steps and
result, rewritten after each step so an interrupted sweep keeps what it found. The sweep starts
from the closed-loop rate: the target's latest closed-loop run of the same cell, else one
closed-loop run made first (stored as a step of phase `closed`). The budget is machine time
for the steps; preparing the dataset comes before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from pgdyno.collect.timeline import sampling_rate
from pgdyno.experiment.bench import Connected, connected, one_cell, run_cells
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import BenchSpec, seconds_per_run
from pgdyno.experiment.session import recorded_session
from pgdyno.experiment.target import Target
from pgdyno.host.machine import HostFacts
from pgdyno.records import RunCell, RunRecord
from pgdyno.records.capacity import BUDGET, CLOSED, FAILED, RUNNING, Capacity, CapacityStep
from pgdyno.stats.capacity import (
    NextStep,
    SweepPolicy,
    capacity_of,
    fits_budget,
    next_step,
    step_of,
)

MIN_STEPS: Final = 2  # a budget that cannot hold two steps cannot bracket anything


@dataclass(frozen=True)
class CapacityPlan:
    """How the sweep searches and judges, and the machine time it may take."""

    policy: SweepPolicy
    budget_s: float


@dataclass(frozen=True)
class CapacityOutcome:
    session_id: int
    records: list[tuple[int, RunRecord]]
    scale: int
    result: Capacity

    @property
    def failed(self) -> list[int]:
        return [run_id for run_id, r in self.records if r.status != "ok"]


def run_capacity(
    spec: BenchSpec,
    plan: CapacityPlan,
    target: Target,
    host: HostFacts,
    ctx: RunContext,
    *,
    command: list[str],
    clock: Callable[[], float] = time.monotonic,
) -> CapacityOutcome:
    """Sweep `spec`'s one cell until the capacity is bracketed, the budget is spent or the load
    generator is the limit."""
    with connected(spec, target, host, ctx) as ready:
        cell = one_cell(spec, host, ready, ctx.log)
        per_step = seconds_per_run(spec)
        most = max(MIN_STEPS, int(plan.budget_s // per_step))
        ctx.progress.planned([replace(cell, index=i, repeat=i + 1) for i in range(most)], per_step)
        with recorded_session(ctx, command, target.label, host, ready.server) as session_id:
            ready.dataset(cell.scale, ready.runner.workloads[cell.workload].dataset, ctx.progress)
            sweep = Sweep(ready, spec, plan, ctx, cell, session_id)
            result = sweep.run(clock)
    return CapacityOutcome(session_id, sweep.records, cell.scale, result)


@dataclass
class Sweep:
    """One sweep in progress: its steps so far, run on `ready` (which a comparison of sets
    replaces before each step, the step's set put in effect: experiment/capacity_sets.py)."""

    ready: Connected
    spec: BenchSpec
    plan: CapacityPlan
    ctx: RunContext
    cell: RunCell
    session_id: int
    set_name: str | None = None  # a plan's set swept: stored with each step's run

    def __post_init__(self) -> None:
        self.records: list[tuple[int, RunRecord]] = []
        self.steps: list[CapacityStep] = []

    def run(self, clock: Callable[[], float]) -> Capacity:
        started = clock()
        closed = self.ctx.store.recent_tps(
            self.cell.workload, self.cell.scale, self.cell.clients, self.ready.info.version,
            self.ctx.history_target or self.ready.target.label, closed_loop=True,
        )  # fmt: skip
        if closed is None:
            self.ctx.progress.phase("measuring the closed-loop rate")
            closed = self.closed_step()
        if closed is None or closed <= 0:
            return self.result(None, FAILED)
        self.ctx.log(f"closed-loop rate {closed:,.0f} tx/s: the sweep starts at a quarter of it")
        while True:
            stopped = self.next_or_stop(closed, clock() - started, self.plan.budget_s)
            if not isinstance(stopped, NextStep):
                break
            self.step(stopped, closed)
        return self.result(closed, stopped)

    def closed_step(self) -> float | None:
        """One closed-loop run, kept as a step of phase `closed`: its TPS, or None."""
        record = self._step(None, CLOSED)
        return record.summary.tps if record.summary and record.status == "ok" else None

    def next_or_stop(self, closed: float, spent_s: float, budget_s: float) -> NextStep | str:
        """The planner's next step, or why the sweep stops (`plan_or_stop`)."""
        return plan_or_stop(self.steps, closed, self.plan.policy, spent_s, budget_s)

    def step(self, plan: NextStep, closed: float) -> None:
        """One step of the plan, stored, and the sweep so far kept with the session."""
        self._step(plan.rate, plan.phase)
        self.ctx.store.record_capacity(
            self.session_id, capacity_of(self.steps, closed, self.plan.policy, RUNNING)
        )

    def result(self, closed: float | None, stopped: str) -> Capacity:
        """What the sweep found, kept with its session."""
        found = capacity_of(self.steps, closed, self.plan.policy, stopped)
        self.ctx.store.record_capacity(self.session_id, found)
        return found

    def _step(self, rate: float | None, phase: str) -> RunRecord:
        """One run at `rate` (None: closed loop), stored, judged and kept as a step."""
        n = len(self.steps)  # a resumed sweep's steps (capacity_sets.py) are counted too
        runner = self.ready.runner
        log_rate = sampling_rate(rate) if self.spec.latency_log == "auto" else None
        runner.spec = self.spec.model_copy(update={
            "rate": rate,
            **({"latency_log": f"{log_rate:g}"} if log_rate is not None and rate else {}),
        })  # fmt: skip
        cell = replace(self.cell, index=n, repeat=n + 1)
        self.ctx.progress.phase(f"{phase} at {rate:,.0f} tx/s" if rate else "closed loop")
        ((run_id, record),) = run_cells(
            self.ready, [cell], self.ctx, session_id=self.session_id, rate=rate,
            set_name=self.set_name,
        )  # fmt: skip
        self.records.append((run_id, record))
        self.steps.append(step_of(run_id, record, phase, self.plan.policy))
        return record


def plan_or_stop(
    steps: Sequence[CapacityStep],
    closed: float,
    policy: SweepPolicy,
    spent_s: float,
    budget_s: float,
) -> NextStep | str:
    """The planner's next step after `steps`, or why the sweep stops: the planner's reason, or
    the budget (a step starts only when the mean step so far still fits in it)."""
    plan = next_step(steps, closed, policy)
    fits = fits_budget(spent_s, len(steps), budget_s)
    return plan if fits or not isinstance(plan, NextStep) else BUDGET
