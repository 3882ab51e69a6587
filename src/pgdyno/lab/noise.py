"""`noise`: an A/A calibration of this host on the sandbox (what it can resolve)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgdyno.environment import Environment
from pgdyno.experiment.matrix import BenchSpec
from pgdyno.experiment.noise import NoiseOutcome, NoisePlan, run_noise
from pgdyno.experiment.target import locked_sandbox
from pgdyno.host.machine import read_host
from pgdyno.lab.open import Progress, open_lab
from pgdyno.postgres.binaries import Binaries
from pgdyno.stats.noise import PLAN_COMPARISONS
from pgdyno.textsafe import scrub_argv


@dataclass(frozen=True)
class NoiseRequest:
    """The one cell to run back to back, the machine time for it, the sandbox's binaries, and
    the plan the forecasts are for (its number of comparisons: its error split)."""

    spec: BenchSpec
    budget_s: float
    binaries: Binaries
    comparisons: int = PLAN_COMPARISONS


def noise(
    env: Environment, request: NoiseRequest, *, log: Callable[[str], None], progress: Progress
) -> NoiseOutcome:
    """Lock and start the sandbox, open the lab, run the calibration."""
    host = read_host(env.proc_root, env.sys_root)
    with (
        locked_sandbox(env, request.binaries, {}, log) as target,
        open_lab(env, log=log, progress=progress, keep_files=False) as run_ctx,
    ):
        command = scrub_argv(["pgdyno", *env.argv])
        plan = NoisePlan(request.budget_s, request.comparisons)
        return run_noise(request.spec, plan, target, host, run_ctx, command=command)
