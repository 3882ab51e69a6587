"""`capacity`: the load a server carries while its p99 stays under a target, on the sandbox or
an existing server (here or over SSH), every step stored as a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgdyno.environment import Environment
from pgdyno.experiment.capacity import CapacityOutcome, CapacityPlan, run_capacity
from pgdyno.lab.bench import BenchRequest, opened
from pgdyno.lab.open import Progress
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
