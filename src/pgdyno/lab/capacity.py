"""`capacity`: the load a server carries while its p99 stays under a target, on the sandbox or
an existing server (here or over SSH), every step stored as a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.capacity import CapacityOutcome, CapacityPlan, run_capacity
from pgdyno.lab.bench import BenchRequest, opened
from pgdyno.lab.open import Progress
from pgdyno.records.capacity import CapacityChange
from pgdyno.results.open import open_results
from pgdyno.stats.capacity import compare_capacity
from pgdyno.textsafe import scrub_argv


@dataclass(frozen=True)
class CapacityRequest:
    """Where and what to sweep (a bench request of one cell) and how."""

    bench: BenchRequest
    plan: CapacityPlan


@dataclass(frozen=True)
class CapacityDone:
    outcome: CapacityOutcome
    target: str  # the target's label


def capacity(
    env: Environment, request: CapacityRequest, *, log: Callable[[str], None], progress: Progress
) -> CapacityDone:
    """Open the target and the lab, and sweep."""
    with opened(env, request.bench, log=log, progress=progress) as (target, host, run_ctx):
        command = scrub_argv(["pgdyno", *env.argv])
        outcome = run_capacity(
            request.bench.spec, request.plan, target, host, run_ctx, command=command
        )
    return CapacityDone(outcome, target.label)


def compare_sweeps(env: Environment, baseline: int, candidate: int) -> CapacityChange:
    """Two stored sweeps (sessions) judged against each other on capacity."""
    with open_results(env.results, writing=False) as store:
        found = [(f"session {i}", store.capacity(i)) for i in (baseline, candidate)]
    sweeps = []
    for label, sweep in found:
        if sweep is None:
            raise UsageError(
                f"{label} in {env.results} is no capacity sweep: `pgdyno runs list` shows the "
                "sessions; give two that `pgdyno capacity` made."
            )
        sweeps.append((label, sweep))
    return compare_capacity(sweeps[0], sweeps[1])
