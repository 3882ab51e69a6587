"""`pgdyno noise`: one pgbench cell run back to back on the sandbox until a budget is spent.

An A/A calibration: every run is the same, so whatever differs between them is this host's
noise. The runs go through the bench runner (`connected`, `run_cells`) and are stored as an
ordinary bench session; `pgdyno.stats.noise` turns them into what the host can resolve.

Runs come in pairs (the rounds of a two-set comparison) until the next pair would not fit in
the budget, and never fewer than `MIN_RUNS`: below three pairs there is no spread to tell by.
The budget is machine time for the runs; preparing the dataset (once per scale) comes before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from pgdyno.experiment.bench import Connected, connected, one_cell, run_cells
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import BenchSpec, seconds_per_run
from pgdyno.experiment.rounds import RoundLog, RoundLoop
from pgdyno.experiment.schedule import InOrder, Schedule
from pgdyno.experiment.session import recorded_session
from pgdyno.experiment.target import Target
from pgdyno.host.machine import HostFacts
from pgdyno.records import RunCell, RunRecord
from pgdyno.stats.noise import PLAN_COMPARISONS, NoiseReport, NoiseRun, noise_report

MIN_RUNS: Final = 6  # three pairs: the fewest with a spread of paired differences worth showing


@dataclass(frozen=True)
class NoiseOutcome:
    session_id: int
    records: list[tuple[int, RunRecord]]
    scale: int
    wall_seconds: list[float]  # per run, overhead (copy, probe, connections) included
    report: NoiseReport

    @property
    def failed(self) -> list[int]:
        return [run_id for run_id, r in self.records if r.status != "ok"]


@dataclass(frozen=True)
class NoisePlan:
    """The machine time for the runs, and the plan the forecasts are for (its comparisons)."""

    budget_s: float
    comparisons: int = PLAN_COMPARISONS


def run_noise(
    spec: BenchSpec,
    plan: NoisePlan,
    target: Target,
    host: HostFacts,
    ctx: RunContext,
    *,
    command: list[str],
    clock: Callable[[], float] = time.monotonic,
) -> NoiseOutcome:
    """Run `spec`'s one cell in pairs until the budget is spent (at least MIN_RUNS runs)."""
    budget_s = plan.budget_s
    with connected(spec, target, host, ctx) as ready:
        cell = one_cell(spec, host, ready, ctx.log)
        per_run = seconds_per_run(spec)
        ctx.progress.planned(_cells(cell, planned_runs(budget_s, per_run)), per_run)
        with recorded_session(ctx, command, target.label, host, ready.server) as session_id:
            _prepare(ready, cell, ctx)
            records, walls = _run_pairs(ready, cell, ctx, session_id, budget_s, clock)
    report = noise_report(
        [run for _, r in records if (run := noise_run(r)) is not None],
        sum(walls) / len(walls),
        comparisons=plan.comparisons,
    )
    return NoiseOutcome(session_id, records, cell.scale, walls, report)


def planned_runs(budget_s: float, per_run_s: float) -> int:
    """Runs the budget should hold at the expected seconds per run, in pairs, at least MIN_RUNS.

    >>> planned_runs(180, 8), planned_runs(10, 8)
    (22, 6)
    """
    pairs = int(budget_s // (2 * per_run_s))
    return max(MIN_RUNS, 2 * pairs)


def _cells(cell: RunCell, count: int) -> list[RunCell]:
    return [replace(cell, index=i, repeat=i + 1) for i in range(count)]


def _prepare(ready: Connected, cell: RunCell, ctx: RunContext) -> None:
    """The dataset before the clock starts: generating it is not the host's noise."""
    ready.dataset(cell.scale, ready.runner.workloads[cell.workload].dataset, ctx.progress)


def _run_pairs(
    ready: Connected,
    cell: RunCell,
    ctx: RunContext,
    session_id: int,
    budget_s: float,
    clock: Callable[[], float],
) -> tuple[list[tuple[int, RunRecord]], list[float]]:
    """Rounds of two runs of `cell` on the one run loop until the next pair would not fit in
    the budget (and at least MIN_RUNS runs)."""
    records: list[tuple[int, RunRecord]] = []
    walls: list[float] = []

    def run_one(one: RunCell, _round_no: int) -> None:
        n = len(records)
        begin = clock()
        records.extend(run_cells(ready, _cells(one, n + 1)[n:], ctx, session_id=session_id))
        walls.append(clock() - begin)

    def after(_round_no: int) -> bool:
        mean = sum(walls) / len(walls)
        return len(records) >= MIN_RUNS and clock() - started + 2 * mean > budget_s

    pair = Schedule((cell, cell), InOrder())
    started = clock()
    RoundLoop(pair, RoundLog(None), run_one, after, lambda _: cell.workload).run()
    return records, walls


def noise_run(record: RunRecord) -> NoiseRun | None:
    """A finished run as the calibration's statistics take it; None without a TPS."""
    if record.status != "ok" or record.summary is None or not record.summary.tps > 0:
        return None
    found = record.interference
    return NoiseRun(
        started_s=datetime.fromisoformat(record.started_at).timestamp(),
        tps=record.summary.tps,
        flagged=found is not None,
        top=found.top if found is not None else (),
    )
